"""The timers wire language (protocol.md section 4): JSON to commands, outcomes to JSON.

Validation is all-or-nothing, in Queen's order: per op the object, the op,
server-owned fields, queue, timerKey, partition, then delayMs, txn and
payload of a schedule; then one (queue, timerKey) per call; then the
payload's decoding, size and the horizon.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import replace
from datetime import timedelta
from typing import Any, Literal

from queenadmin.api.schemas.common import MicrosZTime
from queenadmin.api.wire.answers import Answer, Key, Many, kv_refusal, list_of
from queenadmin.api.wire.common import reasoned
from queenadmin.api.wire.fields import NO_NUL, SOME_TEXT, Call, Field, Op, Ops
from queenadmin.conf import settings
from queenadmin.domain import clock, names, timers
from queenadmin.domain.timers import ops as timer_ops
from queenadmin.errors import TimersBadRequest

OPS = frozenset({"schedule", "reschedule", "cancel"})
#: Fields only the server sets (protocol 4.2); so is any field starting "_".
SERVER_OWNED = frozenset(
    {
        "producerSub",
        "producer_sub",
        "messageId",
        "message_id",
        "tenant",
        "tenantId",
        "_tenant",
        "tenant_id",
        "deliverAt",
        "deliver_at",
        "delaySeconds",
        "delay_seconds",
        "attempts",
        "claimToken",
        "claim_token",
        "claimedUntil",
    }
)


_bad = reasoned(TimersBadRequest)

# --------------------------------------------------------------------------
# The fields of a timer operation (protocol 4.2, 4.6), declared once: the
# parser below reads them and the document shows them (``CALL``).

#: Standard base64 with its padding (``b64decode(validate=True)``).
BASE64 = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
_NAME_DOC = (
    f"no control or bidirectional formatting characters, at most {timer_ops.MAX_NAME_BYTES} bytes of UTF-8 (413 above)"
)
TIMER_KEY = Field(
    "string",
    "timers_bad_request",
    "timers_bad_request",
    min_length=1,
    max_length=timer_ops.MAX_NAME_BYTES,
    pattern=names.SCHEMA_PATTERN,
    null_is_bad=True,
    doc=_NAME_DOC,
)
QUEUE = replace(TIMER_KEY, reason="timers_queue_required", missing="timers_queue_required")
#: Not null when present.
PARTITION = replace(TIMER_KEY, missing=None, default=timers.DEFAULT_PARTITION)
_HORIZON_MS = type(settings).TIMERS_HORIZON_SECONDS * 1000
#: Past the horizon the domain answers 403 (``timers.check_schedule``).
DELAY = Field(
    "number",
    "timers_delay_required",
    "timers_delay_required",
    null_is_bad=True,
    schema_extra={"maximum": _HORIZON_MS},
    doc="relative milliseconds; a past (negative) delay fires at once; 403 past the horizon (90 days)",
)
TXN = Field(
    "string",
    "timers_bad_request",
    "timers_bad_request",
    min_length=1,
    max_length=timer_ops.MAX_TXN_BYTES,
    pattern=SOME_TEXT,
    null_is_bad=True,
    doc="the fired message's transactionId",
)
PAYLOAD = Field(
    "string",
    "timers_payload_required",
    "timers_payload_required",
    pattern=BASE64,
    null_is_bad=True,
    doc="base64 of the message body (JSON text), at most 1 MiB; zstd with payloadZstd",
)
#: JSON Schema cannot describe a zstd frame, so only the plain form is shown.
PAYLOAD_ZSTD = Field(
    "boolean",
    "timers_bad_request",
    default=False,
    schema_extra={"const": False},
    doc="true: the payload is a zstd frame, stored decompressed (400 timers_payload_not_zstd otherwise)",
)
ENCRYPTED = Field("boolean", "timers_bad_request", default=False)
#: A cancel looks its timer up: a name over the budget is simply absent.
CANCEL_QUEUE = replace(QUEUE, max_length=None, pattern=SOME_TEXT, doc="")
CANCEL_KEY = replace(TIMER_KEY, max_length=None, pattern=SOME_TEXT, doc="")
CANCEL_PARTITION = replace(PARTITION, max_length=None, pattern=SOME_TEXT, doc="not null when present; unused")
CANCEL_TXN = Field("string", "timers_bad_request", pattern=NO_NUL, doc="echoed in the answer")
#: Fields only the server sets, and any starting with ``_``, are refused by name.
_NO_SERVER_FIELDS = {"propertyNames": {"not": {"anyOf": [{"enum": sorted(SERVER_OWNED)}, {"pattern": "^_"}]}}}


def _op(name: str, ops: tuple[str, ...], **fields: Field) -> Op:
    kind = Field("string", "timers_bad_op", "timers_bad_op", schema_extra={"enum": list(ops)})
    return Op(name, {"op": kind, **fields}, extra=_NO_SERVER_FIELDS, tenant_free=False)


_SCHEDULE = _op(
    "TimerScheduleIn",
    ("schedule", "reschedule"),
    queue=QUEUE,
    timerKey=TIMER_KEY,
    delayMs=DELAY,
    txn=TXN,
    payload=PAYLOAD,
    partition=PARTITION,
    payloadZstd=PAYLOAD_ZSTD,
    encrypted=ENCRYPTED,
)
_CANCEL = _op(
    "TimerCancelIn", ("cancel",), queue=CANCEL_QUEUE, timerKey=CANCEL_KEY, partition=CANCEL_PARTITION, txn=CANCEL_TXN
)
OPERATIONS = Ops(
    "TimerOpIn",
    {"schedule": _SCHEDULE, "reschedule": _SCHEDULE, "cancel": _CANCEL},
    doc="One operation; ``op`` says which fields it takes.",
)
CALL = Call("TimersCallIn", OPERATIONS, type(settings).TIMERS_MAX_OPS_PER_CALL, doc="no (queue, timerKey) twice")


def _validate(index: int, raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise _bad("timers_bad_request", f"op {index} is not an object")
    op = raw.get("op")
    if not isinstance(op, str) or op not in OPS:
        raise _bad("timers_bad_op", f"op {index}: op must be schedule, reschedule or cancel")
    for name in raw:
        if name in SERVER_OWNED or name.startswith("_"):
            raise _bad(
                "timers_server_owned_field",
                f"op {index}: field {name} is server-owned and cannot be supplied (the message id is minted "
                "by the broker, and deliverAt is not expressible: send the relative delayMs)",
            )

    def bad(reason: str, detail: str) -> TimersBadRequest:
        return _bad(reason, f"op {index}: {detail}")

    QUEUE.read(raw, "queue", bad)
    TIMER_KEY.read(raw, "timerKey", bad)
    PARTITION.read(raw, "partition", bad)
    if op != "cancel":
        DELAY.read(raw, "delayMs", bad)
        TXN.read(raw, "txn", bad)
        PAYLOAD.read(raw, "payload", bad)
    else:
        CANCEL_TXN.read(raw, "txn", bad)
    for name in ("queue", "timerKey", "partition", "txn"):
        # PostgreSQL cannot store NUL in text; SQLite could, so both refuse.
        if "\x00" in (raw.get(name) or ""):
            raise _bad("timers_bad_request", f"op {index}: {name} must not contain NUL")
    return raw


def _payload(raw: dict[str, Any], index: int) -> bytes:
    try:
        payload = base64.b64decode(raw["payload"], validate=True)
    except (binascii.Error, ValueError) as exc:
        raise _bad("timers_payload_not_base64", f"op {index}: payload is not valid base64") from exc
    if PAYLOAD_ZSTD.read(raw, "payloadZstd", lambda reason, detail: _bad(reason, f"op {index}: {detail}")):
        import zstandard

        limit = settings.TIMERS_MAX_PAYLOAD_BYTES
        try:
            with zstandard.ZstdDecompressor().stream_reader(payload) as reader:
                payload = reader.read(limit + 1)
        except zstandard.ZstdError as exc:
            raise _bad("timers_payload_not_zstd", f"op {index}: payload is not zstd data") from exc
    return payload


def _delay(value: int | float) -> timedelta:
    # Microsecond resolution, as Queen's make_interval(secs => delayMs / 1000).
    # A delay past the horizon is refused by the domain; one far past any
    # date (1e300) is refused here before timedelta overflows.
    limit_ms = (settings.TIMERS_HORIZON_SECONDS + 1) * 1000
    clamped = max(-limit_ms, min(limit_ms, value))
    return timedelta(microseconds=round(clamped * 1000))


def _command(index: int, raw: dict[str, Any]) -> timers.TimerOp:
    queue, key = raw["queue"], raw["timerKey"]
    if raw["op"] == "cancel":
        return timers.TimerCancel(queue, key, raw.get("txn"))
    return timers.TimerSchedule(
        queue=queue,
        timer_key=key,
        payload=_payload(raw, index),
        delay=_delay(raw["delayMs"]),
        txn=raw["txn"],
        partition=raw.get("partition") or timers.DEFAULT_PARTITION,
        encrypted=ENCRYPTED.read(raw, "encrypted", lambda reason, detail: _bad(reason, f"op {index}: {detail}")),
    )


def parse_timer_ops(raw_ops: Any, *, max_ops: int | None = None) -> list[timers.TimerOp]:
    """A whole call as commands; raise ``TimersBadRequest`` with its reason."""
    if not isinstance(raw_ops, list):
        raise _bad("timers_bad_body", "body must be an array or {operations: [...]}")
    max_ops = max_ops or settings.TIMERS_MAX_OPS_PER_CALL
    if len(raw_ops) > max_ops:
        raise _bad("timers_too_many_ops", f"at most {max_ops} operations per call")
    checked = [_validate(i, raw) for i, raw in enumerate(raw_ops)]
    seen: set[tuple[str, str]] = set()
    for raw in checked:
        ident = (raw["queue"], raw["timerKey"])
        if ident in seen:
            raise _bad("timers_bad_request", "a (queue, timerKey) appears more than once in one call")
        seen.add(ident)
    ops = [_command(i, raw) for i, raw in enumerate(checked)]
    for op in ops:
        if isinstance(op, timers.TimerSchedule):
            timers.check_schedule(op)
    return ops


# --------------------------------------------------------------------------
# Outcomes and rows to JSON (protocol 4.3, 4.4)


_TIME = Key(MicrosZTime, via=clock.iso_micros_z)
_WHERE: dict[str, Any] = {"queue": str, "timerKey": str}
SCHEDULED = Answer(
    "ScheduledOut",
    ok=Key(Literal[True], src="ok"),
    status=Literal["scheduled", "rescheduled"],
    **_WHERE,
    txn=str,
    messageId=Key(str, "the id the fired message will have"),
    deliverAt=_TIME,
)
CANCELLED = Answer(
    "CancelledOut",
    ok=Key(Literal[True], src="ok"),
    status=Key(Literal["cancelled"], src="status"),
    **_WHERE,
    txn=Key(str, "the txn of the removed timer"),
)
ABSENT = Answer(
    "AbsentOut",
    doc="No pending timer under the key: it was cancelled or has fired.",
    ok=Key(Literal[False], src="ok"),
    status=Key(Literal["absent"], src="status"),
    **_WHERE,
    txn=Key(str | None, "the txn the cancel gave, echoed"),
)
_OUTCOMES = {"scheduled": SCHEDULED, "rescheduled": SCHEDULED, "cancelled": CANCELLED, "absent": ABSENT}


def outcome_out(outcome: timers.TimerOutcome) -> dict[str, Any]:
    return _OUTCOMES[outcome.status].render(outcome)


CALL_OUT = Answer(
    "TimersCallOut",
    results=Key(
        list_of(SCHEDULED, CANCELLED, ABSENT), src=".", via=lambda outcomes: [outcome_out(o) for o in outcomes]
    ),
)
ROW = Answer(
    "TimerRowOut",
    **_WHERE,
    partition=str,
    deliverAt=_TIME,
    txn=str,
    messageId=str,
    payloadZstd=Literal[False],
    encrypted=bool,
    producerSub=str | None,
    attempts=int,
    lastError=str | None,
    claimed=Literal[False],
    createdAt=_TIME,
    updatedAt=_TIME,
)
FOUND = Answer(
    "TimerFoundOut",
    first=("found",),
    **ROW.keys,
    found=Literal[True],
    payload=Key(str, "base64 of the stored (decompressed) payload", src="payload_b64"),
)
#: No pending timer: ``queue`` and ``timerKey`` as asked.
MISSING = Answer("TimerMissingOut", args=("queue", "timer_key"), found=Literal[False], **_WHERE)
PAGE = Answer("TimerListOut", rows=Many(ROW), truncated=bool, nextAfter=str | None)
COUNT = Answer("TimerCountOut", args=("count",), count=int)
BAD_REQUEST = kv_refusal(
    "TimersBadRequestOut",
    "400: ``reason`` names the refusal (protocol 4.6).",
    error=Literal["timers_bad_request"],
)
HORIZON = kv_refusal(
    "TimersHorizonOut",
    "403: the timer would be due past the 90-day horizon.",
    error=Literal["timer_horizon_exceeded"],
    reason=Literal["timers_horizon"],
)
TOO_LARGE = kv_refusal(
    "TimersTooLargeOut",
    "413: the decoded payload is over 1 MiB.",
    error=Literal["payload_too_large"],
    reason=Literal["timers_payload_too_large"],
)


def peek_out(queue: str, timer_key: str, row: timers.TimerRow | None) -> dict[str, Any]:
    return MISSING.render(None, queue, timer_key) if row is None else FOUND.render(row)


def page_limit(raw: str | None) -> int:
    """``?limit=``: default 100, clamped to 1..1000, never refused (protocol 4.4)."""
    if raw is None or raw == "":
        return timers.DEFAULT_PAGE_LIMIT
    try:
        value = int(float(raw))
    except (ValueError, OverflowError):
        return timers.DEFAULT_PAGE_LIMIT
    return max(1, min(timers.MAX_PAGE_LIMIT, value))
