"""Configure, delete, and the read side: depth, lists, overview, DLQ.

Every number here is arithmetic on partition offsets and cursors
(design.md section 2): the cost is O(partitions x groups), never
O(messages).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction

from queenadmin.domain import clock, events
from queenadmin.domain.queues.common import QUEUE_MODE, merge_options
from queenadmin.errors import InvalidArgument
from queenadmin.models.queues import ConsumerCursor, ConsumerGroup, DeadLetter, Message, Partition, Queue


@dataclass(frozen=True)
class QueueConfig:
    id: int
    name: str
    namespace: str | None
    task: str | None
    options: dict[str, Any]
    created: bool


@dataclass(frozen=True)
class PartitionDepth:
    """Depth of one partition for one cursor (or none: the group is unseen)."""

    id: int
    name: str
    created_at: datetime
    last_push_at: datetime | None
    #: Messages stored (the last offset).
    total: int
    pending: int
    processing: int
    completed: int
    dead_letter: int
    #: The offset of the oldest ready message, if any.
    ready_offset: int | None
    retained_bytes: int = 0
    #: The lowest offset still pending for the cursor these counts describe
    #: (leased or not), if any.
    pending_offset: int | None = None
    #: Push time of the message at ``pending_offset`` (read only on request).
    oldest_message_at: datetime | None = None
    #: Push time of the message at the last offset (read only on request).
    newest_message_at: datetime | None = None

    @property
    def ready(self) -> int:
        return self.pending - self.processing


@dataclass(frozen=True)
class QueueStats:
    id: int
    name: str
    namespace: str | None
    task: str | None
    options: dict[str, Any]
    created_at: datetime
    group: str | None
    partitions: tuple[PartitionDepth, ...]
    #: Age in seconds of the oldest ready message (None when none is ready).
    oldest_ready_age: float | None = None
    totals: dict[str, int] = field(default_factory=dict)

    @property
    def retained_bytes(self) -> int:
        return sum(p.retained_bytes for p in self.partitions)


@transaction.atomic(durable=True)
def queue_configure(
    *, name: str, namespace: str | None, task: str | None, options: dict[str, Any], replace: bool = False
) -> QueueConfig:
    """Create queue ``name`` or change its options; return the result.

    ``merge`` (default) keeps options not given; ``replace`` resets them to
    their defaults. Raises ``InvalidArgument`` for an option of the wrong
    type. Must be the outermost transaction.
    """
    for label, value in (("namespace", namespace), ("task", task)):
        if value is not None and not isinstance(value, str):
            raise InvalidArgument(f"{label} must be a string or null")
    queue = Queue.objects.select_for_update().filter(name=name).first()
    created = queue is None
    if queue is None:
        try:
            with transaction.atomic():
                queue = Queue.objects.create(
                    name=name,
                    namespace=namespace,
                    task=task,
                    options=merge_options({}, options, replace=True),
                    created_at=clock.now(),
                )
        except IntegrityError:
            queue = Queue.objects.select_for_update().get(name=name)
            created = False
    if not created:
        queue.options = merge_options(queue.options, options, replace=replace)
        if namespace is not None:
            queue.namespace = namespace
        if task is not None:
            queue.task = task
        queue.save(update_fields=["options", "namespace", "task"])
    events.broadcast_on_commit(events.QUEUES_GROUP, {"type": "queues.changed", "queues": [name]})
    return QueueConfig(queue.pk, queue.name, queue.namespace, queue.task, dict(queue.options), created)


@transaction.atomic(durable=True)
def queue_delete(*, name: str) -> bool:
    """Delete queue ``name`` with its messages, cursors and DLQ.

    Returns whether it existed. Must be the outermost transaction.
    """
    queue_id = Queue.objects.filter(name=name).values_list("id", flat=True).first()
    if queue_id is None:
        return False
    # Children first, in bulk: the ORM cascade would load every message.
    DeadLetter.objects.filter(queue_id=queue_id).delete()
    ConsumerCursor.objects.filter(partition__queue_id=queue_id).delete()
    ConsumerGroup.objects.filter(queue_id=queue_id).delete()
    Message.objects.filter(partition__queue_id=queue_id)._raw_delete(Message.objects.db)
    Partition.objects.filter(queue_id=queue_id).delete()
    Queue.objects.filter(pk=queue_id).delete()
    events.broadcast_on_commit(events.QUEUES_GROUP, {"type": "queues.changed", "deleted": [name]})
    return True


# --------------------------------------------------------------------------
# Reads (never lock)


def _depths(
    queue_id: int, group: str | None, now: datetime, groups: dict[str, str] | None = None
) -> tuple[PartitionDepth, ...] | None:
    """Per-partition depth for ``group``; None if that named group is unseen.

    Without a group: the worst (largest-lag) named-group cursor per
    partition, or queue mode when the queue has no named groups.
    """
    if groups is None:
        groups = dict(ConsumerGroup.objects.filter(queue_id=queue_id).values_list("name", "subscription_mode"))
    if group is not None and group != QUEUE_MODE and group not in groups:
        return None
    partitions = list(
        Partition.objects.filter(queue_id=queue_id)
        .order_by("id")
        .values_list("id", "name", "created_at", "last_push_at", "next_offset", "retained_bytes")
    )
    if group is not None:
        considered = {group}
    elif groups:
        considered = set(groups)
    else:
        considered = {QUEUE_MODE}
    cursors: dict[int, list[tuple[Any, ...]]] = {}
    for row in ConsumerCursor.objects.filter(partition__queue_id=queue_id, group__in=considered).values_list(
        "partition_id",
        "group",
        "committed_offset",
        "start_offset",
        "lease_id",
        "leased_until",
        "batch_last",
        "dead_lettered",
    ):
        cursors.setdefault(row[0], []).append(row)
    result = []
    for pid, name, created_at, last_push_at, next_offset, retained in partitions:
        last = next_offset - 1
        best: PartitionDepth | None = None
        rows = cursors.get(pid, [])
        seen = {r[1] for r in rows}
        # A group with no cursor row here reads this partition from the start.
        rows = rows + [(pid, g, 0, 0, None, None, 0, 0) for g in considered - seen]
        for _, _, committed, start, lease, until, batch_last, dead in rows:
            live = lease is not None and until is not None and until > now
            pending = max(0, last - committed)
            processing = max(0, min(batch_last, last) - committed) if live else 0
            head = (batch_last if live else committed) + 1
            depth = PartitionDepth(
                pid,
                name,
                created_at,
                last_push_at,
                last,
                pending,
                processing,
                max(0, committed - start - dead),
                dead,
                head if head <= last else None,
                retained,
                committed + 1 if committed < last else None,
            )
            if best is None or depth.pending > best.pending:
                best = depth
        assert best is not None
        result.append(best)
    return tuple(result)


def _totals(parts: tuple[PartitionDepth, ...]) -> dict[str, int]:
    return {
        "total": sum(p.total for p in parts),
        "pending": sum(p.pending for p in parts),
        "processing": sum(p.processing for p in parts),
        "ready": sum(p.ready for p in parts),
        "completed": sum(p.completed for p in parts),
        "deadLetter": sum(p.dead_letter for p in parts),
        "partitionsPending": sum(1 for p in parts if p.pending > 0),
        "partitionsReady": sum(1 for p in parts if p.ready > 0),
    }


def _oldest_ready_age(parts: tuple[PartitionDepth, ...], now: datetime) -> float | None:
    """One index lookup per partition: the head message's push time."""
    oldest: datetime | None = None
    for part in parts:
        if part.ready_offset is None:
            continue
        created = (
            Message.objects.filter(partition_id=part.id, offset=part.ready_offset)
            .values_list("created_at", flat=True)
            .first()
        )
        if created is not None and (oldest is None or created < oldest):
            oldest = created
    return None if oldest is None else max(0.0, (now - oldest).total_seconds())


def _message_times(parts: tuple[PartitionDepth, ...]) -> tuple[PartitionDepth, ...]:
    """Fill the oldest and newest push times: one index lookup per partition.

    "Oldest" is the message at ``pending_offset``: the oldest message the
    cursor behind the partition's counts has not finished (the slowest
    named group's, or queue mode's when there are no named groups), the
    same one ``pending`` starts at. Messages every group is done with do
    not count, so a drained partition has no oldest message.
    """
    result = []
    for part in parts:
        wanted = [o for o in (part.pending_offset, part.total) if o]
        found = dict(
            Message.objects.filter(partition_id=part.id, offset__in=wanted).values_list("offset", "created_at")
        )
        oldest = found.get(part.pending_offset) if part.pending_offset else None
        result.append(replace(part, oldest_message_at=oldest, newest_message_at=found.get(part.total)))
    return tuple(result)


def queue_stats(
    *, name: str, group: str | None = None, with_age: bool = False, with_messages: bool = False
) -> QueueStats | None:
    """Depth of queue ``name`` for ``group`` (see ``_depths``).

    ``with_age`` adds the age of the oldest ready message; ``with_messages``
    adds each partition's oldest and newest push times (see
    ``_message_times``). Each costs one indexed lookup per partition.
    Returns None when the queue does not exist; ``partitions`` is empty and
    ``totals`` hold -1 when the named group was never seen.
    """
    row = Queue.objects.filter(name=name).values_list("id", "namespace", "task", "options", "created_at").first()
    if row is None:
        return None
    qid, namespace, task, options, created_at = row
    now = clock.now()
    parts = _depths(qid, group, now)
    if parts is None:
        unseen = dict.fromkeys(_totals(()), -1)
        return QueueStats(qid, name, namespace, task, options, created_at, group, (), None, unseen)
    age = _oldest_ready_age(parts, now) if with_age else None
    if with_messages:
        parts = _message_times(parts)
    return QueueStats(qid, name, namespace, task, options, created_at, group, parts, age, _totals(parts))


def queue_list() -> list[QueueStats]:
    """Every queue with its depth, newest-created first."""
    now = clock.now()
    rows = Queue.objects.order_by("-created_at", "-id").values_list(
        "id", "name", "namespace", "task", "options", "created_at"
    )
    result = []
    for qid, name, namespace, task, options, created_at in rows:
        parts = _depths(qid, None, now) or ()
        result.append(QueueStats(qid, name, namespace, task, options, created_at, None, parts, None, _totals(parts)))
    return result


@dataclass(frozen=True)
class DeadLetterRow:
    id: int
    queue: str
    partition: str
    partition_id: int
    group: str
    offset: int
    transaction_id: str
    message_id: str
    payload_json: str
    error: str | None
    retry_count: int
    created_at: datetime
    failed_at: datetime


def dlq_list(
    *,
    queue: str | None,
    group: str | None,
    partition: str | None,
    since: datetime | None,
    until: datetime | None,
    limit: int,
    offset: int,
) -> tuple[list[DeadLetterRow], int]:
    """A page of dead letters (newest first) and the total that match."""
    rows = DeadLetter.objects.all()
    if queue is not None:
        rows = rows.filter(queue__name=queue)
    if group is not None:
        rows = rows.filter(group=group)
    if partition is not None:
        rows = rows.filter(partition__name=partition)
    if since is not None:
        rows = rows.filter(failed_at__gte=since)
    if until is not None:
        rows = rows.filter(failed_at__lte=until)
    total = rows.count()
    page = rows.order_by("-failed_at", "-id").values_list(
        "id",
        "queue__name",
        "partition__name",
        "partition_id",
        "group",
        "offset",
        "transaction_id",
        "message_id",
        "payload",
        "error",
        "retry_count",
        "created_at",
        "failed_at",
    )[offset : offset + limit]
    return [DeadLetterRow(*r) for r in page], total
