"""The operator's reads (``queen.admin``): namespaces, tasks, partitions,
consumer groups, and messages one by one.

Counts are arithmetic on offsets and cursors (see ``stats.py``); a
message's status is its offset against its partition's cursors. Lists are
paged: a page of messages reads the page through an index plus the
cursors of the partitions on it, never a count over messages. The one
raw statement, the newest keys of many partitions at once, is the queue
store's (``store.partition_heads``); the rest is the ORM.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from django.db.models import Q

from queenadmin.domain import clock
from queenadmin.domain.queues.stats import PageQuery, PartitionDepth, partition_depths, queue_list
from queenadmin.domain.queues.store import store
from queenadmin.models.queues import QUEUE_MODE, ConsumerCursor, ConsumerGroup, DeadLetter, Message, Partition

MessageStatus = Literal["pending", "processing", "completed", "dead_letter"]
#: Most message rows a status-filtered page examines before it answers
#: with what it found: a status is not indexed, so the page is bounded by
#: this instead of the log's size.
STATUS_SCAN_BUDGET = 10_000
#: ``GET /messages`` without ``from`` lists the last hour, as Queen does.
DEFAULT_MESSAGE_WINDOW = timedelta(hours=1)


# --------------------------------------------------------------------------
# Namespaces and tasks


@dataclass(frozen=True)
class Grouping:
    """Queues sharing one namespace (or task), with their counts."""

    name: str
    queues: int
    partitions: int
    total: int
    pending: int


def queue_groupings(*, by: Literal["namespace", "task"]) -> list[Grouping]:
    """Every namespace (or task) with its queues, by name; queues without one are left out."""
    sums: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for q in queue_list():
        key = q.namespace if by == "namespace" else q.task
        if not key:
            continue
        row = sums[key]
        row[0] += 1
        row[1] += len(q.partitions)
        row[2] += q.totals.total
        row[3] += q.totals.pending
    return [Grouping(k, *v) for k, v in sorted(sums.items())]


# --------------------------------------------------------------------------
# Partitions


@dataclass(frozen=True, kw_only=True)
class PartitionRow(PartitionDepth):
    """A partition's depth for the slowest group, with its queue's names."""

    queue: str
    namespace: str | None
    task: str | None


def partition_list(*, queue: str | None, limit: int, offset: int) -> list[PartitionRow]:
    """A page of partitions (by id), with their depth for the slowest group.

    Reads the page's partitions and their cursors only.
    """
    rows = Partition.objects.all()
    if queue is not None:
        rows = rows.filter(queue__name=queue)
    page = list(
        rows.order_by("id").values_list("id", "queue_id", "queue__name", "queue__namespace", "queue__task")[
            offset : offset + limit
        ]
    )
    by_queue: dict[int, list[int]] = defaultdict(list)
    for pid, qid, *_ in page:
        by_queue[qid].append(pid)
    depths = {d.id: d for qid, pids in by_queue.items() for d in partition_depths(queue_id=qid, partition_ids=pids)}
    result = []
    for pid, _, qname, namespace, task in page:
        d = depths.get(pid)
        if d is not None:
            result.append(PartitionRow(**vars(d), queue=qname, namespace=namespace, task=task))
    return result


# --------------------------------------------------------------------------
# Consumer groups


@dataclass(frozen=True)
class GroupPartition:
    """Where one group stands on one partition."""

    group: str
    queue: str
    partition: str
    partition_id: int
    last: int
    committed: int
    start: int
    lease_id: str | None
    leased_until: datetime | None
    last_claim_at: datetime | None
    last_push_at: datetime | None

    @property
    def lag(self) -> int:
        return max(0, self.last - self.committed)

    def lease_active(self, now: datetime) -> bool:
        return self.lease_id is not None and self.leased_until is not None and self.leased_until > now


@dataclass(frozen=True)
class GroupSummary:
    """One (group, queue) pair of the consumer-group list."""

    name: str
    queue: str
    members: int
    partitions_with_lag: int
    total_lag: int
    max_time_lag: int
    state: Literal["Lagging", "Stable", "Dead"]
    subscription_mode: str | None
    subscription_created_at: datetime | None


def _group_partitions(group: str | None = None) -> list[GroupPartition]:
    """Every (group, partition) position; a registered group's unread partitions at -1 (nothing done)."""
    registered = ConsumerGroup.objects.all()
    cursors = ConsumerCursor.objects.all()
    if group is not None:
        registered = registered.filter(name=group)
        cursors = cursors.filter(group=group)
    result: dict[tuple[str, int], GroupPartition] = {}
    for g, qname, pname, pid, next_offset, committed, start, lease, until, claimed, pushed in cursors.values_list(
        "group",
        "partition__queue__name",
        "partition__name",
        "partition_id",
        "partition__next_offset",
        "committed_offset",
        "start_offset",
        "lease_id",
        "leased_until",
        "last_claim_at",
        "partition__last_push_at",
    ):
        result[(g, pid)] = GroupPartition(
            g, qname, pname, pid, next_offset - 1, committed, start, lease, until, claimed, pushed
        )
    by_queue: dict[int, list[str]] = defaultdict(list)
    for qid, name in registered.values_list("queue_id", "name"):
        by_queue[qid].append(name)
    for pid, qname, pname, next_offset, pushed, qid in Partition.objects.filter(queue_id__in=by_queue).values_list(
        "id", "queue__name", "name", "next_offset", "last_push_at", "queue_id"
    ):
        for g in by_queue[qid]:
            result.setdefault(
                (g, pid), GroupPartition(g, qname, pname, pid, next_offset - 1, -1, -1, None, None, None, pushed)
            )
    return sorted(result.values(), key=lambda r: (r.group, r.queue, r.partition))


def _time_lag(rows: list[GroupPartition], now: datetime) -> int:
    """Seconds since the newest message the group has not finished (Queen's estimate)."""
    ages = [int((now - r.last_push_at).total_seconds()) for r in rows if r.lag > 0 and r.last_push_at is not None]
    return max(ages, default=0)


def group_list() -> list[GroupSummary]:
    """Every consumer group per queue (queue mode too), by name then queue."""
    now = clock.now()
    meta = {
        (g, q): (mode, created)
        for g, q, mode, created in ConsumerGroup.objects.values_list(
            "name", "queue__name", "subscription_mode", "created_at"
        )
    }
    pairs: dict[tuple[str, str], list[GroupPartition]] = defaultdict(list)
    for row in _group_partitions():
        pairs[(row.group, row.queue)].append(row)
    result = []
    for (g, q), rows in sorted(pairs.items()):
        lag = _time_lag(rows, now)
        if lag > 300:
            state: Literal["Lagging", "Stable", "Dead"] = "Lagging"
        elif any(r.last_claim_at is not None for r in rows):
            state = "Stable"
        else:
            state = "Dead"
        mode, created = meta.get((g, q), (None, None))
        result.append(
            GroupSummary(
                g, q, len(rows), sum(1 for r in rows if r.lag), sum(r.lag for r in rows), lag, state, mode, created
            )
        )
    return result


def group_detail(*, group: str) -> dict[str, list[GroupPartition]]:
    """Each queue of ``group`` with its partitions (empty: a group never seen)."""
    result: dict[str, list[GroupPartition]] = defaultdict(list)
    for row in _group_partitions(group):
        result[row.queue].append(row)
    return dict(result)


def oldest_unfinished(rows: list[GroupPartition]) -> dict[tuple[str, int], datetime]:
    """Push time of the first message each row's group has not finished.

    One (partition, offset) index lookup per lagging row.
    """
    found: dict[tuple[str, int], datetime] = {}
    for r in rows:
        if r.lag <= 0:
            continue
        created = (
            Message.objects.filter(partition_id=r.partition_id, offset__gt=r.committed)
            .order_by("offset")
            .values_list("created_at", flat=True)
            .first()
        )
        if created is not None:
            found[(r.group, r.partition_id)] = created
    return found


@dataclass(frozen=True)
class LaggingPartition:
    row: GroupPartition
    oldest_at: datetime
    lag_seconds: int


def group_lagging(*, min_lag_seconds: int) -> list[LaggingPartition]:
    """Partitions whose oldest unfinished message is over ``min_lag_seconds`` old, worst first."""
    now = clock.now()
    rows = [r for r in _group_partitions() if r.lag > 0]
    oldest = oldest_unfinished(rows)
    result = []
    for r in rows:
        at = oldest.get((r.group, r.partition_id))
        if at is None:
            continue
        # The exact age: a message 0.5 s old is older than 0 seconds.
        age = (now - at).total_seconds()
        if age > min_lag_seconds:
            result.append(LaggingPartition(r, at, int(age)))
    result.sort(key=lambda x: (-x.lag_seconds, x.row.group, x.row.queue, x.row.partition))
    return result


# --------------------------------------------------------------------------
# Messages


@dataclass(frozen=True, kw_only=True)
class MessageQuery(PageQuery):
    """Which messages to list: filters (None: any) and one page.

    ``since`` and ``until`` bound the push time.
    """

    namespace: str | None = None
    task: str | None = None
    status: MessageStatus | None = None
    limit: int = 200


@dataclass(frozen=True)
class CursorView:
    group: str
    committed: int
    batch_last: int
    lease_until: datetime | None


@dataclass(frozen=True)
class MessageRow:
    id: str
    partition_id: int
    offset: int
    transaction_id: str
    trace_id: str | None
    payload_json: str
    created_at: datetime
    queue: str
    partition: str
    namespace: str | None
    task: str | None
    options: Mapping[str, Any]
    status: MessageStatus
    queue_status: MessageStatus
    consumed_by: int
    total_groups: int
    has_queue_mode: bool
    lease_until: datetime | None
    cursors: tuple[CursorView, ...]
    error: str | None = None
    retry_count: int | None = None
    #: Who pushed it (``producerSub``).
    producer_sub: str | None = None


def _cursor_views(pids: set[int], now: datetime) -> dict[int, list[CursorView]]:
    views: dict[int, list[CursorView]] = defaultdict(list)
    for pid, g, committed, batch_last, lease, until in ConsumerCursor.objects.filter(partition_id__in=pids).values_list(
        "partition_id", "group", "committed_offset", "batch_last", "lease_id", "leased_until"
    ):
        live = until if lease is not None and until is not None and until > now else None
        views[pid].append(CursorView(g, committed, batch_last, live))
    for v in views.values():
        v.sort(key=lambda c: c.group)
    return views


def _status(
    offset: int, cursors: list[CursorView], dead: bool
) -> tuple[MessageStatus, MessageStatus, int, int, bool, datetime | None]:
    queue_mode = next((c for c in cursors if c.group == QUEUE_MODE), None)
    named = [c for c in cursors if c.group != QUEUE_MODE]
    lease = queue_mode.lease_until if queue_mode and offset <= queue_mode.batch_last else None
    if dead:
        queue_status: MessageStatus = "dead_letter"
    elif queue_mode is not None and offset <= queue_mode.committed:
        queue_status = "completed"
    elif lease is not None:
        queue_status = "processing"
    else:
        queue_status = "pending"
    consumed = sum(1 for c in named if offset <= c.committed)
    status = queue_status
    if queue_status != "dead_letter" and queue_mode is None and named:
        status = "completed" if consumed == len(named) else "pending"
    return status, queue_status, consumed, len(named), queue_mode is not None, lease


def _rows(raw: list[tuple[Any, ...]], now: datetime) -> list[MessageRow]:
    pids = {r[1] for r in raw}
    cursors = _cursor_views(pids, now)
    dead: dict[tuple[int, int], tuple[str | None, int]] = {}
    if raw:
        for pid, off, err, retries in DeadLetter.objects.filter(
            partition_id__in=pids, offset__in={r[2] for r in raw}
        ).values_list("partition_id", "offset", "error", "retry_count"):
            dead[(pid, off)] = (err, retries)
    result = []
    for mid, pid, off, txn, trace, payload, created, qname, pname, ns, task, options, sub in raw:
        d = dead.get((pid, off))
        status, queue_status, consumed, groups, has_qm, lease = _status(off, cursors.get(pid, []), d is not None)
        result.append(
            MessageRow(
                mid,
                pid,
                off,
                txn,
                trace,
                payload,
                created,
                qname,
                pname,
                ns,
                task,
                options,
                status,
                queue_status,
                consumed,
                groups,
                has_qm,
                lease,
                tuple(cursors.get(pid, [])),
                d[0] if d else None,
                d[1] if d else None,
                sub,
            )
        )
    return result


_MESSAGE_FIELDS = (
    "message_id",
    "partition_id",
    "offset",
    "transaction_id",
    "trace_id",
    "payload",
    "created_at",
    "partition__queue__name",
    "partition__name",
    "partition__queue__namespace",
    "partition__queue__task",
    "partition__queue__options",
    "producer_sub",
)


#: Rows read per index step while scanning for a page.
_SCAN_CHUNK = 200
#: Most keys one read takes.
_MAX_CHUNK = 5000
#: Up to this many partitions in scope, a page merges each partition's
#: newest messages read through the (partition, offset) index; past it,
#: one scan of the primary key filters by partition.
_MERGE_PARTITIONS = 64


def _keyset(rows: Any, key: str, chunk_size: int) -> Iterator[tuple[int, int, datetime]]:
    """``(id, offset, created_at)`` of ``rows`` newest first by ``key``, a chunk at a time.

    Keys only: a page reads the payloads of the rows it keeps, not of every
    partition's candidates.
    """
    last = None
    while True:
        page = rows if last is None else rows.filter(**{f"{key}__lt": last})
        chunk = list(page.order_by(f"-{key}").values_list("id", "offset", "created_at")[:chunk_size])
        yield from chunk
        if len(chunk) < chunk_size:
            return
        last = chunk[-1][0] if key == "id" else chunk[-1][1]
        chunk_size = _SCAN_CHUNK


def _newest_first(pids: list[int] | None, until: datetime | None, want: int) -> Iterator[tuple[int, int, datetime]]:
    """Message keys ``(id, offset, created_at)``, newest first, through indexes only.

    Within a partition id order is offset order (a push holds the partition
    row until it commits), so per-partition scans by offset merge by id.
    """
    rows = Message.objects.all()
    if until is not None:
        rows = rows.filter(created_at__lte=until)
    if pids is None or len(pids) > _MERGE_PARTITIONS:
        if pids is not None:
            rows = rows.filter(partition_id__in=pids)
        yield from _keyset(rows, "id", min(want, _MAX_CHUNK))
        return
    # Each partition's share of the page, twice over; a partition that
    # supplies more goes on reading its index a chunk at a time.
    size = min(want, _MAX_CHUNK, max(8, 2 * -(-want // max(1, len(pids)))))
    # The newest keys of each partition in one statement: a round trip per
    # partition cost more than the reads (measured with 50 partitions under
    # load).
    heads = store().partition_heads(pids, until=until, size=size)

    def scan(pid: int) -> Iterator[tuple[int, int, datetime]]:
        head = heads.get(pid, [])
        yield from head
        if len(head) == size:
            yield from _keyset(rows.filter(partition_id=pid, offset__lt=head[-1][1]), "offset", _SCAN_CHUNK)

    yield from heapq.merge(*(scan(pid) for pid in pids), key=lambda r: -r[0])


def _full_rows(ids: list[int]) -> list[tuple[Any, ...]]:
    by_id = {r[0]: r[1:] for r in Message.objects.filter(id__in=ids).values_list("id", *_MESSAGE_FIELDS)}
    return [by_id[i] for i in ids if i in by_id]


def message_list(*, query: MessageQuery) -> list[MessageRow]:
    """A page of messages, newest first, with each one's status.

    Without ``since`` the last hour is listed (as Queen does); the scan
    stops at the first message older than that (push times follow offsets
    to within a transaction's length). Costs O(offset + limit) index reads
    per partition in scope; a status filter examines at most
    ``STATUS_SCAN_BUDGET`` rows and answers what matched among them.
    """
    now = clock.now()
    since = query.since or now - DEFAULT_MESSAGE_WINDOW
    scope = Q()
    if query.queue is not None:
        scope &= Q(queue__name=query.queue)
    if query.namespace is not None:
        scope &= Q(queue__namespace=query.namespace)
    if query.task is not None:
        scope &= Q(queue__task=query.task)
    if query.partition is not None:
        scope &= Q(name=query.partition)
    pids = list(Partition.objects.filter(scope).order_by("id").values_list("id", flat=True)) if scope else None
    matched: list[MessageRow] = []
    skipped = examined = 0
    batch: list[tuple[Any, ...]] = []

    def take(raw: list[tuple[Any, ...]]) -> bool:
        nonlocal skipped
        for row in _rows(raw, now):
            if query.status is not None and row.status != query.status:
                continue
            if skipped < query.offset:
                skipped += 1
                continue
            matched.append(row)
            if len(matched) == query.limit:
                return True
        return False

    # Rows the page needs at least: its own and the ones it skips.
    want = query.offset + query.limit if query.status is None else _SCAN_CHUNK
    for key in _newest_first(pids, query.until, want):
        if key[2] < since:
            break
        batch.append(key)
        examined += 1
        if query.status is None and examined <= query.offset:
            # Skipped rows of an unfiltered page need no status.
            skipped += 1
            batch.clear()
            continue
        if len(batch) == _SCAN_CHUNK:
            if take(_full_rows([k[0] for k in batch])):
                return matched
            batch = []
        if query.status is not None and examined >= STATUS_SCAN_BUDGET:
            break
        if query.status is None and len(matched) + len(batch) >= query.limit:
            break
    take(_full_rows([k[0] for k in batch]))
    return matched


def message_get(*, partition_id: int, transaction_id: str) -> MessageRow | None:
    """One message by its partition id and transaction id (None: not found)."""
    raw = list(
        Message.objects.filter(partition_id=partition_id, transaction_id=transaction_id)
        .order_by("-offset")
        .values_list(*_MESSAGE_FIELDS)[:1]
    )
    rows = _rows(raw, clock.now())
    return rows[0] if rows else None
