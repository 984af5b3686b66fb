"""Timer commands, results, and the rules every caller shares."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from queenadmin.conf import settings
from queenadmin.domain import names
from queenadmin.errors import NameTooLong, TimerHorizonExceeded, TimersBadRequest, TimersPayloadTooLarge
from queenadmin.plumbing import db

DEFAULT_PARTITION = "Default"
#: A timer that keeps failing is dead-lettered under this consumer group, at
#: offset ``NEVER_LOGGED`` (-1: its message never reached the log, whose
#: offsets start at 0).
DLQ_GROUP = "__timer__"
#: The lock whose permits the firing loops hold (our own lock, dogfooded).
LOOP_LOCK = "queenadmin.timers"
MAX_ATTEMPTS = 5
#: Engine names (queue, partition) fit a 511-byte store key (protocol 12).
MAX_NAME_BYTES = 511
MAX_TXN_BYTES = 65535
#: A timer key for ``?mode=count&prefix=`` is at most this long.
MAX_COUNT_PREFIX_BYTES = 128
MAX_PAGE_LIMIT = 1000
#: A filter's due times lie in these years (a chart's buckets then never
#: leave the calendar).
EARLIEST_DUE = datetime(1970, 1, 1, tzinfo=UTC)
LATEST_DUE = datetime(9000, 1, 1, tzinfo=UTC)
DEFAULT_PAGE_LIMIT = 100

Status = Literal["scheduled", "rescheduled", "cancelled", "absent", "moved", "fired"]


def _bad(detail: str, reason: str = "timers_bad_request") -> TimersBadRequest:
    return TimersBadRequest(detail, reason=reason)


@dataclass(frozen=True, slots=True)
class TimerSchedule:
    """Schedule (or replace) the timer ``(queue, timer_key)``, ``delay`` from now.

    A delay in the past is legal: the timer fires on the next step.
    """

    queue: str
    timer_key: str
    #: The message body as the client sent it (base64-decoded).
    payload: bytes
    delay: timedelta
    #: The fired message's ``transactionId``.
    txn: str
    partition: str = DEFAULT_PARTITION
    encrypted: bool = False
    producer_sub: str | None = None


@dataclass(frozen=True, slots=True)
class TimerCancel:
    """Remove the pending timer; ``txn`` is echoed when there is none."""

    queue: str
    timer_key: str
    txn: str | None = None


TimerOp = TimerSchedule | TimerCancel


@dataclass(frozen=True, slots=True)
class TimerOutcome:
    """What one schedule, cancel, move or fire-now did.

    ``absent`` means no timer was pending under the key: it may already
    have fired (there is no tombstone; the log has its ``txn``).
    """

    status: Status
    queue: str
    timer_key: str
    txn: str | None
    message_id: str | None = None
    deliver_at: datetime | None = None

    @property
    def ok(self) -> bool:
        return self.status != "absent"


@dataclass(frozen=True, slots=True)
class TimerRow:
    """A pending timer as the reads show it (``payload`` only on a peek)."""

    id: int
    queue: str
    timer_key: str
    partition: str
    deliver_at: datetime
    fire_at: datetime
    txn: str
    message_id: str
    encrypted: bool
    producer_sub: str | None
    attempts: int
    last_error: str | None
    created_at: datetime
    updated_at: datetime
    payload: bytes | None = None

    @property
    def payload_b64(self) -> str | None:
        return None if self.payload is None else base64.b64encode(self.payload).decode("ascii")


@dataclass(frozen=True, slots=True)
class TimerPage:
    rows: tuple[TimerRow, ...]
    truncated: bool
    #: The cursor of the next page: a timer key (per-queue lists) or
    #: ``"<deliver_at iso>|<id>"`` (the pending list across queues).
    next_after: str | None


@dataclass(frozen=True, slots=True)
class TimerFilter:
    """Which pending timers a dashboard list, count, chart or bulk action means.

    Every part is optional: ``queue`` exact, ``key_prefix`` a byte-order
    prefix of the key, and the due time in ``[due_from, due_to)``.
    """

    queue: str = ""
    key_prefix: str = ""
    due_from: datetime | None = None
    due_to: datetime | None = None

    def describe(self) -> str:
        """The filter in words, for the audit trail and confirmations."""
        parts = []
        if self.queue:
            parts.append(f"queue {self.queue}")
        if self.key_prefix:
            parts.append(f"key starts with {self.key_prefix!r}")
        if self.due_from is not None:
            parts.append(f"due from {self.due_from.isoformat()}")
        if self.due_to is not None:
            parts.append(f"due before {self.due_to.isoformat()}")
        return ", ".join(parts) if parts else "every pending timer"


# --------------------------------------------------------------------------
# Rules


def check_name(value: str, what: str) -> str:
    """A queue, partition or timer key to store: non-empty, within the key
    budget, keeping the rule of every stored name (``domain.names``)."""
    if not value:
        raise _bad(f"{what} is required", "timers_queue_required" if what == "queue" else "timers_bad_request")
    fault = names.fault(value)
    if fault is not None:
        raise _bad(f"{what} {fault}")
    if len(value.encode()) > MAX_NAME_BYTES:
        raise NameTooLong(f"{what} is over {MAX_NAME_BYTES} bytes")
    return value


def check_key(value: str) -> str:
    """A timer key: the same rules as a name."""
    return check_name(value, "timerKey")


def check_lookup(value: str, what: str) -> str:
    """A queue or timer key to look up or cancel: ``check_name`` without the
    rule of stored names, so that a timer stored before it is found."""
    if not value:
        raise _bad(f"{what} is required", "timers_queue_required" if what == "queue" else "timers_bad_request")
    fault = names.unstorable(value)
    if fault is not None:
        raise _bad(f"{what} {fault}")
    return value


def check_filter(selection: TimerFilter) -> TimerFilter:
    """``selection`` if its parts make sense, else ``TimersBadRequest``."""
    if "\x00" in selection.queue or "\x00" in selection.key_prefix:
        raise _bad("a filter must not contain NUL")
    if len(selection.queue.encode()) > MAX_NAME_BYTES or len(selection.key_prefix.encode()) > MAX_NAME_BYTES:
        raise NameTooLong(f"a filter's queue and key prefix are at most {MAX_NAME_BYTES} bytes")
    for moment in (selection.due_from, selection.due_to):
        if moment is not None and not EARLIEST_DUE <= moment <= LATEST_DUE:
            raise _bad(f"a due time is between {EARLIEST_DUE:%Y} and {LATEST_DUE:%Y}")
    if selection.due_from is not None and selection.due_to is not None and selection.due_from >= selection.due_to:
        raise _bad("the due range is empty: from must be before to")
    return selection


def check_txn(value: str) -> str:
    if not value:
        raise _bad("txn is required")
    if len(value.encode()) > MAX_TXN_BYTES:
        raise _bad(f"txn is over {MAX_TXN_BYTES} bytes")
    return value


def check_payload(payload: bytes) -> bytes:
    limit = settings.TIMERS_MAX_PAYLOAD_BYTES
    if len(payload) > limit:
        raise TimersPayloadTooLarge(f"the decoded payload is over {limit} bytes")
    return payload


def check_delay(delay: timedelta) -> timedelta:
    horizon = timedelta(seconds=settings.TIMERS_HORIZON_SECONDS)
    if delay > horizon:
        raise TimerHorizonExceeded(f"delayMs is past the {int(horizon.total_seconds())} s horizon")
    return delay


def check_schedule(op: TimerSchedule) -> TimerSchedule:
    """Return ``op`` if it keeps every rule, else raise the refusal."""
    check_name(op.queue, "queue")
    check_key(op.timer_key)
    check_name(op.partition, "partition")
    check_txn(op.txn)
    check_payload(op.payload)
    check_delay(op.delay)
    return op


def check_unique_keys(ops: Sequence[TimerOp]) -> None:
    seen: set[tuple[str, str]] = set()
    for op in ops:
        ident = (op.queue, op.timer_key)
        if ident in seen:
            raise _bad("a (queue, timerKey) appears more than once in one call")
        seen.add(ident)


def _strict_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def payload_json_of(payload: bytes) -> str:
    """The fired message's body: the payload as compact JSON when it is JSON
    text, else ``{"_raw_b64": <base64>}`` (Queen's rule for what is not
    JSON: never lose the bytes)."""
    try:
        text = db.json_text(json.loads(payload.decode("utf-8"), parse_constant=_strict_constant))
        text.encode()  # a lone surrogate (JSON can spell one) is no text
        return text
    except (UnicodeError, ValueError, RecursionError):
        return db.json_text({"_raw_b64": base64.b64encode(payload).decode("ascii")})
