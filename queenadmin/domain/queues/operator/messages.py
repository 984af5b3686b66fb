"""An operator's writes on one message: delete, retry from the DLQ, move to the DLQ.

A message is named by its partition id and transaction id, as Queen's
console names it. Each write takes its queue row first (``lock_queue_rows``)
like every writer of a queue's rows, then (moving to the DLQ) the group's
cursor row, the order claims and acks use.

Offsets have no gaps when pushed; a delete leaves one. Claims skip deleted
offsets (``consume.pop._skip_deleted``), and depth counts a deleted message as
pending until each group's cursor passes it, since depth is arithmetic on
offsets.

Given a ``who`` (the API's caller, ``api/audit.py``), each records its
audit entry in its transaction when it changed something: the queue is the
target (``queue.message_delete``, ``dlq.retry``, ``dlq.move``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import connection, transaction
from django.db.models import F

from queenadmin.domain import clock, events
from queenadmin.domain.audit import Who
from queenadmin.domain.queues import wakeups
from queenadmin.domain.queues.delivery import runs_trim
from queenadmin.domain.queues.operator.dlq import replay_transaction_id
from queenadmin.domain.queues.push import PushItem, PushResult, queue_push_in_txn
from queenadmin.domain.queues.refs import lock_queue_rows
from queenadmin.errors import MessageNotFound, MessageNotNext, NotDeadLettered
from queenadmin.models.queues import QUEUE_MODE, ConsumerCursor, DeadLetter, Message, Partition


@dataclass(frozen=True)
class MessageDeleted:
    """``deleted`` is False when no such message was stored."""

    partition_id: int
    transaction_id: str
    deleted: bool


@dataclass(frozen=True)
class MessageRetried:
    """The dead letters of a message went back into its partition as ``pushed``."""

    queue: str
    partition: str
    partition_id: int
    transaction_id: str
    pushed: PushResult
    dead_letters_removed: int


@dataclass(frozen=True)
class MessageDeadLettered:
    queue: str
    partition: str
    partition_id: int
    transaction_id: str
    group: str
    offset: int


def _queue_of(partition_id: int) -> tuple[int, str, str]:
    """The partition's queue id, queue name and partition name, the queue row locked."""
    found = Partition.objects.filter(id=partition_id).values_list("queue_id", "queue__name", "name").first()
    if found is None or not lock_queue_rows([found[0]]):
        raise MessageNotFound()
    return found


@transaction.atomic(durable=True)
def queue_message_delete(*, partition_id: int, transaction_id: str, who: Who | None = None) -> MessageDeleted:
    """Delete the message(s) ``transaction_id`` of a partition, with their dead letters.

    No consumer gets it afterwards (claims skip the gap); one holding it in
    a leased batch can still ack the rest of the batch. Returns
    ``deleted=False`` when nothing matched. With ``who``, a delete writes
    ``who``'s audit entry. Must be the outermost transaction
    (``queue_message_delete_in_txn`` runs inside one).
    """
    return queue_message_delete_in_txn(
        partition_id=partition_id, transaction_id=transaction_id, now=clock.now(), who=who
    )


def queue_message_delete_in_txn(
    *, partition_id: int, transaction_id: str, now: datetime, who: Who | None = None
) -> MessageDeleted:
    """``queue_message_delete`` inside the caller's transaction (asserted)."""
    assert connection.in_atomic_block
    found = Partition.objects.filter(id=partition_id).values_list("queue_id", "queue__name", "name").first()
    if found is None or not lock_queue_rows([found[0]]):
        return MessageDeleted(partition_id, transaction_id, False)
    messages = Message.objects.filter(partition_id=partition_id, transaction_id=transaction_id)
    offsets = list(messages.values_list("offset", flat=True))
    if not offsets:
        return MessageDeleted(partition_id, transaction_id, False)
    dead, _ = DeadLetter.objects.filter(partition_id=partition_id, offset__in=offsets).delete()
    messages.delete()
    if who is not None:
        shown = ", ".join(str(o) for o in sorted(offsets)[:20])
        who.record_in_txn(
            now=now,
            action="queue.message_delete",
            target=found[1],
            before=f"message {transaction_id} in partition {found[2]} (offsets {shown}), {dead} dead letters",
            after="deleted: consumers skip it",
        )
    events.broadcast_on_commit(events.QUEUES_GROUP, {"type": "queues.changed", "queues": [found[1]]})
    return MessageDeleted(partition_id, transaction_id, True)


@transaction.atomic(durable=True)
def queue_message_retry(*, partition_id: int, transaction_id: str, who: Who | None = None) -> MessageRetried:
    """Put a dead-lettered message back: push its payload again, drop its dead letters.

    The copy goes to the end of the same partition with transaction id
    ``dlq:<first dead letter id>`` (so a retry sent twice pushes once, as
    Queen's DLQ replay does) and every group reads it. Raises
    ``MessageNotFound`` for an unknown partition and ``NotDeadLettered``
    when the message has no dead letter. With ``who``, writes ``who``'s
    audit entry. Must be the outermost transaction
    (``queue_message_retry_in_txn`` runs inside one).
    """
    return queue_message_retry_in_txn(
        partition_id=partition_id, transaction_id=transaction_id, now=clock.now(), who=who
    )


def queue_message_retry_in_txn(
    *, partition_id: int, transaction_id: str, now: datetime, who: Who | None = None
) -> MessageRetried:
    """``queue_message_retry`` inside the caller's transaction (asserted)."""
    assert connection.in_atomic_block
    _, queue, partition = _queue_of(partition_id)
    dead = list(
        DeadLetter.objects.filter(partition_id=partition_id, transaction_id=transaction_id)
        .order_by("id")
        .values_list("id", "payload", "producer_sub")
    )
    if not dead:
        raise NotDeadLettered()
    # The copy keeps who pushed the message.
    first_id, payload, sub = dead[0]
    item = PushItem(queue, partition, payload, transaction_id=replay_transaction_id(first_id), producer_sub=sub)
    (pushed,) = queue_push_in_txn(items=[item], now=now)
    DeadLetter.objects.filter(id__in=[d[0] for d in dead]).delete()
    wakeups.notify_on_commit([queue])
    if who is not None:
        who.record_in_txn(
            now=now,
            action="dlq.retry",
            target=queue,
            before=f"message {transaction_id} in partition {partition}: {len(dead)} dead letters",
            after=(
                f"pushed again for every consumer group as {pushed.transaction_id} ({pushed.status}); "
                "its dead letters removed"
            ),
        )
    return MessageRetried(queue, partition, partition_id, transaction_id, pushed, len(dead))


@transaction.atomic(durable=True)
def queue_message_dead_letter(
    *,
    partition_id: int,
    transaction_id: str,
    group: str = QUEUE_MODE,
    error: str | None = None,
    who: Who | None = None,
) -> MessageDeadLettered:
    """File a group's next message in its dead-letter queue and move the group past it.

    In an offset log a group can only give up on the message its cursor
    stands before: so the message must be ``group``'s next unfinished one
    and not under a live lease (``MessageNotNext`` otherwise; a lease
    holder nacks with the ``dlq`` status instead). Raises
    ``MessageNotFound`` when the partition has no such message. With
    ``who``, writes ``who``'s audit entry. Must be the outermost
    transaction (``queue_message_dead_letter_in_txn`` runs inside one).
    """
    return queue_message_dead_letter_in_txn(
        partition_id=partition_id, transaction_id=transaction_id, group=group, error=error, now=clock.now(), who=who
    )


def queue_message_dead_letter_in_txn(
    *, partition_id: int, transaction_id: str, group: str, error: str | None, now: datetime, who: Who | None = None
) -> MessageDeadLettered:
    """``queue_message_dead_letter`` inside the caller's transaction (asserted)."""
    assert connection.in_atomic_block
    queue_id, queue, partition = _queue_of(partition_id)
    message = (
        Message.objects.filter(partition_id=partition_id, transaction_id=transaction_id)
        .order_by("offset")
        .values_list("offset", "message_id", "payload", "created_at", "producer_sub")
        .first()
    )
    if message is None:
        raise MessageNotFound()
    offset, message_id, payload, created_at, producer_sub = message
    cursors = ConsumerCursor.objects.filter(partition_id=partition_id, group=group)
    cursor = cursors.select_for_update().first()
    if cursor is None:
        ConsumerCursor.objects.bulk_create(
            [ConsumerCursor(partition_id=partition_id, group=group)], ignore_conflicts=True
        )
        cursor = cursors.select_for_update().get()
    live = cursor.lease_id is not None and cursor.leased_until is not None and cursor.leased_until > now
    # Only deleted offsets may lie between the cursor and the message.
    between = Message.objects.filter(
        partition_id=partition_id, offset__gt=cursor.committed_offset, offset__lt=offset
    ).exists()
    if live or offset <= cursor.committed_offset or between:
        raise MessageNotNext()
    DeadLetter.objects.create(
        queue_id=queue_id,
        partition_id=partition_id,
        group=group,
        offset=offset,
        transaction_id=transaction_id,
        message_id=message_id,
        payload=payload,
        error=error,
        retry_count=cursor.retry_count,
        producer_sub=producer_sub,
        created_at=created_at,
        failed_at=now,
    )
    # SQLite ignores FOR UPDATE; the committed offset is compared as well.
    moved = ConsumerCursor.objects.filter(pk=cursor.pk, committed_offset=cursor.committed_offset).update(
        committed_offset=offset,
        batch_last=offset,
        lease_id=None,
        leased_until=None,
        retry_count=0,
        delivery_runs=runs_trim(cursor.delivery_runs, offset),
        dead_lettered=F("dead_lettered") + 1,
    )
    if not moved:
        raise MessageNotNext()
    if who is not None:
        label = "queue mode" if group == QUEUE_MODE else group
        who.record_in_txn(
            now=now,
            action="dlq.move",
            target=queue,
            before=f"message {transaction_id} in partition {partition} (offset {offset}), next for {label}",
            after="filed as a dead letter, the group moved past it" + (f": {error}" if error else ""),
        )
    wakeups.notify_on_commit([queue])
    events.broadcast_on_commit(events.QUEUES_GROUP, {"type": "queues.changed", "queues": [queue]})
    return MessageDeadLettered(queue, partition, partition_id, transaction_id, group, offset)
