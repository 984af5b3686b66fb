"""The dashboard's reads of the log: depth split by state, lag, pages.

Depth is arithmetic on offsets and cursors; each read is a fixed number of
statements whatever the data holds (a handful of indexed lookups per
partition, never a scan or ``COUNT(*)`` of messages). Nothing here writes
or locks. Of the messages a group has not finished: *in flight* are leased
under a live lease (summed over every group: each leases its own copy);
*parked* are not yet old enough for ``delayedProcessing``; *claimable* are
the rest. A partition's claimable and parked describe its slowest group,
as ``stats.queue_stats`` does.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from operator import attrgetter
from typing import Any, NamedTuple

from django.db.models import BooleanField, Count, ExpressionWrapper, Q
from django.db.models.fields.json import KT
from django.db.models.functions import Substr

from queenadmin.domain import clock
from queenadmin.domain.queues.stats import dead_letters_where
from queenadmin.domain.queues.store import store
from queenadmin.models.queues import QUEUE_MODE, ConsumerCursor, ConsumerGroup, DeadLetter, Message, Partition, Queue

#: Dead letters counted per queue at most in a list of queues, and on one
#: queue's page; past it the page says "1,000+" (the DLQ list is paged and
#: its actions take "all that match", so the exact figure is never needed
#: to act).
DLQ_COUNT_CAP = 1_000
DLQ_DETAIL_CAP = 10_000
#: Characters of a payload shown in a list.
PREVIEW_CHARS = 120
#: Queues listed on one page of ``/queues/``.
QUEUE_PAGE = 200


@dataclass(frozen=True)
class PartitionBoard:
    """One partition as the dashboard shows it (slowest group's depth)."""

    id: int
    name: str
    #: The last offset (-1 when empty).
    last_offset: int
    claimable: int
    parked: int
    #: Messages leased by any group (each group's live lease counted).
    in_flight: int
    #: Dead letters of this partition (capped, see ``QueueBoard.dlq_capped``).
    dlq: int
    #: Push time of the oldest claimable message.
    oldest_claimable_at: datetime | None
    last_push_at: datetime | None
    #: Messages the slowest group has leased: the part of its depth that is
    #: neither claimable nor parked.
    slowest_leased: int = 0

    @property
    def pending(self) -> int:
        """The slowest group's depth (what the queue still owes it)."""
        return self.claimable + self.parked + self.slowest_leased


@dataclass(frozen=True)
class GroupLag:
    """How far one consumer group is behind on a queue."""

    name: str
    #: Messages not yet done by the group, over every partition.
    lag: int
    in_flight: int
    #: Push time of the oldest message the group has not finished.
    oldest_pending_at: datetime | None
    last_claim_at: datetime | None
    #: The group's stored conflation policy (last-value delivery).
    conflation: bool = False
    #: The group's pops of the queue are paused on their own (the queue's
    #: pause is ``QueueBoard.paused``).
    paused: bool = False

    @property
    def is_queue_mode(self) -> bool:
        return self.name == QUEUE_MODE


@dataclass(frozen=True)
class QueueBoard:
    """A queue with its depth by state, summed over its partitions."""

    id: int
    name: str
    namespace: str | None
    task: str | None
    delay_seconds: int
    partitions: tuple[PartitionBoard, ...]
    dlq: int
    #: The DLQ count stopped at ``DLQ_COUNT_CAP``.
    dlq_capped: bool
    #: Empty unless asked for (``queue_board(..., with_groups=True)``).
    groups: tuple[GroupLag, ...] = ()
    #: The ``priority`` option: namespace and task pops serve higher first.
    priority: int = 0
    #: Every pop of the queue is paused (``operator/pause.py``).
    paused: bool = False
    #: The consumer groups paused on it, sorted: registered or not yet.
    paused_groups: tuple[str, ...] = ()

    @property
    def claimable(self) -> int:
        return sum(p.claimable for p in self.partitions)

    @property
    def parked(self) -> int:
        return sum(p.parked for p in self.partitions)

    @property
    def in_flight(self) -> int:
        return sum(p.in_flight for p in self.partitions)

    @property
    def pending(self) -> int:
        return sum(p.pending for p in self.partitions)

    @property
    def total(self) -> int:
        # Offsets start at 0: a partition has had ``last_offset + 1`` messages.
        return sum(p.last_offset + 1 for p in self.partitions)

    @property
    def oldest_claimable_at(self) -> datetime | None:
        times = [p.oldest_claimable_at for p in self.partitions if p.oldest_claimable_at is not None]
        return min(times) if times else None

    @property
    def last_push_at(self) -> datetime | None:
        times = [p.last_push_at for p in self.partitions if p.last_push_at is not None]
        return max(times) if times else None


class _Cursor(NamedTuple):  # a tuple: a board of every queue makes thousands
    group: str
    committed: int
    live_lease: bool
    batch_last: int
    last_claim_at: datetime | None

    def leased(self, last: int) -> int:
        return max(0, min(self.batch_last, last) - self.committed) if self.live_lease else 0


def has_nul(*texts: str | None) -> bool:
    """Whether a name holds a NUL: no stored one does, and PostgreSQL
    refuses one in a query (a caller answers "nothing" without asking)."""
    return any(t is not None and "\x00" in t for t in texts)


_COMMITTED = attrgetter("committed")


def _above(cursor: _Cursor, floor: int) -> _Cursor:
    """``cursor`` as if at least at ``floor`` (the partition's log start - 1)."""
    if cursor.committed >= floor:
        return cursor
    return cursor._replace(committed=floor, batch_last=max(cursor.batch_last, floor))


#: The queue row's columns a board reads.
_QUEUE_FIELDS = ("id", "name", "namespace", "task", "options", "paused", "paused_groups")


def queue_boards(*, after: str = "", limit: int = QUEUE_PAGE) -> list[QueueBoard]:
    """A page of queues with their depth by state, in a fixed number of queries.

    The page is ``limit`` queues named after ``after``, in byte order.
    """
    rows = Queue.objects.order_by("name").filter(name__gt=after).values_list(*_QUEUE_FIELDS)
    return _boards(list(rows[:limit]), with_groups=False)


def queue_board(*, name: str) -> QueueBoard | None:
    """One queue with its depth by state and its consumer groups' lag."""
    if has_nul(name):
        return None
    rows = list(Queue.objects.filter(name=name).values_list(*_QUEUE_FIELDS))
    boards = _boards(rows, with_groups=True)
    return boards[0] if boards else None


def queue_boards_named(*, names: Iterable[str], with_groups: bool = False) -> dict[str, QueueBoard]:
    """The queues ``names`` with their depth by state (and groups' lag), by name.

    For a list page that shows some queues (the admin's changelists): the
    same fixed number of queries as ``queue_boards`` whatever the count.
    """
    rows = list(Queue.objects.filter(name__in=list(names)).values_list(*_QUEUE_FIELDS))
    return {board.name: board for board in _boards(rows, with_groups=with_groups)}


def queue_in_flight() -> dict[str, int]:
    """Messages leased by any consumer group, by queue name (the metric's).

    One statement over the cursors holding a live lease, so its cost is the
    number of leases held, not of messages; a queue with none is left out.
    """
    now = clock.now()
    counts: dict[str, int] = {}
    for name, committed, batch_last, next_offset in ConsumerCursor.objects.filter(
        lease_id__isnull=False, leased_until__gt=now
    ).values_list("partition__queue__name", "committed_offset", "batch_last", "partition__next_offset"):
        leased = _Cursor("", committed, True, batch_last, None).leased(next_offset - 1)
        counts[name] = counts.get(name, 0) + leased
    return counts


def queue_boards_deepest(*, limit: int) -> tuple[list[QueueBoard], BoardTotals]:
    """The ``limit`` deepest queues now, and every queue's depth summed.

    Deepest: the slowest group's depth (``QueueBoard.pending``), then the
    name. Every partition's slowest group comes from one statement
    (``Store.slowest_groups``), so the cursors of every queue stay in the
    database; only the queues kept are read as boards, in the statements
    ``queue_boards`` makes for a page of them.
    """
    now = clock.now()
    names = dict(Queue.objects.values_list("id", "name"))
    # The delay of the queues that have one: options as JSON cost more to
    # load than the rest of the read.
    delayed = Queue.objects.filter(options__has_key="delayedProcessing").annotate(
        delay=KT("options__delayedProcessing")
    )
    delays = {qid: _number(delay) for qid, delay in delayed.values_list("id", "delay")}
    # A partition of a queue made after the queue rows were read is left out.
    heads = [row for row in store().slowest_groups(now=now, queue_mode=QUEUE_MODE) if row[1] in names]
    parked_from = _parked_from([(row[0], row[2] + 1, delays.get(row[1], 0)) for row in heads], now)
    claimable = parked = in_flight = 0
    pending: dict[int, int] = {}
    for pid, qid, last, committed, live, batch_last, leased_by_all in heads:
        slowest = _Cursor("", committed, live, batch_last, None)
        ready, waiting, leased, _ = _depth(slowest, last, parked_from.get(pid))
        claimable += ready
        parked += waiting
        in_flight += leased_by_all
        pending[qid] = pending.get(qid, 0) + ready + waiting + leased
    kept = heapq.nsmallest(limit, names, key=lambda qid: (-pending.get(qid, 0), names[qid]))
    rank = {qid: i for i, qid in enumerate(kept)}
    rows = sorted(Queue.objects.filter(id__in=kept).values_list(*_QUEUE_FIELDS), key=lambda row: rank[row[0]])
    return _boards(rows, with_groups=False), BoardTotals(len(names), claimable, parked, in_flight)


def _number(value: Any) -> int:
    """An option's value as ``_read`` takes it (``int(value or 0)``), from its text."""
    try:
        return int(float(value)) if value else 0
    except (TypeError, ValueError):
        return 0


@dataclass(frozen=True)
class BoardTotals:
    """Every queue's depth by state, summed (``queue_boards_deepest``)."""

    queues: int
    claimable: int
    parked: int
    in_flight: int


def _depth(worst: _Cursor, last: int, parked_from: int | None) -> tuple[int, int, int, int]:
    """A partition's depth for its slowest group ``worst``: (claimable,
    parked, leased by it, the first offset it has not claimed)."""
    leased = worst.leased(last)
    head = (worst.batch_last if worst.live_lease else worst.committed) + 1
    young = max(head, last + 1 if parked_from is None else parked_from)
    parked = max(0, last - young + 1)
    return max(0, last - worst.committed - leased - parked), parked, leased, head


def _boards(queues: list[tuple[Any, ...]], *, with_groups: bool) -> list[QueueBoard]:
    """Boards of ``queues`` (rows of ``_QUEUE_FIELDS``), in their order."""
    if not queues:
        return []
    now = clock.now()
    qids = [q[0] for q in queues]
    delays = {q[0]: int((q[4] or {}).get("delayedProcessing") or 0) for q in queues}
    rows = list(
        Partition.objects.order_by("queue_id", "name")
        .filter(queue_id__in=qids)
        .values_list("id", "queue_id", "name", "next_offset", "last_push_at", "log_start")
    )
    # Below the log start nothing is stored (retention or a purge deleted
    # it): a cursor there is pending from the log start on, as its next
    # claim reads (protocol 11.3: last - max(committed, log_start - 1)).
    floors = {row[0]: row[5] - 1 for row in rows if row[5] > 0}
    parts = [row[:5] for row in rows]
    pids = [p[0] for p in parts]
    named: dict[int, set[str]] = {}
    conflating: set[tuple[int, str]] = set()
    for qid, group, conflation in ConsumerGroup.objects.filter(queue_id__in=qids).values_list(
        "queue_id", "name", "conflation"
    ):
        named.setdefault(qid, set()).add(group)
        if conflation:
            conflating.add((qid, group))
    cursors = _cursors(pids, now, with_claims=with_groups)
    parked_from = _parked_from([(p[0], p[3], delays[p[1]]) for p in parts], now)

    # Per partition: the groups that count and each one's cursor (a group
    # with no cursor row reads the partition from the start: ``unread``).
    unread = {g: _Cursor(g, -1, False, -1, None) for g in {QUEUE_MODE}.union(*named.values())}
    order = {qid: sorted(names) for qid, names in named.items()}
    considered: dict[int, list[_Cursor]] = {}
    for pid, qid, *_ in parts:
        have = cursors.get(pid, {})
        floor = floors.get(pid, -1)
        considered[pid] = [_above(have.get(g) or unread[g], floor) for g in order.get(qid, (QUEUE_MODE,))]

    # The push times wanted: each partition's claimable head and, for the
    # groups table, each group's first unfinished offset.
    heads: dict[int, tuple[int, int, int, int, int]] = {}
    wanted: set[tuple[int, int]] = set()
    for pid, _, _, next_offset, _ in parts:
        last = next_offset - 1
        worst = min(considered[pid], key=_COMMITTED)  # furthest behind; the first, in name order
        claimable, parked, slowest_leased, head = _depth(worst, last, parked_from.get(pid))
        # Every cursor row holds its group's lease, named or queue mode.
        in_flight = sum(c.leased(last) for c in cursors.get(pid, {}).values())
        heads[pid] = (claimable, parked, in_flight, slowest_leased, head)
        if claimable:
            wanted.add((pid, head))
        if with_groups:
            wanted.update((pid, c.committed + 1) for c in considered[pid] if c.committed < last)
    dlq = _dlq_counts([q[0] for q in queues], per_partition=with_groups)
    times = store().push_times(sorted(wanted))

    by_queue: dict[int, list[tuple[Any, ...]]] = {}
    for part in parts:
        by_queue.setdefault(part[1], []).append(part)
    boards = []
    for qid, name, namespace, task, options, paused, paused_groups in queues:
        held = tuple(paused_groups or ())
        mine = by_queue.get(qid, [])
        count, capped = dlq.get(qid, ({}, False))
        partitions = []
        for pid, _, pname, next_offset, last_push in mine:
            claimable, parked, in_flight, slowest_leased, head = heads[pid]
            partitions.append(
                PartitionBoard(
                    pid,
                    pname,
                    next_offset - 1,
                    claimable,
                    parked,
                    in_flight,
                    count.get(pid, 0),
                    times.get((pid, head)) if claimable else None,
                    last_push,
                    slowest_leased,
                )
            )
        groups: tuple[GroupLag, ...] = ()
        if with_groups:
            lags = _group_lags(mine, considered, times)
            groups = tuple(replace(g, conflation=(qid, g.name) in conflating, paused=g.name in held) for g in lags)
        boards.append(
            QueueBoard(
                qid,
                name,
                namespace,
                task,
                delays[qid],
                tuple(partitions),
                min(sum(count.values()), DLQ_DETAIL_CAP if with_groups else DLQ_COUNT_CAP),
                capped,
                groups,
                int((options or {}).get("priority") or 0),
                paused,
                held,
            )
        )
    return boards


def _cursors(pids: list[int], now: datetime, *, with_claims: bool) -> dict[int, dict[str, _Cursor]]:
    """The cursors of partitions ``pids``, by partition and group."""
    live = ExpressionWrapper(Q(lease_id__isnull=False, leased_until__gt=now), output_field=BooleanField())
    rows = ConsumerCursor.objects.annotate(live=live).filter(partition_id__in=pids)
    fields = ["partition_id", "group", "committed_offset", "live", "batch_last"]
    if with_claims:
        fields.append("last_claim_at")
    cursors: dict[int, dict[str, _Cursor]] = {}
    for pid, group, committed, is_live, batch_last, *claim in rows.values_list(*fields):
        cursors.setdefault(pid, {})[group] = _Cursor(
            group, committed, bool(is_live), batch_last, claim[0] if claim else None
        )
    return cursors


def _group_lags(
    parts: list[tuple[Any, ...]], considered: dict[int, list[_Cursor]], times: dict[tuple[int, int], datetime]
) -> tuple[GroupLag, ...]:
    by_group: dict[str, list[tuple[int, int, _Cursor]]] = {}
    for pid, _, _, next_offset, _ in parts:
        for cur in considered[pid]:
            by_group.setdefault(cur.group, []).append((pid, next_offset - 1, cur))
    result = []
    for group, rows in sorted(by_group.items()):
        oldest = [
            times[(pid, c.committed + 1)]
            for pid, last, c in rows
            if c.committed < last and (pid, c.committed + 1) in times
        ]
        claims = [c.last_claim_at for _, _, c in rows if c.last_claim_at is not None]
        result.append(
            GroupLag(
                group,
                sum(max(0, last - c.committed) for _, last, c in rows),
                sum(c.leased(last) for _, last, c in rows),
                min(oldest) if oldest else None,
                max(claims) if claims else None,
            )
        )
    return tuple(result)


def _parked_from(parts: list[tuple[int, int, int]], now: datetime) -> dict[int, int]:
    """The first parked offset of each partition of a delayed queue.

    ``parts`` holds (partition id, next offset, delay seconds); partitions
    of queues without a delay are left out of the answer (nothing parks).
    Partitions are grouped by delay: one statement per distinct delay.
    Offsets are pushed in time order, which is what the claim relies on
    too (it stops at the first young message).
    """
    by_delay: dict[int, list[int]] = {}
    for pid, next_offset, delay in parts:
        if delay > 0 and next_offset > 0:
            by_delay.setdefault(delay, []).append(pid)
    result: dict[int, int] = {}
    for delay, pids in sorted(by_delay.items()):
        result.update(store().parked_from(pids, now - timedelta(seconds=delay)))
    return result


def _dlq_counts(qids: list[int], *, per_partition: bool) -> dict[int, tuple[dict[int, int], bool]]:
    """Dead letters of each queue, counting at most a cap per queue.

    One statement: a bounded sub-select per queue on the ``queue, id``
    index, so a queue with a million dead letters costs what one at the
    cap does. A list of queues counts up to ``DLQ_COUNT_CAP`` per queue
    from the index alone; one queue's page (``per_partition``) reads the
    rows, up to ``DLQ_DETAIL_CAP``, to split them by partition. Returns
    {queue id: ({partition id or 0: count}, capped)}.
    """
    cap = DLQ_DETAIL_CAP if per_partition else DLQ_COUNT_CAP
    counts: dict[int, dict[int, int]] = {}
    for qid, pid, n in store().dlq_counts(qids, cap=cap, per_partition=per_partition):
        if n:
            counts.setdefault(qid, {})[pid] = n
    return {qid: (per, sum(per.values()) > cap) for qid, per in counts.items()}


# --------------------------------------------------------------------------
# Messages


@dataclass(frozen=True)
class MessageRow:
    """A message as a list shows it: the payload cut to a preview."""

    partition_id: int
    partition: str
    offset: int
    message_id: str
    transaction_id: str
    trace_id: str | None
    preview: str
    #: The payload is longer than ``preview``.
    cut: bool
    created_at: datetime


def _message_rows(rows: Iterable[tuple[Any, ...]], names: dict[int, str]) -> list[MessageRow]:
    return [
        MessageRow(
            pid,
            names.get(pid, "?"),
            offset,
            mid,
            txn,
            trace,
            preview[:PREVIEW_CHARS],
            len(preview) > PREVIEW_CHARS,
            created,
        )
        for pid, offset, mid, txn, trace, preview, created in rows
    ]


_MESSAGE_FIELDS = ("partition_id", "offset", "message_id", "transaction_id", "trace_id", "preview", "created_at")


def recent_messages(
    *, partition_id: int, partition: str, before: int | None = None, limit: int = 50
) -> list[MessageRow]:
    """The newest messages of a partition below offset ``before`` (keyset).

    One statement on the (partition, offset) index; the payload is cut in
    the database, so a large one is never read whole.
    """
    rows = Message.objects.filter(partition_id=partition_id)
    if before is not None:
        rows = rows.filter(offset__lt=before)
    page = (
        rows.annotate(preview=Substr("payload", 1, PREVIEW_CHARS + 1))
        .order_by("-offset")
        .values_list(*_MESSAGE_FIELDS)[:limit]
    )
    return _message_rows(page, {partition_id: partition})


def find_messages(*, text: str, partitions: dict[int, str], limit: int = 20) -> list[MessageRow]:
    """Messages of ``partitions`` whose id or transactionId is ``text``.

    Index lookups only: ``message_id`` has its own index and the
    transactionId is looked up per partition on (partition, transactionId).
    ``partitions`` maps partition id to name (those searched).
    """
    if not partitions or not text:
        return []
    match = Q(message_id=text) | Q(partition_id__in=list(partitions), transaction_id=text)
    page = (
        Message.objects.filter(match, partition_id__in=list(partitions))
        .annotate(preview=Substr("payload", 1, PREVIEW_CHARS + 1))
        .order_by("partition_id", "offset")
        .values_list(*_MESSAGE_FIELDS)[:limit]
    )
    return _message_rows(page, partitions)


# --------------------------------------------------------------------------
# Dead letters


@dataclass(frozen=True)
class DeadLetterFilter:
    """Which dead letters of a queue: by consumer group and partition (None:
    any), error text (holding ``error``, case aside) and error signature
    (``store.error_signature_of``: exactly ``signature``).

    ``upto`` bounds the selection to the ids the operator saw (the highest
    id on the page they confirmed), so an action on "all that match" does
    not chase dead letters that arrive while it runs.
    """

    queue: str
    group: str | None = None
    partition: str | None = None
    upto: int | None = None
    error: str | None = None
    signature: str | None = None

    def describe(self) -> str:
        parts = [f"queue={self.queue}"]
        if self.group is not None:
            parts.append(f"group={self.group}")
        if self.partition is not None:
            parts.append(f"partition={self.partition}")
        if self.error is not None:
            parts.append(f"error~{self.error!r}")
        if self.signature is not None:
            parts.append(f"signature={self.signature!r}")
        if self.upto is not None:
            parts.append(f"id<={self.upto}")
        return " ".join(parts)


@dataclass(frozen=True)
class DeadLetterItem:
    id: int
    partition: str
    group: str
    offset: int
    message_id: str
    transaction_id: str
    preview: str
    cut: bool
    error: str | None
    retry_count: int
    failed_at: datetime
    #: Who pushed the message (``producerSub``); None when nobody was named.
    producer_sub: str | None = None


def _by_error(rows: Any, error: str | None, signature: str | None) -> Any:
    """``rows`` whose error holds ``error`` (case aside) and whose error
    signature is ``signature`` (None: any)."""
    if error:
        rows = rows.filter(error__icontains=error)
    if signature is not None:
        rows = rows.alias(signature=store().error_signature("error")).filter(signature=signature)
    return rows


def dead_letters_matching(selection: DeadLetterFilter) -> Any:
    """The queryset of dead letters ``selection`` names (for reads and writes)."""
    s = selection
    if has_nul(s.queue, s.group, s.partition, s.error, s.signature):
        return DeadLetter.objects.none()
    rows = _by_error(dead_letters_where(queue=s.queue, group=s.group, partition=s.partition), s.error, s.signature)
    if s.upto is not None:
        rows = rows.filter(id__lte=s.upto)
    return rows


#: A dead letter's columns as a page lists them (``_dead_letter_item``).
_DEAD_LETTER_COLUMNS = (
    "id",
    "partition__name",
    "group",
    "offset",
    "message_id",
    "transaction_id",
    "preview",
    "error",
    "retry_count",
    "failed_at",
    "producer_sub",
)


def _dead_letter_rows(rows: Any, before: int | None, limit: int, *leading: str) -> list[tuple[Any, ...]]:
    """A page of ``rows``, newest first, ids below ``before``: ``leading``
    columns, then ``_DEAD_LETTER_COLUMNS``. One statement."""
    if before is not None:
        rows = rows.filter(id__lt=before)
    return list(
        rows.annotate(preview=Substr("payload", 1, PREVIEW_CHARS + 1))
        .order_by("-id")
        .values_list(*leading, *_DEAD_LETTER_COLUMNS)[:limit]
    )


def _dead_letter_item(row: tuple[Any, ...]) -> DeadLetterItem:
    i, p, g, o, mid, txn, pre, err, rc, failed, sub = row
    return DeadLetterItem(i, p, g, o, mid, txn, pre[:PREVIEW_CHARS], len(pre) > PREVIEW_CHARS, err, rc, failed, sub)


def dead_letter_page(
    *, selection: DeadLetterFilter, before: int | None = None, limit: int = 50
) -> list[DeadLetterItem]:
    """Dead letters matching ``selection``, newest first, ids below ``before``."""
    return [_dead_letter_item(row) for row in _dead_letter_rows(dead_letters_matching(selection), before, limit)]


@dataclass(frozen=True)
class DeadLetterAnywhere:
    """A dead letter of any queue, as the DLQ page across queues lists it."""

    queue: str
    item: DeadLetterItem


@dataclass(frozen=True)
class AcrossQueues:
    """Which dead letters of every queue (or ``queue``): ``DeadLetterFilter``'s
    fields but the partition, each None for any."""

    queue: str | None = None
    group: str | None = None
    error: str | None = None
    signature: str | None = None
    upto: int | None = None

    def rows(self) -> Any:
        """The queryset of the dead letters named (none for a name with NUL)."""
        if has_nul(self.queue, self.group, self.error, self.signature):
            return DeadLetter.objects.none()
        rows = _by_error(
            dead_letters_where(queue=self.queue, group=self.group, partition=None), self.error, self.signature
        )
        return rows if self.upto is None else rows.filter(id__lte=self.upto)

    def of_queue(self, queue: str) -> DeadLetterFilter:
        """The same filter on one queue."""
        return DeadLetterFilter(
            queue=queue, group=self.group, upto=self.upto, error=self.error, signature=self.signature
        )


def dead_letters_across(
    *,
    queue: str | None = None,
    group: str | None = None,
    before: int | None = None,
    limit: int = 50,
    error: str | None = None,
    signature: str | None = None,
) -> list[DeadLetterAnywhere]:
    """Dead letters of every queue (or ``queue``), of ``group`` (None: any),
    with ``error`` in their error text and of error ``signature`` (None:
    any), newest first, ids below ``before``: one statement a page (indexed
    unless an error filter has to read rows until the page is full)."""
    rows = AcrossQueues(queue, group, error, signature).rows()
    return [
        DeadLetterAnywhere(row[0], _dead_letter_item(row[1:]))
        for row in _dead_letter_rows(rows, before, limit, "queue__name")
    ]


#: Dead letters the signature counts look at: the newest that match.
SIGNATURE_SAMPLE = 10_000


@dataclass(frozen=True)
class SignatureCount:
    signature: str
    count: int


@dataclass(frozen=True)
class SignatureCounts:
    """The most frequent error signatures among the newest ``examined``
    dead letters that match; ``capped``: more match than were examined."""

    counts: tuple[SignatureCount, ...]
    examined: int
    capped: bool


def dead_letter_signatures(
    *, selection: AcrossQueues, sample: int = SIGNATURE_SAMPLE, limit: int = 20
) -> SignatureCounts:
    """The ``limit`` most frequent error signatures (``store.error_signature_of``)
    of the newest ``sample`` dead letters ``selection`` names, with their
    counts, most frequent first. Three statements, whatever the DLQ holds:
    the sample's lowest id (keyset, on the id index), its size, the counts."""
    rows = selection.rows()
    floor = list(rows.order_by("-id").values_list("id", flat=True)[sample - 1 : sample + 1])
    capped = len(floor) > 1
    if capped:
        rows = rows.filter(id__gte=floor[0])
    examined = rows.count()
    if not examined:
        return SignatureCounts((), 0, False)
    grouped = (
        rows.annotate(signature=store().error_signature("error"))
        .values("signature")
        .annotate(n=Count("id"))
        .order_by("-n", "signature")[:limit]
    )
    return SignatureCounts(tuple(SignatureCount(g["signature"], g["n"]) for g in grouped), examined, capped)


def dead_letter_queue_names(*, selection: AcrossQueues, limit: int = 100) -> list[str]:
    """The queues holding dead letters ``selection`` names, by name, at most ``limit``."""
    names = selection.rows().order_by("queue__name").values_list("queue__name", flat=True).distinct()
    return list(names[:limit])


def dead_letter_queues(*, ids: Iterable[int]) -> dict[str, tuple[int, ...]]:
    """The dead letters ``ids`` that exist, by queue name (ids ascending)."""
    found: dict[str, list[int]] = {}
    for name, pk in DeadLetter.objects.filter(pk__in=list(ids)).order_by("id").values_list("queue__name", "id"):
        found.setdefault(name, []).append(pk)
    return {name: tuple(pks) for name, pks in found.items()}
