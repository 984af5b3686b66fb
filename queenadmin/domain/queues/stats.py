"""The read side of the log: depth, queue lists, the overview, the DLQ.

Every number here is arithmetic on partition offsets and cursors
(design.md section 2): the cost is O(partitions x groups), never
O(messages). Nothing here writes or locks.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, TypeVar

from django.db.models import Model, QuerySet

from queenadmin.domain import clock
from queenadmin.models.queues import QUEUE_MODE, ConsumerCursor, ConsumerGroup, DeadLetter, Message, Partition, Queue


@dataclass(frozen=True)
class PartitionDepth:
    """Depth of one partition for one cursor (or none: the group is unseen)."""

    id: int
    name: str
    created_at: datetime
    last_push_at: datetime | None
    #: Messages stored: ``last_offset - (log_start - 1)``.
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
    #: The offset of the last message pushed (-1: none yet).
    last_offset: int = -1
    #: The lowest offset still stored (``Partition.log_start``).
    log_start: int = 0

    @property
    def ready(self) -> int:
        return self.pending - self.processing


@dataclass(frozen=True)
class QueueTotals:
    """A queue's counts summed over its partitions (-1 each: group unseen)."""

    total: int
    pending: int
    processing: int
    ready: int
    completed: int
    dead_letter: int
    #: Partitions with something pending, and with something ready.
    partitions_pending: int
    partitions_ready: int

    @classmethod
    def of(cls, parts: tuple[PartitionDepth, ...]) -> QueueTotals:
        return cls(
            total=sum(p.total for p in parts),
            pending=sum(p.pending for p in parts),
            processing=sum(p.processing for p in parts),
            ready=sum(p.ready for p in parts),
            completed=sum(p.completed for p in parts),
            dead_letter=sum(p.dead_letter for p in parts),
            partitions_pending=sum(1 for p in parts if p.pending > 0),
            partitions_ready=sum(1 for p in parts if p.ready > 0),
        )

    @classmethod
    def unseen(cls) -> QueueTotals:
        return cls(-1, -1, -1, -1, -1, -1, -1, -1)


@dataclass(frozen=True)
class QueueStats:
    """A queue with its depth for one group (or the slowest, see ``_depths``)."""

    id: int
    name: str
    namespace: str | None
    task: str | None
    #: Every option with its value, under the stored names (``options.py``).
    options: Mapping[str, Any]
    created_at: datetime
    group: str | None
    partitions: tuple[PartitionDepth, ...]
    totals: QueueTotals
    #: Age in seconds of the oldest ready message (None when none is ready,
    #: or not asked for).
    oldest_ready_age: float | None = None
    #: The named group's stored conflation policy (False without a group).
    conflation: bool = False
    #: Whose pops are paused (``operator/pause.py``): every one, and the
    #: groups paused on their own (sorted).
    paused: bool = False
    paused_groups: tuple[str, ...] = ()

    @property
    def retained_bytes(self) -> int:
        return sum(p.retained_bytes for p in self.partitions)


def _depths(
    queue_id: int, group: str | None, now: datetime, partition_ids: Collection[int] | None = None
) -> tuple[PartitionDepth, ...] | None:
    """Per-partition depth for ``group``; None if that named group is unseen.

    Without a group: the worst (largest-lag) named-group cursor per
    partition, or queue mode when the queue has no named groups. With
    ``partition_ids``, only those partitions (a page of them).
    """
    groups = set(ConsumerGroup.objects.filter(queue_id=queue_id).values_list("name", flat=True))
    if group is not None and group != QUEUE_MODE and group not in groups:
        return None
    partition_rows = Partition.objects.filter(queue_id=queue_id)
    cursor_rows = ConsumerCursor.objects.filter(partition__queue_id=queue_id)
    if partition_ids is not None:
        partition_rows = partition_rows.filter(id__in=partition_ids)
        cursor_rows = ConsumerCursor.objects.filter(partition_id__in=partition_ids)
    partitions = list(
        partition_rows.order_by("id").values_list(
            "id", "name", "created_at", "last_push_at", "next_offset", "retained_bytes", "log_start"
        )
    )
    if group is not None:
        considered = {group}
    elif groups:
        considered = set(groups)
    else:
        considered = {QUEUE_MODE}
    cursors: dict[int, list[tuple[Any, ...]]] = {}
    for row in cursor_rows.filter(group__in=considered).values_list(
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
    for pid, name, created_at, last_push_at, next_offset, retained, log_start in partitions:
        last = next_offset - 1
        best: PartitionDepth | None = None
        rows = cursors.get(pid, [])
        seen = {r[1] for r in rows}
        # A group with no cursor row here reads this partition from the start.
        rows = rows + [(pid, g, -1, -1, None, None, -1, 0) for g in considered - seen]
        for _, _, committed, start, lease, until, batch_last, dead in rows:
            live = lease is not None and until is not None and until > now
            # Offsets below the log start are gone (retention): a cursor
            # behind it reads on from the log start (protocol 11.3).
            done = max(committed, log_start - 1)
            pending = max(0, last - done)
            processing = max(0, min(batch_last, last) - done) if live else 0
            head = max(batch_last if live else done, done) + 1
            depth = PartitionDepth(
                pid,
                name,
                created_at,
                last_push_at,
                last - (log_start - 1),
                pending,
                processing,
                max(0, committed - start - dead),
                dead,
                head if head <= last else None,
                retained,
                done + 1 if done < last else None,
                last_offset=last,
                log_start=log_start,
            )
            if best is None or depth.pending > best.pending:
                best = depth
        assert best is not None
        result.append(best)
    return tuple(result)


def queue_pending(*, queue_id: int, now: datetime) -> int:
    """Messages of queue ``queue_id`` not yet consumed, leased ones included.

    Summed over partitions for the slowest named group, or queue mode when
    the queue has no named group (as ``_depths``): offsets and cursors only.
    """
    return sum(p.pending for p in _depths(queue_id, None, now) or ())


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
        wanted = [o for o in (part.pending_offset, part.last_offset) if o is not None and o >= 0]
        found = dict(
            Message.objects.filter(partition_id=part.id, offset__in=wanted).values_list("offset", "created_at")
        )
        oldest = found.get(part.pending_offset) if part.pending_offset is not None else None
        result.append(replace(part, oldest_message_at=oldest, newest_message_at=found.get(part.last_offset)))
    return tuple(result)


def queue_stats(
    *, name: str, group: str | None = None, with_age: bool = False, with_messages: bool = False
) -> QueueStats | None:
    """Depth of queue ``name`` for ``group`` (see ``_depths``).

    ``with_age`` adds the age of the oldest ready message; ``with_messages``
    adds each partition's oldest and newest push times (see
    ``_message_times``). Each costs one indexed lookup per partition. The
    pause state (``paused``, ``paused_groups``) comes with the queue row.
    Returns None when the queue does not exist; ``partitions`` is empty and
    every total is -1 when the named group was never seen. ``conflation``
    is the named group's stored policy.
    """
    row = (
        Queue.objects.filter(name=name)
        .values_list("id", "namespace", "task", "options", "created_at", "paused", "paused_groups")
        .first()
    )
    if row is None:
        return None
    qid, namespace, task, options, created_at, paused, stored_groups = row
    paused_groups: tuple[str, ...] = tuple(stored_groups or ())
    now = clock.now()
    parts = _depths(qid, group, now)
    if parts is None:
        unseen = QueueTotals.unseen()
        return QueueStats(
            qid, name, namespace, task, options, created_at, group, (), unseen, None, False, paused, paused_groups
        )
    age = _oldest_ready_age(parts, now) if with_age else None
    if with_messages:
        parts = _message_times(parts)
    conflation = group is not None and ConsumerGroup.objects.filter(queue_id=qid, name=group, conflation=True).exists()
    totals = QueueTotals.of(parts)
    return QueueStats(
        qid, name, namespace, task, options, created_at, group, parts, totals, age, conflation, paused, paused_groups
    )


def partition_depths(*, queue_id: int, partition_ids: Collection[int]) -> tuple[PartitionDepth, ...]:
    """Depth of some partitions of a queue, for the slowest group (see ``_depths``)."""
    return _depths(queue_id, None, clock.now(), partition_ids) or ()


def queue_list() -> list[QueueStats]:
    """Every queue with its depth, newest-created first."""
    now = clock.now()
    rows = Queue.objects.order_by("-created_at", "-id").values_list(
        "id", "name", "namespace", "task", "options", "created_at", "paused", "paused_groups"
    )
    result = []
    for qid, name, namespace, task, options, created_at, paused, paused_groups in rows:
        parts = _depths(qid, None, now) or ()
        totals = QueueTotals.of(parts)
        held = tuple(paused_groups or ())
        result.append(
            QueueStats(
                qid, name, namespace, task, options, created_at, None, parts, totals, paused=paused, paused_groups=held
            )
        )
    return result


@dataclass(frozen=True)
class Overview:
    """Counts across every queue, with the lags behind the slowest groups."""

    queues: tuple[QueueStats, ...]
    #: Each partition's pending count, ascending.
    offset_lags: tuple[int, ...]
    #: Each queue's oldest ready age in seconds (0.0 when nothing is ready).
    time_lags: tuple[float, ...]
    taken_at: datetime

    @property
    def partitions(self) -> int:
        return sum(len(q.partitions) for q in self.queues)

    @property
    def namespaces(self) -> int:
        return len({q.namespace for q in self.queues if q.namespace})

    @property
    def tasks(self) -> int:
        return len({q.task for q in self.queues if q.task})


def queue_overview() -> Overview:
    """Every queue with its depth, and the lag figures of the overview.

    Reads each queue once more for its oldest ready age (one indexed lookup
    per partition); a queue deleted meanwhile is left out of the ages.
    """
    queues = queue_list()
    lags = sorted(p.pending for q in queues for p in q.partitions)
    ages = [a for a in (queue_stats(name=q.name, with_age=True) for q in queues) if a is not None]
    times = tuple(a.oldest_ready_age or 0.0 for a in ages)
    return Overview(tuple(queues), tuple(lags), times, clock.now())


@dataclass(frozen=True)
class DeadLetterRow:
    """One dead letter as the DLQ list shows it."""

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
    #: Who pushed the message (``producerSub``).
    producer_sub: str | None = None


@dataclass(frozen=True, kw_only=True)
class PageQuery:
    """What a paged list shares: where (None: any), a time window, one page."""

    queue: str | None = None
    partition: str | None = None
    #: At or after (None: from the start).
    since: datetime | None = None
    #: At or before (None: up to now).
    until: datetime | None = None
    limit: int = 100
    offset: int = 0


@dataclass(frozen=True, kw_only=True)
class DeadLetterQuery(PageQuery):
    """Which dead letters to list: filters (None: any) and one page.

    ``since`` and ``until`` bound the time each failed.
    """

    group: str | None = None


_M = TypeVar("_M", bound=Model)


def where_given(rows: QuerySet[_M], **lookups: object) -> QuerySet[_M]:
    """``rows`` filtered by each of ``lookups`` that is not None (None: any)."""
    return rows.filter(**{lookup: value for lookup, value in lookups.items() if value is not None})


def dead_letters_where(*, queue: str | None, group: str | None, partition: str | None) -> QuerySet[DeadLetter]:
    """The dead letters of ``queue``, ``group`` and ``partition`` (None: any)."""
    return where_given(DeadLetter.objects.all(), queue__name=queue, group=group, partition__name=partition)


def dlq_list(*, query: DeadLetterQuery) -> tuple[list[DeadLetterRow], int]:
    """A page of dead letters (newest first) and the total that match."""
    rows = dead_letters_where(queue=query.queue, group=query.group, partition=query.partition)
    rows = where_given(rows, failed_at__gte=query.since, failed_at__lte=query.until)
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
        "producer_sub",
    )[query.offset : query.offset + query.limit]
    return [DeadLetterRow(*r) for r in page], total
