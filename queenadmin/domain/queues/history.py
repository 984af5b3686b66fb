"""Statistics over time: per-queue counters sampled into ``QueueSample``.

A sample reads every queue's counters from offsets and cursors (design.md
section 2), never by counting messages:

- ``pushed``: the offsets handed out, ``sum(next_offset)`` (offsets start at 0);
- ``popped``, ``acked``, ``failed``: the monotonic counters the claim and
  ack UPDATEs bump on each cursor (``ConsumerCursor.delivered``, ``acked``,
  ``failed``), summed over every group;
- ``dlq``: ``ConsumerCursor.dead_lettered``, summed likewise;
- ``depth``: per partition ``last - max(committed_offset, log_start - 1)`` of the
  slowest group (queue mode when the queue has no named groups), summed;
- ``oldest_claimable_age``: the push time of each partition's next
  claimable message, one lookup of the (partition, offset) index per
  partition, a few hundred to a statement (the queue store's
  ``push_times``).

The same read, split by consumer group, goes to ``GroupSample`` (one row
per queue and group a tick, ``groupsamples``): what each group's rates
over the last minutes read. The step also counts the KV store's keys per
namespace (``kv.kv_namespaces_keep_in_txn``): the overview shows that
count rather than scan every key at each render.

Rows are kept at the sampler's interval (``SAMPLER_INTERVAL_SECONDS``) for
``SAMPLES_FINE_RETENTION_SECONDS`` and rolled up into rows of
``SAMPLES_COARSE_SECONDS`` kept ``SAMPLES_COARSE_RETENTION_SECONDS``; both
roll-up and pruning work in bounded batches. Every row stores both the
cumulative counters (the next sample's base) and what happened during its
interval, so a roll-up is a sum and a refresh in the middle of a tick
rewrites that tick's row without counting anything twice.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from django.db import connection, transaction
from django.db.models import Avg, Count, Max, Q, QuerySet, Sum

from queenadmin.conf import settings
from queenadmin.domain import clock, kv
from queenadmin.domain.queues.groupsamples import GroupCounters, group_prune_in_txn, group_sample_in_txn
from queenadmin.domain.queues.store import store
from queenadmin.domain.queues.store.base import from_unix_micros
from queenadmin.models.queues import (
    QUEUE_MODE,
    ConsumerCursor,
    ConsumerGroup,
    Partition,
    Queue,
    QueueSample,
    QueueSampleTotal,
)

#: A statistics row model pruned fine/coarse alike (per queue or the totals).
_Sample = TypeVar("_Sample", QueueSample, QueueSampleTotal)

_COUNTERS = ("pushed", "popped", "acked", "failed", "dlq")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: (partition, offset) pairs per message lookup statement.
_LOOKUP_CHUNK = 400

# Internal, not settings (docs/settings.md, "Internal constants"): the
# roll-up's row size in seconds (a multiple of the sampler's interval; rows of
# another size already stored would not be rolled up again), the most coarse
# intervals one step rolls up, and rows deleted per pruning statement.
SAMPLES_COARSE_SECONDS = 300
SAMPLES_ROLLUP_BUCKETS = 48
SAMPLES_PRUNE_BATCH = 1000


@dataclass(frozen=True)
class Interval:
    """What the counters (``_COUNTERS``) of a queue, or of all queues
    summed, counted in an interval that starts at ``at``."""

    at: datetime
    pushed: int
    popped: int
    acked: int
    failed: int
    dlq: int


@dataclass(frozen=True)
class SamplePoint(Interval):
    """One interval of a queue's history (or of all queues summed).

    The counters say what happened during it; ``depth`` and
    ``oldest_claimable_age`` (seconds, 0 when nothing is claimable) are
    read at its end. Summed over queues, the age is the largest.
    """

    depth: int
    oldest_claimable_age: float
    #: The interval's length: the sampler's, or the roll-up's for history
    #: older than the fine rows kept.
    seconds: int


@dataclass(frozen=True)
class QueueCounters:
    """A queue's counters now, as one sample reads them."""

    queue_id: int
    queue: str
    namespace: str | None
    task: str | None
    created_at: datetime
    partitions: int
    pushed: int
    popped: int
    acked: int
    failed: int
    dlq: int
    depth: int
    #: Of ``depth``, the messages under a live lease of the same cursors.
    processing: int
    oldest_claimable_age: float
    #: Each consumer group that counts for the depth (the named groups, or
    #: queue mode when there are none), by name.
    groups: tuple[GroupCounters, ...] = ()
    #: Whose pops are paused (``operator/pause.py``): every one, and the
    #: groups paused on their own (sorted).
    paused: bool = False
    paused_groups: tuple[str, ...] = ()


def _fine_seconds() -> int:
    return max(1, int(settings.SAMPLER_INTERVAL_SECONDS))


def _coarse_seconds() -> int:
    fine = _fine_seconds()
    coarse = max(fine, int(SAMPLES_COARSE_SECONDS))
    # A coarse bucket holds whole fine ticks.
    return coarse - coarse % fine


def _head_times(heads: dict[int, int]) -> dict[int, datetime]:
    """Push time of the message at offset ``heads[pid]`` of each partition.

    One indexed lookup per pair, a few hundred pairs per statement; a
    message gone meanwhile (retention, a queue delete) is left out.
    """
    found: dict[int, datetime] = {}
    pairs = sorted(heads.items())
    for start in range(0, len(pairs), _LOOKUP_CHUNK):
        for (pid, _), created in store().push_times(pairs[start : start + _LOOKUP_CHUNK]).items():
            found[pid] = created
    return found


def queue_counters(*, now: datetime | None = None, with_age: bool = True) -> list[QueueCounters]:
    """Every queue's counters now (see the module docstring), by name.

    Cost: every partition, cursor and group row once, plus (``with_age``;
    otherwise every age is 0) one index lookup per partition with a
    claimable message. Nothing locks.
    """
    now = now or clock.now()
    queues = {
        qid: (name, namespace, task, created, paused, tuple(held or ()))
        for qid, name, namespace, task, created, paused, held in Queue.objects.values_list(
            "id", "name", "namespace", "task", "created_at", "paused", "paused_groups"
        )
    }
    named: dict[int, set[str]] = defaultdict(set)
    for qid, group in ConsumerGroup.objects.values_list("queue_id", "name"):
        named[qid].add(group)
    partitions = list(Partition.objects.values_list("id", "queue_id", "next_offset", "log_start"))
    cursors: dict[int, dict[str, tuple[Any, ...]]] = defaultdict(dict)
    sums: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    # (partition, group) -> the cursor's delivered, acked, failed, dead-lettered.
    cursor_counts: dict[tuple[int, str], tuple[int, int, int, int]] = {}
    for (
        pid,
        group,
        committed,
        lease,
        until,
        batch_last,
        delivered,
        acked,
        failed,
        dead,
    ) in ConsumerCursor.objects.values_list(
        "partition_id",
        "group",
        "committed_offset",
        "lease_id",
        "leased_until",
        "batch_last",
        "delivered",
        "acked",
        "failed",
        "dead_lettered",
    ):
        cursors[pid][group] = (committed, lease is not None and until is not None and until > now, batch_last)
        total = sums[pid]
        total[0] += delivered
        total[1] += acked
        total[2] += failed
        total[3] += dead
        cursor_counts[(pid, group)] = (delivered, acked, failed, dead)

    per_group: dict[int, dict[str, list[int]]] = defaultdict(dict)
    per_queue: dict[int, list[int]] = defaultdict(lambda: [0] * 8)
    heads: dict[int, int] = {}
    queue_of: dict[int, int] = {}
    for pid, qid, next_offset, log_start in partitions:
        if qid not in queues:
            continue  # Created after the queue list was read.
        last = next_offset - 1
        considered = named[qid] or {QUEUE_MODE}
        depth = processing = 0
        head: int | None = None
        for group in considered:
            # A group with no cursor here reads the partition from the start.
            committed, live, batch_last = cursors[pid].get(group, (-1, False, -1))
            # Retention deleted everything below the log start (protocol 11.3).
            committed = max(committed, log_start - 1)
            mine = per_group[qid].setdefault(group, [0, 0, 0, 0, 0])
            for i, n in enumerate(cursor_counts.get((pid, group), (0, 0, 0, 0))):
                mine[i] += n
            mine[4] += max(0, last - committed)
            if last - committed > depth:
                depth = last - committed
                processing = max(0, min(batch_last, last) - committed) if live else 0
            ready = max((batch_last if live else committed) + 1, log_start)
            if ready <= last and (head is None or ready < head):
                head = ready
        if head is not None:
            heads[pid] = head
            queue_of[pid] = qid
        counts = per_queue[qid]
        counts[0] += next_offset
        counts[1:5] = [a + b for a, b in zip(counts[1:5], sums.get(pid, (0, 0, 0, 0)), strict=True)]
        counts[5] += depth
        counts[6] += processing
        counts[7] += 1

    oldest: dict[int, datetime] = {}
    for pid, created in (_head_times(heads) if with_age else {}).items():
        qid = queue_of[pid]
        if qid not in oldest or created < oldest[qid]:
            oldest[qid] = created
    result = []
    for qid, (name, namespace, task, created_at, paused, paused_groups) in queues.items():
        pushed, popped, acked, failed, dlq, depth, processing, partition_count = per_queue[qid]
        age = max(0.0, (now - oldest[qid]).total_seconds()) if qid in oldest else 0.0
        result.append(
            QueueCounters(
                qid,
                name,
                namespace,
                task,
                created_at,
                partition_count,
                pushed,
                popped,
                acked,
                failed,
                dlq,
                depth,
                processing,
                age,
                tuple(GroupCounters(g, *per_group[qid][g]) for g in sorted(per_group.get(qid, {}))),
                paused,
                paused_groups,
            )
        )
    result.sort(key=lambda c: c.queue)
    return result


# --------------------------------------------------------------------------
# Writing samples


def _totals(row: QueueSample) -> tuple[int, ...]:
    return (row.pushed_total, row.popped_total, row.acked_total, row.failed_total, row.dlq_total)


_UPDATE_FIELDS = [
    "queue_id",
    "pushed_total",
    "popped_total",
    "acked_total",
    "failed_total",
    "dlq_total",
    *_COUNTERS,
    "depth",
    "oldest_claimable_age",
]


def _upsert(rows: list[QueueSample]) -> None:
    """Write ``rows`` (every queue's, for each interval they hold) and their
    sums per interval (``QueueSampleTotal``)."""
    QueueSample.objects.bulk_create(
        rows,
        update_conflicts=True,
        unique_fields=["queue", "resolution", "at"],
        update_fields=_UPDATE_FIELDS,
        batch_size=500,
    )
    totals: dict[tuple[int, datetime], QueueSampleTotal] = {}
    for row in rows:
        total = totals.get((row.resolution, row.at))
        if total is None:
            total = totals[(row.resolution, row.at)] = QueueSampleTotal(
                resolution=row.resolution, at=row.at, **dict.fromkeys(_TOTALLED, 0), oldest_claimable_age=0.0
            )
        for name in _TOTALLED:
            setattr(total, name, getattr(total, name) + getattr(row, name))
        total.oldest_claimable_age = max(total.oldest_claimable_age, row.oldest_claimable_age)
    QueueSampleTotal.objects.bulk_create(
        list(totals.values()),
        update_conflicts=True,
        unique_fields=["resolution", "at"],
        update_fields=[*_TOTALLED, "oldest_claimable_age"],
    )


#: What ``QueueSampleTotal`` sums of the rows of an interval.
_TOTALLED = (*_COUNTERS, "depth")


def stats_sample_in_txn(*, now: datetime, counters: Sequence[QueueCounters] | None = None) -> int:
    """Write (or rewrite) every queue's row of the tick holding ``now``.

    What happened during the tick is measured from the previous tick's
    row. A queue without one counts everything it has as new when it was
    created after a tick the sampler recorded or, with no tick recorded
    at all, less than one coarse interval (``SAMPLES_COARSE_SECONDS``)
    before this tick; otherwise (the first sample of an old queue) it
    counts nothing, since when it happened is unknown. ``counters``
    (``queue_counters``) may be read before the transaction, so that on
    SQLite the write lock is held only for the writes. Returns the rows
    written. Inside the caller's transaction (asserted).
    """
    assert connection.in_atomic_block
    fine = _fine_seconds()
    tick = clock.align(now, fine)
    if counters is None:
        counters = queue_counters(now=now)
    last_tick = (
        QueueSample.objects.filter(resolution=fine, at__lt=tick).order_by("-at").values_list("at", flat=True).first()
    )
    previous = (
        {row.queue: row for row in QueueSample.objects.filter(resolution=fine, at=last_tick)} if last_tick else {}
    )
    # With no tick recorded at all (a new deployment, or the sampler's
    # first run), a queue this young counts everything it has: a loop that
    # runs late must not lose a new queue's first interval.
    young = tick - timedelta(seconds=_coarse_seconds())
    rows = []
    for c in counters:
        totals = (c.pushed, c.popped, c.acked, c.failed, c.dlq)
        prev = previous.get(c.queue)
        if prev is not None and prev.queue_id == c.queue_id:
            base = _totals(prev)
        elif prev is not None or last_tick is not None or c.created_at >= young:
            # Created (or deleted and created again) since the last tick.
            base = (0, 0, 0, 0, 0)
        else:
            base = totals
        deltas = [max(0, now_ - then) for now_, then in zip(totals, base, strict=True)]
        rows.append(_sample(c.queue_id, c.queue, fine, tick, totals, deltas, c.depth, c.oldest_claimable_age))
    _upsert(rows)
    return len(rows)


def _sample(
    queue_id: int,
    queue: str,
    resolution: int,
    at: datetime,
    totals: Sequence[int],
    counts: Sequence[int],
    depth: int,
    age: float,
) -> QueueSample:
    """A row of ``queue`` at ``at``: cumulative ``totals`` and the interval's
    ``counts``, both in ``_COUNTERS`` order, and the gauges at its end."""
    fields = {f"{name}_total": total for name, total in zip(_COUNTERS, totals, strict=True)}
    fields.update(zip(_COUNTERS, counts, strict=True))
    return QueueSample(
        queue_id=queue_id, queue=queue, resolution=resolution, at=at, depth=depth, oldest_claimable_age=age, **fields
    )


def stats_rollup_in_txn(*, now: datetime, max_buckets: int | None = None) -> int:
    """Roll complete fine ticks up into coarse rows, oldest first.

    At most ``max_buckets`` (``SAMPLES_ROLLUP_BUCKETS``) coarse intervals
    per call: counters summed, cumulative totals and gauges from the last
    tick of each. Returns the coarse rows written. Inside the caller's
    transaction (asserted).
    """
    assert connection.in_atomic_block
    fine, coarse = _fine_seconds(), _coarse_seconds()
    max_buckets = max_buckets or SAMPLES_ROLLUP_BUCKETS
    complete = clock.align(now, coarse)
    done = QueueSample.objects.filter(resolution=coarse).order_by("-at").values_list("at", flat=True).first()
    pending = QueueSample.objects.filter(resolution=fine, at__lt=complete)
    if done is not None:
        pending = pending.filter(at__gte=done + timedelta(seconds=coarse))
    first = pending.order_by("at").values_list("at", flat=True).first()
    if first is None:
        return 0
    start = clock.align(first, coarse)
    end = min(complete, start + timedelta(seconds=coarse * max_buckets))
    buckets: dict[tuple[str, datetime], list[QueueSample]] = defaultdict(list)
    for row in QueueSample.objects.filter(resolution=fine, at__gte=start, at__lt=end).order_by("at"):
        buckets[(row.queue, clock.align(row.at, coarse))].append(row)
    rows = []
    for (queue, at), ticks in sorted(buckets.items()):
        last = ticks[-1]
        counts = [sum(getattr(t, name) for t in ticks) for name in _COUNTERS]
        rows.append(
            _sample(last.queue_id, queue, coarse, at, _totals(last), counts, last.depth, last.oldest_claimable_age)
        )
    _upsert(rows)
    return len(rows)


def stats_prune_in_txn(*, now: datetime, batch: int | None = None, max_batches: int = 10) -> int:
    """Delete rows past their retention, ``batch`` rows per statement.

    Fine rows go once older than ``SAMPLES_FINE_RETENTION_SECONDS`` and
    rolled up; coarse rows once older than
    ``SAMPLES_COARSE_RETENTION_SECONDS``. At most ``max_batches``
    statements per call. Returns the rows deleted. Inside the caller's
    transaction (asserted).
    """
    assert connection.in_atomic_block
    fine, coarse = _fine_seconds(), _coarse_seconds()
    batch = batch or SAMPLES_PRUNE_BATCH
    rolled = QueueSample.objects.filter(resolution=coarse).order_by("-at").values_list("at", flat=True).first()
    fine_cutoff = now - timedelta(seconds=settings.SAMPLES_FINE_RETENTION_SECONDS)
    if rolled is None:
        fine_cutoff = _EPOCH
    else:
        # Cut at a coarse boundary, so reads can switch resolution there.
        fine_cutoff = clock.align(min(fine_cutoff, rolled + timedelta(seconds=coarse)), coarse)
    coarse_cutoff = now - timedelta(seconds=settings.SAMPLES_COARSE_RETENTION_SECONDS)
    targets = [
        QueueSample.objects.filter(resolution=fine, at__lt=fine_cutoff),
        QueueSample.objects.filter(resolution=coarse, at__lt=coarse_cutoff),
    ]
    # One row a tick: the sums go in one statement each.
    QueueSampleTotal.objects.filter(
        Q(resolution=fine, at__lt=fine_cutoff) | Q(resolution=coarse, at__lt=coarse_cutoff)
    ).delete()
    deleted = 0
    statements = 0
    for rows in targets:
        while statements < max_batches:
            ids = list(rows.order_by("at").values_list("id", flat=True)[:batch])
            if not ids:
                break
            statements += 1
            deleted += QueueSample.objects.filter(id__in=ids).delete()[0]
            if len(ids) < batch:
                break
    return deleted


@dataclass(frozen=True)
class SampleStep:
    """What one sampler step wrote."""

    sampled: int
    rolled_up: int
    pruned: int
    #: Seconds the KV key count took (None: not counted this step).
    keys_seconds: float | None = None


def stats_step(*, now: datetime | None = None, guard: kv.KVCheck | None = None, count_keys: bool = True) -> SampleStep:
    """Sample every queue, count the KV store's keys (``count_keys``), roll
    up and prune; the writes in one transaction.

    The counters and the key count are read before the transaction opens. ``guard`` (a lease's KV check) makes the step commit only while the
    lease is the caller's: otherwise it raises ``PreconditionFailed`` and
    nothing is written. Must be the outermost call.
    """
    now = now or clock.now()
    counters = queue_counters(now=now)
    started = time.perf_counter()
    keys = kv.kv_namespaces() if count_keys else None
    keys_seconds = time.perf_counter() - started if count_keys else None
    with transaction.atomic(durable=True):
        if guard is not None:
            kv.kv_call_in_txn([guard], now=now)
        if keys is not None:
            kv.kv_namespaces_keep_in_txn(counts=keys, now=now)
        sampled = stats_sample_in_txn(now=now, counters=counters)
        group_sample_in_txn(now=now, tick=clock.align(now, _fine_seconds()), counters=counters)
        rolled = stats_rollup_in_txn(now=now)
        pruned = stats_prune_in_txn(now=now) + group_prune_in_txn(now=now)
    return SampleStep(sampled, rolled, pruned, keys_seconds)


@dataclass(frozen=True)
class Refreshed:
    """What a refresh sampled: queues (one row each), and what they span."""

    at: datetime
    queues: int
    partitions: int
    namespaces: int
    tasks: int


def stats_refresh(*, now: datetime | None = None) -> Refreshed:
    """Sample every queue (and count the KV store's keys) now.

    Rewrites the current tick's rows if the sampler already wrote them, so
    nothing is counted twice. Must be the outermost call.
    """
    now = now or clock.now()
    counters = queue_counters(now=now)
    keys = kv.kv_namespaces()
    with transaction.atomic(durable=True):
        kv.kv_namespaces_keep_in_txn(counts=keys, now=now)
        written = stats_sample_in_txn(now=now, counters=counters)
        group_sample_in_txn(now=now, tick=clock.align(now, _fine_seconds()), counters=counters)
    namespaces = Queue.objects.exclude(namespace=None).values("namespace").distinct().count()
    tasks = Queue.objects.exclude(task=None).values("task").distinct().count()
    return Refreshed(now, written, Partition.objects.count(), namespaces, tasks)


# --------------------------------------------------------------------------
# Reading


def _points(rows: QuerySet[QueueSample]) -> list[SamplePoint]:
    """Rows summed per interval in the database: one row out per tick."""
    summed = (
        rows.values("at", "resolution")
        .annotate(
            p=Sum("pushed"),
            o=Sum("popped"),
            a=Sum("acked"),
            f=Sum("failed"),
            d=Sum("dlq"),
            n=Sum("depth"),
            g=Max("oldest_claimable_age"),
        )
        .order_by("at", "resolution")
    )
    return [
        SamplePoint(r["at"], r["p"], r["o"], r["a"], r["f"], r["d"], r["n"], r["g"], seconds=r["resolution"])
        for r in summed
    ]


def _series_rows(model: type[_Sample], since: datetime, until: datetime | None) -> QuerySet[_Sample]:
    """``model``'s fine rows from the oldest one kept on, coarse rows before it.

    Pruning keeps fine rows from a coarse boundary on (or from the first
    tick ever), so the coarse rows that end by then cover the rest without
    overlap. ``model`` is ``QueueSample`` (per queue) or ``QueueSampleTotal``
    (the sums per interval), which are pruned alike.
    """
    fine, coarse = _fine_seconds(), _coarse_seconds()
    boundary = model._default_manager.filter(resolution=fine).order_by("at").values_list("at", flat=True).first()
    wanted = Q(resolution=coarse, at__gte=clock.align(since, coarse))
    if boundary is not None:
        wanted = Q(resolution=fine, at__gte=max(clock.align(since, fine), boundary)) | (
            wanted & Q(at__lte=boundary - timedelta(seconds=coarse))
        )
    rows = model._default_manager.filter(wanted)
    if until is not None:
        rows = rows.filter(at__lte=until)
    return rows


def queue_series(
    *,
    queue: str | None,
    since: datetime,
    until: datetime | None = None,
    queues: Sequence[str] | None = None,
) -> list[SamplePoint]:
    """A queue's history from ``since`` to ``until`` (default: now), oldest first.

    Points of the intervals that hold ``since`` or start after it, up to
    ``until``: at the sampler's interval as far back as those rows are
    kept, at the roll-up's before that (``SamplePoint.seconds`` says
    which). ``queue`` None sums every queue (or the names in ``queues``).
    Intervals the sampler missed have no point.
    """
    rows = _series_rows(QueueSample, since, until)
    if queue is not None:
        rows = rows.filter(queue=queue)
    elif queues is not None:
        rows = rows.filter(queue__in=list(queues))
    return _points(rows.order_by("at"))


def total_series(*, since: datetime, until: datetime | None = None) -> list[SamplePoint]:
    """``queue_series(queue=None, ...)`` read from the sums per interval
    (``QueueSampleTotal``): one row a point, whatever the number of queues.
    Two statements."""
    rows = (
        _series_rows(QueueSampleTotal, since, until)
        .annotate(t=store().unix_micros("at"))
        .order_by("at", "resolution")
        .values_list("t", "pushed", "popped", "acked", "failed", "dlq", "depth", "oldest_claimable_age", "resolution")
    )
    return [
        SamplePoint(from_unix_micros(t), pushed, popped, acked, failed, dlq, depth, age, seconds=seconds)
        for t, pushed, popped, acked, failed, dlq, depth, age, seconds in rows
    ]


def queues_depth_series(
    *, queues: Sequence[str], since: datetime, until: datetime | None = None
) -> dict[str, list[tuple[int, float]]]:
    """The depth points of ``queue_series`` for each of ``queues``, in one
    statement (the overview's small charts): each queue's rows, oldest
    first, their times as whole microseconds since the Unix epoch (what a
    chart takes; ``from_unix_micros`` makes one a datetime); a queue with
    none in the window is left out. The depth alone is read: the counters
    of a row cost more to load than the rest."""
    rows = (
        _series_rows(QueueSample, since, until)
        .filter(queue__in=list(queues))
        .annotate(t=store().unix_micros("at"))
        .order_by("queue", "at")
        .values_list("queue", "t", "depth")
    )
    found: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for queue, t, depth in rows:
        found[queue].append((t, float(depth)))
    return dict(found)


@dataclass(frozen=True)
class QueueActivity:
    """One queue's sampled intervals in a time range, summed."""

    popped: int
    samples: int
    #: Mean and largest oldest-claimable age over the samples, in seconds.
    avg_age: float
    max_age: float


def queue_activity(*, since: datetime, until: datetime | None = None) -> dict[str, QueueActivity]:
    """Per queue with samples in the range (as ``queue_series`` reads it)."""
    summed = (
        _series_rows(QueueSample, since, until)
        .values("queue")
        .annotate(o=Sum("popped"), n=Count("id"), avg=Avg("oldest_claimable_age"), g=Max("oldest_claimable_age"))
        .order_by("queue")
    )
    return {r["queue"]: QueueActivity(r["o"], r["n"], r["avg"], r["g"]) for r in summed}


def latest_sample_at(*, upto: datetime | None = None) -> datetime | None:
    """When the newest fine tick starts (at or before ``upto``), if any."""
    rows = QueueSample.objects.filter(resolution=_fine_seconds())
    if upto is not None:
        rows = rows.filter(at__lte=upto)
    return rows.order_by("-at").values_list("at", flat=True).first()
