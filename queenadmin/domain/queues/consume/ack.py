"""Ack, lease extend and a transaction's positions: the cursor moves on.

An ack completes, fails, retries or dead-letters offsets of the batch under
a live lease; the cursor's ``committed_offset`` moves past every offset
that is done, and the lease is released once the batch is.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import F, Value
from django.db.models.functions import Greatest, Least

from queenadmin.domain import clock, events, names
from queenadmin.domain.queues import wakeups
from queenadmin.domain.queues.consume.commands import (
    AckItem,
    AckOutcome,
    LeaseExtension,
)
from queenadmin.domain.queues.delivery import runs_delivered_last, runs_trim
from queenadmin.domain.queues.ids import is_uuid
from queenadmin.domain.queues.refs import QueueRef, lock_queue_rows
from queenadmin.domain.queues.store import store
from queenadmin.errors import InvalidArgument, QueueNotFound
from queenadmin.models.queues import ConsumerCursor, DeadLetter, Message, Partition, Queue

# --------------------------------------------------------------------------
# Ack


UNRESOLVABLE = "transaction is unresolvable, already committed, or acknowledgment is stale"
BAD_LEASE = "invalid or expired lease"


def queue_ack(*, items: Sequence[AckItem]) -> list[AckOutcome]:
    """Apply acknowledgments; return one outcome per item, in order.

    ``completed`` moves the group's cursor to the message (earlier ones in
    the batch count as done); ``failed`` spends one of the queue's
    ``retryLimit`` retries and hands the batch back, or files the message
    in the DLQ once they are spent; ``retry`` hands the batch back for
    free; ``dlq`` files the message now. Per (partition, group) the cursor
    stops at the lowest message that will come back. An ack with a
    ``leaseId`` must name the live lease holding the message; without one
    it is unfenced. Refusals are outcomes with ``success: false``. Must be
    the outermost transaction (``queue_ack_in_txn`` runs inside one); where
    the store has ``one_statement_consume`` (PostgreSQL), a call of
    ``completed`` acks only is one autocommit statement (``_ack_at_once``).
    """
    if items and not connection.in_atomic_block and store().one_statement_consume:
        outcomes = _ack_at_once(items)
        if outcomes is not None:
            return outcomes
    return _ack_atomic(items)


@transaction.atomic(durable=True)
def _ack_atomic(items: Sequence[AckItem]) -> list[AckOutcome]:
    return queue_ack_in_txn(items=items, now=clock.now())


_VERDICT_ERRORS: dict[str, str | None] = {
    "applied": None,
    "noop": None,
    "unresolvable": UNRESOLVABLE,
    "bad_lease": BAD_LEASE,
}


def _ack_at_once(items: Sequence[AckItem]) -> list[AckOutcome] | None:
    """``queue_ack`` of ``completed`` acks only, in one statement
    (``Store.ack_completed``); None for anything else, nothing changed."""
    if any(item.status != "completed" or not _is_partition_id(item.partition_id) for item in items):
        return None
    done = store().ack_completed(
        items=[(item.transaction_id, int(item.partition_id), item.lease_id, item.group) for item in items],
        now=clock.now(),
    )
    if done is None:
        return None
    if done.woken:
        wakeups.hub.wake_threadsafe(list(done.woken))
    events.broadcast_on_commit(events.QUEUES_GROUP, {"type": "queues.changed"})
    outcomes = []
    for item, (verdict, released) in zip(items, done.verdicts, strict=True):
        if verdict == "no_partition":
            error: str | None = f"no partition {int(item.partition_id)}"
        else:
            error = _VERDICT_ERRORS[verdict]
        success = verdict in ("applied", "noop")
        outcomes.append(AckOutcome(item.index, item.transaction_id, success, error, released, False, verdict == "noop"))
    return outcomes


def _is_partition_id(raw: str) -> bool:
    return raw.isascii() and raw.isdigit() and len(raw) <= 18


def queue_ack_in_txn(*, items: Sequence[AckItem], now: datetime, fence_done: bool = False) -> list[AckOutcome]:
    """``queue_ack`` inside the caller's transaction, at time ``now``.

    Same outcomes as ``queue_ack``. The caller must hold an open
    transaction (asserted) and commit it: the acked cursors stay row-locked
    until then, and wake-ups and broadcasts go out only on commit. With
    ``fence_done`` (a transaction's acks, protocol 5.1) a fenced ack of a
    message already acked needs the live lease too, instead of being a
    no-op: a bundle sent again then rolls back rather than applying the
    rest of itself a second time.
    """
    assert connection.in_atomic_block
    outcomes: dict[int, AckOutcome] = {}
    by_cursor: dict[tuple[int, str], list[AckItem]] = defaultdict(list)
    wanted: set[int] = set()
    for item in items:
        raw = item.partition_id
        if not _is_partition_id(raw):
            outcomes[item.index] = AckOutcome(
                item.index, item.transaction_id, False, "partitionId is not a partition id"
            )
            continue
        wanted.add(int(raw))
        by_cursor[(int(raw), item.group)].append(item)
    partitions = {
        pid: (qid, qname, opts)
        for pid, qid, qname, opts in Partition.objects.filter(id__in=wanted).values_list(
            "id", "queue_id", "queue__name", "queue__options"
        )
    }
    alive = lock_queue_rows(qid for qid, _, _ in partitions.values())
    partitions = {pid: ref for pid, ref in partitions.items() if ref[0] in alive}
    woken: set[str] = set()
    for (pid, group), group_items in sorted(by_cursor.items()):
        if pid not in partitions:
            for item in group_items:
                outcomes[item.index] = AckOutcome(item.index, item.transaction_id, False, f"no partition {pid}")
            continue
        qid, qname, opts = partitions[pid]
        queue = QueueRef(qid, qname, opts)
        released = _ack_cursor(queue, pid, group, group_items, now, outcomes, fence_done)
        if released:
            woken.add(qname)
    if woken:
        wakeups.notify_on_commit(sorted(woken))
    if outcomes:
        events.broadcast_on_commit(events.QUEUES_GROUP, {"type": "queues.changed"})
    return [outcomes[item.index] for item in items]


def queue_ack_batch_in_txn(*, partition_id: int, group: str, lease_id: str, now: datetime) -> AckOutcome | None:
    """Complete the whole batch ``lease_id`` holds on (partition, group), inside the caller's transaction.

    The ack of the batch's last message, fenced by the lease (as
    ``queue_ack_in_txn`` with ``fence_done``): the cursor moves to the end
    of the batch and the lease is released. None when the lease is not the
    live one there, or its last message is gone (nothing is changed then).
    """
    assert connection.in_atomic_block
    row = (
        ConsumerCursor.objects.filter(partition_id=partition_id, group=group, lease_id=lease_id, leased_until__gt=now)
        .values_list("batch_last", flat=True)
        .first()
    )
    if row is None:
        return None
    last = (
        Message.objects.filter(partition_id=partition_id, offset=row).values_list("transaction_id", flat=True).first()
    )
    if last is None:
        return None
    item = AckItem(0, last, str(partition_id), "completed", lease_id, group=group)
    (outcome,) = queue_ack_in_txn(items=[item], now=now, fence_done=True)
    return outcome


def _ack_cursor(
    queue: QueueRef,
    pid: int,
    group: str,
    items: list[AckItem],
    now: datetime,
    outcomes: dict[int, AckOutcome],
    fence_done: bool = False,
) -> bool:
    """Apply one cursor's acks; return True when messages were handed back."""
    cursors = ConsumerCursor.objects.filter(partition_id=pid, group=group)
    cursor = cursors.select_for_update().first()
    if cursor is None:
        ConsumerCursor.objects.bulk_create([ConsumerCursor(partition_id=pid, group=group)], ignore_conflicts=True)
        cursor = cursors.select_for_update().get()
    offsets: dict[str, list[int]] = defaultdict(list)
    for txn, offset in Message.objects.filter(
        partition_id=pid, transaction_id__in={i.transaction_id for i in items}
    ).values_list("transaction_id", "offset"):
        offsets[txn].append(offset)

    committed = cursor.committed_offset
    delivered_last = max(committed, runs_delivered_last(cursor.delivery_runs))
    live_lease = cursor.lease_id if cursor.lease_id and cursor.leased_until and cursor.leased_until > now else None
    located: list[tuple[int, AckItem]] = []
    for item in items:
        found = offsets.get(item.transaction_id)
        if not found:
            outcomes[item.index] = AckOutcome(item.index, item.transaction_id, False, UNRESOLVABLE)
            continue
        ahead = [o for o in found if o > committed]
        offset = min(ahead) if ahead else max(found)
        if offset <= committed:
            if fence_done and item.lease_id is not None and item.lease_id != live_lease:
                outcomes[item.index] = AckOutcome(item.index, item.transaction_id, False, BAD_LEASE)
            elif item.status == "completed":
                outcomes[item.index] = AckOutcome(item.index, item.transaction_id, True, noop=True)
            else:
                outcomes[item.index] = AckOutcome(item.index, item.transaction_id, False, UNRESOLVABLE)
            continue
        if item.lease_id is not None and (item.lease_id != live_lease or offset > cursor.batch_last):
            outcomes[item.index] = AckOutcome(item.index, item.transaction_id, False, BAD_LEASE)
            continue
        if offset > delivered_last:
            # Never delivered to this group: acking it would move the cursor
            # past messages nobody received.
            outcomes[item.index] = AckOutcome(item.index, item.transaction_id, False, UNRESOLVABLE)
            continue
        located.append((offset, item))
    if not located:
        return False

    located.sort(key=lambda pair: pair[0])
    retry_count = cursor.retry_count
    dead: list[tuple[int, AckItem]] = []
    blocked = False
    results: list[tuple[AckItem, bool, bool]] = []  # item, dlq, noop
    failed = 0
    for offset, item in located:
        if blocked:
            # Below it a message comes back, so this one does too.
            results.append((item, False, False))
            continue
        status = item.status
        if status == "failed":
            failed += 1
        if status == "failed" and retry_count >= queue.retry_limit:
            status = "dlq"
        if status == "completed":
            committed = max(committed, offset)
            retry_count = 0
            results.append((item, False, False))
        elif status == "dlq":
            committed = max(committed, offset)
            dead.append((offset, item))
            retry_count = 0
            results.append((item, True, False))
        else:
            if status == "failed":
                retry_count += 1
            blocked = True
            results.append((item, False, False))

    if dead:
        _dead_letter(queue, pid, group, dead, cursor.retry_count, now)
    next_offset, log_start = Partition.objects.filter(pk=pid).values_list("next_offset", "log_start").get()
    fields: dict[str, Any] = {"committed_offset": committed, "retry_count": retry_count}
    if committed != cursor.committed_offset:
        fields["delivery_runs"] = runs_trim(cursor.delivery_runs, committed)
    skipped = min(committed, log_start - 1) - cursor.committed_offset
    if skipped > 0:
        # Deleted by retention before the group finished them: skipped, not
        # completed (as a claim from below the log start counts them).
        fields["start_offset"] = F("start_offset") + skipped
    # A failed ack hands the rest of the batch back at once, also when the
    # message itself goes to the DLQ: consume loops drop the batch after a
    # nack and pop again.
    nacked = any(item.status == "failed" for _, item in located)
    release = blocked or nacked or committed >= cursor.batch_last
    if release:
        fields.update(lease_id=None, leased_until=None, batch_last=committed)
    if dead:
        fields["dead_lettered"] = F("dead_lettered") + len(dead)
    # Everything the cursor passed that did not go to the DLQ was completed.
    acked = committed - cursor.committed_offset - len(dead)
    if acked:
        fields["acked"] = F("acked") + acked
    if failed:
        fields["failed"] = F("failed") + failed
    ConsumerCursor.objects.filter(pk=cursor.pk).update(**fields)
    released_now = release and cursor.lease_id is not None
    for item, dlq, noop in results:
        outcomes[item.index] = AckOutcome(item.index, item.transaction_id, True, None, released_now, dlq, noop)
    return blocked or (release and committed < next_offset - 1)


def _dead_letter(
    queue: QueueRef, pid: int, group: str, dead: list[tuple[int, AckItem]], retries: int, now: datetime
) -> None:
    errors = {offset: item.error for offset, item in dead}
    rows = Message.objects.filter(partition_id=pid, offset__in=list(errors)).values_list(
        "offset", "transaction_id", "message_id", "payload", "created_at", "producer_sub"
    )
    DeadLetter.objects.bulk_create(
        [
            DeadLetter(
                queue_id=queue.id,
                partition_id=pid,
                group=group,
                offset=offset,
                transaction_id=txn,
                message_id=mid,
                payload=payload,
                error=errors[offset],
                retry_count=retries,
                producer_sub=sub,
                created_at=created,
                failed_at=now,
            )
            for offset, txn, mid, payload, created, sub in rows
        ]
    )


# --------------------------------------------------------------------------
# Lease extend


def queue_lease_extend(*, lease_id: str, seconds: int) -> LeaseExtension:
    """Push back the expiry of every live lease of ``lease_id``.

    The lease then ends ``seconds`` from now, or later: an extension never
    shortens a lease. An expired or released lease, or an id that is no
    UUID (never handed out), is not renewed (``renewed == 0``,
    ``expires_at`` None). Raises ``InvalidArgument`` when ``seconds`` is
    under 1. Must be the outermost transaction
    (``queue_lease_extend_in_txn`` runs inside one).
    """
    if seconds < 1:
        raise InvalidArgument("seconds must be at least 1")
    if not is_uuid(lease_id):
        # Answered without a transaction: BEGIN IMMEDIATE on SQLite would
        # queue this behind every writer for nothing.
        return LeaseExtension(lease_id, 0, None)
    with transaction.atomic(durable=True):
        return queue_lease_extend_in_txn(lease_id=lease_id, seconds=seconds, now=clock.now())


def queue_lease_extend_in_txn(*, lease_id: str, seconds: int, now: datetime) -> LeaseExtension:
    """``queue_lease_extend`` inside the caller's transaction, at ``now``.

    The caller must hold an open transaction (asserted) and commit it.
    """
    assert connection.in_atomic_block
    if seconds < 1:
        raise InvalidArgument("seconds must be at least 1")
    if not is_uuid(lease_id):
        return LeaseExtension(lease_id, 0, None)
    target = now + timedelta(seconds=seconds)
    live = ConsumerCursor.objects.filter(lease_id=lease_id, leased_until__gt=now)
    renewed = live.update(leased_until=Greatest(F("leased_until"), Value(target)))
    if not renewed:
        return LeaseExtension(lease_id, 0, None)
    earliest = (
        ConsumerCursor.objects.filter(lease_id=lease_id)
        .order_by("leased_until")
        .values_list("leased_until", flat=True)
        .first()
    )
    return LeaseExtension(lease_id, renewed, earliest)


# --------------------------------------------------------------------------
# Positions (a transaction's ``positions`` part)


def queue_position_in_txn(*, queue: str, group: str, partition: str, offset: int | None, now: datetime) -> None:
    """Set where ``group`` reads next on ``partition`` of ``queue``.

    ``offset`` is the next offset to read (0 = from the start; past the end
    = after the last message); None forgets the group's cursor there, so it
    starts again like a new one. Releases any lease the group holds on the
    partition. Inside the caller's transaction (asserted). Raises
    ``QueueNotFound`` for a missing queue and ``ValueError`` for a missing
    partition or a negative offset.
    """
    assert connection.in_atomic_block
    # A name no database can store (a NUL, which PostgreSQL refuses even to
    # compare) names nothing: the answer SQLite gives, without asking.
    queue_id = None
    if names.unstorable(queue) is None:
        queue_id = Queue.objects.filter(name=queue).values_list("id", flat=True).first()
    if queue_id is None or not lock_queue_rows([queue_id]):
        raise QueueNotFound()
    found = None
    if names.unstorable(partition) is None:
        found = Partition.objects.filter(queue_id=queue_id, name=partition).values_list("id", "next_offset").first()
    if found is None:
        raise ValueError(f"queue {queue!r} has no partition {partition!r}")
    pid, next_offset = found
    cursors = ConsumerCursor.objects.filter(partition_id=pid, group=group)
    if offset is None:
        cursors.delete()
        return
    if offset < 0:
        raise ValueError("a position's offset is at least 0")
    committed = min(offset - 1, next_offset - 1)
    if cursors.select_for_update().first() is None:
        ConsumerCursor.objects.bulk_create(
            [ConsumerCursor(partition_id=pid, group=group, committed_offset=committed, start_offset=committed)],
            ignore_conflicts=True,
        )
    cursors.update(
        committed_offset=committed,
        start_offset=Least("start_offset", committed),
        lease_id=None,
        leased_until=None,
        batch_last=committed,
        delivery_runs=[],
        retry_count=0,
    )
    wakeups.notify_on_commit([queue])
