"""The operator's view of message leases and of one message's delivery.

A lease belongs to a consumer group's cursor on one partition: the batch
``committed_offset + 1 .. batch_last`` is out under ``lease_id`` until
``leased_until`` (``models.queues.ConsumerCursor``). ``lease_id`` is what a
consumer acks and extends with, a bearer credential like a lock's owner, so
these reads hand it out only as a fingerprint (``masking.mask_token``).

Both reads cost a fixed number of statements whatever the data holds:
``lease_page`` reads one page of cursors (keyset on the cursor id, no
count) and their batches' first message ids, ``message_delivery`` one message through the ``message_id`` index,
then its partition's cursors, its dead letters (through the partition
index), its queue's groups and its first traces. Nothing here writes or
locks. With ``bench/dashboard.py``'s million messages, on 2 shared cores
at load 12: the leases page of 30 leases in a median 86 ms (15 ms of
Django's CPU) with 6 queries, as with 3 leases (24 ms); a message's page
in 48-56 ms (10 ms CPU) with 7 queries, leased or not, with or without
named groups.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from django.db.models.functions import Length, Substr

from queenadmin.domain import clock
from queenadmin.domain.masking import mask_token
from queenadmin.domain.queues.operator.dlq import REPLAY_PREFIX
from queenadmin.domain.queues.traces import TraceRow, traces_for_message
from queenadmin.models.queues import QUEUE_MODE, ConsumerCursor, ConsumerGroup, DeadLetter, Message, Queue

#: Leases on one page of ``lease_page``.
LEASE_PAGE = 50
#: Characters of a payload ``message_delivery`` reads; past it the page
#: shows the beginning, as text, and says how long the payload is.
PAYLOAD_CAP = 64 * 1024
#: Trace events ``message_delivery`` reads (oldest first).
TRACE_CAP = 100
#: Longest text taken for a message id (a UUID is 36 characters).
MAX_MESSAGE_ID = 64

#: No name or id we store holds it; PostgreSQL refuses it in a text value.
_NUL = "\x00"

DeliveryState = Literal["consumed", "leased", "pending", "parked", "dead_letter", "skipped"]


def _attempts(runs: object, first: int, last: int) -> tuple[int, int]:
    """The fewest and most deliveries of any offset in ``first..last``.

    From a cursor's ``delivery_runs`` (``delivery.py``); an offset no run
    covers was delivered 0 times.
    """
    if first > last or not isinstance(runs, list):
        return 0, 0
    low, high, covered = None, 0, 0
    for a, b, n in runs:
        lo, hi = max(a, first), min(b, last)
        if lo > hi:
            continue
        covered += hi - lo + 1
        low = n if low is None else min(low, n)
        high = max(high, n)
    if covered < last - first + 1:
        low = 0
    return low or 0, high


# --------------------------------------------------------------------------
# Leases of a queue


class _OfGroup:
    """A row about one consumer group, which pages show apart when it is queue mode."""

    group: str

    @property
    def is_queue_mode(self) -> bool:
        return self.group == QUEUE_MODE


@dataclass(frozen=True)
class Lease(_OfGroup):
    """One live lease: a group's batch on one partition."""

    #: The cursor's id: the page's keyset.
    id: int
    group: str
    partition: str
    partition_id: int
    #: The lease id's fingerprint (never the id: it acks the batch).
    holder_fp: str
    leased_until: datetime
    #: When the batch was claimed (the lease's start, unless extended).
    claimed_at: datetime | None
    first_offset: int
    last_offset: int
    #: The fewest and most times any message of the batch was delivered
    #: to the group (this delivery included).
    attempts_min: int
    attempts_max: int
    #: Retries the group's failed acks spent on the batch's first message.
    retries: int
    #: The message id of the batch's first message (None: retention took it).
    first_message_id: str | None = None

    @property
    def messages(self) -> int:
        return self.last_offset - self.first_offset + 1


@dataclass(frozen=True)
class LeasePage:
    """A page of a queue's live leases by cursor id; ``next_after`` is None on the last."""

    queue: str
    leases: tuple[Lease, ...]
    next_after: int | None
    #: The groups of the queue (queue mode when it has none), for a filter.
    groups: tuple[str, ...]


def lease_page(
    *, queue: str, group: str | None = None, after: int | None = None, limit: int = LEASE_PAGE
) -> LeasePage | None:
    """The live leases of ``queue`` (of ``group`` only, if given), a page at a time.

    Keyset on the cursor id (``after``: the last id of the previous page);
    reads at most ``limit + 1`` cursors that hold a live lease, never a
    count. A lease whose batch retention has cut short shows what is left
    of it. Returns None when the queue does not exist.
    """
    now = clock.now()
    if _NUL in queue:
        return None
    queue_id = Queue.objects.filter(name=queue).values_list("id", flat=True).first()
    if queue_id is None:
        return None
    rows = ConsumerCursor.objects.filter(partition__queue_id=queue_id, lease_id__isnull=False, leased_until__gt=now)
    if group is not None:
        # No stored name holds a NUL, and PostgreSQL refuses one in a query.
        rows = rows.filter(group=group) if _NUL not in group else rows.none()
    if after is not None:
        rows = rows.filter(id__gt=after)
    page = list(
        rows.order_by("id").values_list(
            "id",
            "group",
            "partition__name",
            "partition_id",
            "lease_id",
            "leased_until",
            "last_claim_at",
            "committed_offset",
            "batch_last",
            "partition__next_offset",
            "delivery_runs",
            "retry_count",
        )[: limit + 1]
    )
    page, more = page[:limit], len(page) > limit
    # Each batch's first message id, in one statement through the
    # (partition, offset) index: the pairs asked for and, at worst, the
    # other combinations of the page's partitions and offsets.
    heads = {(r[3], r[7] + 1) for r in page}
    first_ids = {
        (pid, offset): mid
        for pid, offset, mid in Message.objects.filter(
            partition_id__in={p for p, _ in heads}, offset__in={o for _, o in heads}
        ).values_list("partition_id", "offset", "message_id")
    }
    leases = []
    for cid, g, pname, pid, lease_id, until, claimed, committed, batch_last, next_offset, runs, retries in page:
        assert until is not None  # filtered on: leased_until > now
        first, last = committed + 1, min(batch_last, next_offset - 1)
        low, high = _attempts(runs, first, last)
        leases.append(
            Lease(
                cid,
                g,
                pname,
                pid,
                mask_token(lease_id) or "",
                until,
                claimed,
                first,
                last,
                low,
                high,
                retries,
                first_ids.get((pid, first)),
            )
        )
    names = sorted(ConsumerGroup.objects.filter(queue_id=queue_id).values_list("name", flat=True)) or [QUEUE_MODE]
    return LeasePage(queue, tuple(leases), leases[-1].id if more else None, tuple(names))


# --------------------------------------------------------------------------
# One message


@dataclass(frozen=True)
class DeadLetterEntry:
    """One time a group gave up on the message."""

    group: str
    error: str | None
    retry_count: int
    failed_at: datetime


@dataclass(frozen=True)
class GroupDelivery(_OfGroup):
    """Where one consumer group stands with the message."""

    group: str
    state: DeliveryState
    #: Times the message went out to the group (0: never; unknown once
    #: consumed, since a cursor keeps counts only of what is pending).
    attempts: int | None
    #: The lease's fingerprint and end, when ``state`` is ``leased``.
    holder_fp: str | None = None
    leased_until: datetime | None = None
    claimed_at: datetime | None = None
    #: Retries spent by failed acks, when the message is the group's next.
    retries: int = 0
    #: When a ``parked`` message becomes claimable.
    parked_until: datetime | None = None
    #: The group has no cursor on the partition yet (it reads from the start).
    unread: bool = False


@dataclass(frozen=True)
class MessageDelivery:
    """A message with everything an operator asks about it."""

    queue: str
    partition: str
    partition_id: int
    offset: int
    message_id: str
    transaction_id: str
    trace_id: str | None
    created_at: datetime
    #: The payload pretty-printed, or its first ``PAYLOAD_CAP`` characters
    #: as stored when it is longer (``payload_cut``).
    payload: str
    payload_chars: int
    payload_cut: bool
    groups: tuple[GroupDelivery, ...]
    dead_letters: tuple[DeadLetterEntry, ...]
    traces: tuple[TraceRow, ...]
    #: More trace events exist than ``traces`` holds.
    traces_cut: bool
    namespace: str | None = None
    task: str | None = None
    #: The one group a DLQ replay meant the message for (None: every group);
    #: the others' claims pass over it (their state is ``skipped``).
    for_group: str | None = None

    @property
    def replay_of(self) -> int | None:
        """The id of the dead letter this message is a replay of, if it is one."""
        rest = self.transaction_id.removeprefix(REPLAY_PREFIX)
        return int(rest) if rest != self.transaction_id and rest.isdigit() and len(rest) < 19 else None


def _pretty(text: str) -> str:
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


def message_delivery(*, queue: str, message_id: str) -> MessageDelivery | None:
    """The message ``message_id`` of ``queue`` and its state for every consumer group.

    Returns None when the queue holds no such message (a malformed id
    included). Each group of the queue (queue mode when none is
    registered, and any group with a cursor on the partition) is
    ``dead_letter`` if it gave up on the message, else ``consumed`` at or
    below its committed offset, ``leased`` inside a live lease's batch,
    ``parked`` while a delayed queue holds it back, else ``pending``; a
    group a DLQ replay did not mean the message for is ``skipped``. The
    payload is read up to ``PAYLOAD_CAP`` characters.
    """
    if not message_id or len(message_id) > MAX_MESSAGE_ID or _NUL in message_id or _NUL in queue:
        return None
    now = clock.now()
    row = (
        Message.objects.filter(message_id=message_id, partition__queue__name=queue)
        .annotate(head=Substr("payload", 1, PAYLOAD_CAP + 1), chars=Length("payload"))
        .values_list(
            "partition__queue_id",
            "partition__queue__namespace",
            "partition__queue__task",
            "partition__queue__options",
            "partition__name",
            "partition_id",
            "offset",
            "transaction_id",
            "trace_id",
            "for_group",
            "created_at",
            "head",
            "chars",
        )
        .order_by("id")
        .first()
    )
    if row is None:
        return None
    qid, namespace, task, options, pname, pid, offset, txn, trace_id, for_group, created, head, chars = row
    cut = chars > PAYLOAD_CAP
    payload = head[:PAYLOAD_CAP] if cut else _pretty(head)

    dead = list(
        DeadLetter.objects.filter(partition_id=pid, offset=offset, message_id=message_id)
        .order_by("failed_at", "id")
        .values_list("group", "error", "retry_count", "failed_at")
    )
    dead_groups = {g for g, *_ in dead}
    cursors = {
        c[0]: c[1:]
        for c in ConsumerCursor.objects.filter(partition_id=pid).values_list(
            "group", "committed_offset", "batch_last", "lease_id", "leased_until", "last_claim_at", "delivery_runs",
            "retry_count",
        )
    }  # fmt: skip
    registered = set(ConsumerGroup.objects.filter(queue_id=qid).values_list("name", flat=True))
    names = sorted((registered or {QUEUE_MODE}) | set(cursors) | dead_groups | ({for_group} if for_group else set()))
    delay = int((options or {}).get("delayedProcessing") or 0)
    parked_until = created + timedelta(seconds=delay) if delay else None

    groups = []
    for g in names:
        cursor = cursors.get(g)
        if for_group is not None and g != for_group and g not in dead_groups:
            groups.append(GroupDelivery(g, "skipped", None))
            continue
        if cursor is None:
            state: DeliveryState = "dead_letter" if g in dead_groups else "pending"
            if state == "pending" and parked_until is not None and parked_until > now:
                state = "parked"
            groups.append(
                GroupDelivery(g, state, 0, parked_until=parked_until if state == "parked" else None, unread=True)
            )
            continue
        committed, batch_last, lease_id, until, claimed, runs, retries = cursor
        attempts = _attempts(runs, offset, offset)[1]
        head_retries = retries if offset == committed + 1 else 0
        if g in dead_groups:
            groups.append(GroupDelivery(g, "dead_letter", None))
        elif offset <= committed:
            groups.append(GroupDelivery(g, "consumed", None))
        elif lease_id is not None and until is not None and until > now and offset <= batch_last:
            groups.append(
                GroupDelivery(g, "leased", attempts, mask_token(lease_id), until, claimed, retries=head_retries)
            )
        elif parked_until is not None and parked_until > now:
            groups.append(GroupDelivery(g, "parked", attempts, retries=head_retries, parked_until=parked_until))
        else:
            groups.append(GroupDelivery(g, "pending", attempts, retries=head_retries))

    traces = traces_for_message(partition_id=pid, transaction_id=txn, limit=TRACE_CAP + 1)
    return MessageDelivery(
        queue=queue,
        partition=pname,
        partition_id=pid,
        offset=offset,
        message_id=message_id,
        transaction_id=txn,
        trace_id=trace_id,
        created_at=created,
        payload=payload,
        payload_chars=chars,
        payload_cut=cut,
        groups=tuple(groups),
        dead_letters=tuple(DeadLetterEntry(*d) for d in dead),
        traces=tuple(traces[:TRACE_CAP]),
        traces_cut=len(traces) > TRACE_CAP,
        namespace=namespace,
        task=task,
        for_group=for_group,
    )
