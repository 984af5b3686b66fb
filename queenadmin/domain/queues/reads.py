"""Reads by offset and partition discovery: ``fetch`` and ``changed since``.

Neither takes a lease, moves a cursor or needs an ack (the client's
``queue.fetch()`` and ``queue.changed_since()``). Both read O(page): an
entry reads its partition's row and then at most ``max_records`` messages
through the (partition, offset) index; a discovery page reads the
partitions of one queue after a cursor.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from queenadmin.domain import clock
from queenadmin.models.queues import Message, Partition, Queue

FetchError = Literal["OFFSET_OUT_OF_RANGE", "UNKNOWN_TOPIC_OR_PARTITION"]

#: ``safeTime`` lags the clock by this much: a push stamps its partition
#: with the time its transaction began, so one that commits after this read
#: may carry an earlier time. Pushes are short transactions; a few seconds
#: of overlap makes the next ``since`` see them again rather than miss them.
SAFE_TIME_MARGIN = timedelta(seconds=5)


@dataclass(frozen=True)
class FetchEntry:
    """Read ``partition`` of ``queue`` from ``offset`` (offsets start at 0)."""

    queue: str
    partition: str
    offset: int
    max_bytes: int


@dataclass(frozen=True)
class Record:
    """One message as an offset read shows it."""

    offset: int
    transaction_id: str
    payload_json: str
    created_at: datetime


@dataclass(frozen=True)
class FetchedEntry:
    """What one entry read. ``high_watermark`` is the next offset to assign."""

    queue: str
    partition: str
    records: tuple[Record, ...]
    high_watermark: int
    log_start: int
    error: FetchError | None = None


def queue_fetch(*, entries: Sequence[FetchEntry], max_bytes: int, max_records: int = 1000) -> list[FetchedEntry]:
    """Read each entry's records from its offset; one result per entry.

    An entry reads at most ``max_records`` records and ``max_bytes`` of
    payload (its own budget and what is left of the call's), but always
    one record if the call has read none yet, so a record larger than a
    budget cannot stall a reader. An unknown queue or partition answers
    ``UNKNOWN_TOPIC_OR_PARTITION``; an offset below the partition's log
    start (retention deleted it) or above the high watermark answers
    ``OFFSET_OUT_OF_RANGE``; both with no records. The high watermark
    itself is in range and reads nothing. Reads only; no transaction needed.
    """
    wanted = {(e.queue, e.partition) for e in entries}
    parts: dict[tuple[str, str], tuple[int, int, int]] = {}
    if wanted:
        rows = Partition.objects.filter(
            queue__name__in={q for q, _ in wanted}, name__in={p for _, p in wanted}
        ).values_list("queue__name", "name", "id", "next_offset", "log_start")
        parts = {(q, p): (i, n, s) for q, p, i, n, s in rows if (q, p) in wanted}
    left = max_bytes
    read_any = False
    results = []
    for entry in entries:
        found = parts.get((entry.queue, entry.partition))
        if found is None:
            results.append(FetchedEntry(entry.queue, entry.partition, (), 0, 0, "UNKNOWN_TOPIC_OR_PARTITION"))
            continue
        pid, high, log_start = found
        start = entry.offset
        if start < log_start or start > high:
            results.append(FetchedEntry(entry.queue, entry.partition, (), high, log_start, "OFFSET_OUT_OF_RANGE"))
            continue
        budget = min(entry.max_bytes, left)
        records: list[Record] = []
        if start < high and (budget > 0 or not read_any):
            messages = (
                Message.objects.filter(partition_id=pid, offset__gte=start, offset__lt=high)
                .order_by("offset")
                .values_list("offset", "transaction_id", "payload", "created_at")[:max_records]
            )
            for offset, txn, payload, created in messages:
                size = len(payload.encode())
                if (records or read_any) and size > budget:
                    break
                budget -= size
                left -= size
                read_any = True
                records.append(Record(offset, txn, payload, created))
        results.append(FetchedEntry(entry.queue, entry.partition, tuple(records), high, log_start))
    return results


@dataclass(frozen=True)
class ChangedQuery:
    """One discovery page: partitions of ``queue`` written at or after ``since``."""

    queue: str
    since: datetime | None = None
    #: The page cursor a previous page answered (a partition id).
    after: int | None = None
    limit: int = 1000


@dataclass(frozen=True)
class ChangedPartition:
    id: int
    name: str
    #: The last record's offset; -1 when the partition has none.
    last_offset: int
    log_start: int
    last_write_at: datetime


@dataclass(frozen=True)
class ChangedPage:
    """A page of partitions in creation order; ``next`` is None on the last."""

    queue: str
    partitions: tuple[ChangedPartition, ...]
    next: int | None
    found: bool


def partitions_changed(*, query: ChangedQuery) -> ChangedPage:
    """The partitions of ``query.queue`` written at or after ``since``.

    Without ``since`` every partition counts; one never written counts as
    written when it was made. ``found`` is False when the queue does not
    exist. Reads only; no transaction needed.
    """
    (page,) = partitions_changed_each(queries=[query])
    return page


def partitions_changed_each(*, queries: Sequence[ChangedQuery]) -> list[ChangedPage]:
    """``partitions_changed`` of each query, in order: the queues are looked
    up in one statement (a call may ask after 1,024 of them), then each
    found queue's partitions in one."""
    ids = dict(Queue.objects.filter(name__in={q.queue for q in queries}).values_list("name", "id"))
    return [_changed_page(query, ids.get(query.queue)) for query in queries]


def _changed_page(query: ChangedQuery, queue_id: int | None) -> ChangedPage:
    if queue_id is None:
        return ChangedPage(query.queue, (), None, False)
    rows = Partition.objects.filter(queue_id=queue_id)
    if query.after is not None:
        rows = rows.filter(id__gt=query.after)
    picked: list[ChangedPartition] = []
    more = False
    for pid, name, next_offset, log_start, created, pushed in (
        rows.order_by("id")
        .values_list("id", "name", "next_offset", "log_start", "created_at", "last_push_at")
        .iterator(chunk_size=1000)
    ):
        written = pushed or created
        if query.since is not None and written < query.since:
            continue
        if len(picked) == query.limit:
            more = True
            break
        picked.append(ChangedPartition(pid, name, next_offset - 1, log_start, written))
    return ChangedPage(query.queue, tuple(picked), picked[-1].id if more else None, True)


def safe_time() -> datetime:
    """The time up to which every write is counted by a read begun now."""
    return clock.now() - SAFE_TIME_MARGIN
