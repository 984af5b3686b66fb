"""Process metrics: each serving process samples itself; readers bucket them.

``procmetrics_record`` runs once per tick of ``SAMPLER_INTERVAL_SECONDS`` in
every ``serve`` worker (``server.loops``): it writes the process's reading
of itself (``metrics.process.read_self``: CPU seconds, memory, threads and
the requests it answered) as one row, then removes rows older than
``SAMPLES_FINE_RETENTION_SECONDS``.

``procmetrics_replicas`` groups the rows of a time range per process and per
bucket, the shape of Queen's ``get_system_metrics``: CPU as Queen counts
it (percent of one core times 100, from the difference of a process's
consecutive rows), memory in bytes. ``procmetrics_requests`` sums the push,
pop and ack requests every process answered per bucket.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction

from queenadmin.conf import settings
from queenadmin.domain import clock
from queenadmin.domain.procmetrics.store import SampleRow, store


def retention() -> timedelta:
    return timedelta(seconds=settings.SAMPLES_FINE_RETENTION_SECONDS)


def procmetrics_record(*, row: SampleRow, now: datetime | None = None) -> int:
    """Write a process's reading ``row`` and prune the rows older than the
    retention before ``now``.

    Returns the rows pruned (at most ``SAMPLES_PRUNE_BATCH`` a call). Must be
    the outermost call.
    """
    now = now or clock.now()
    with transaction.atomic(durable=True):
        store().insert(row)
        return store().delete_before(now - retention(), batch=settings.SAMPLES_PRUNE_BATCH)


@dataclass(frozen=True)
class Stat:
    """Queen's aggregate of one measure over a bucket."""

    avg: float
    min: float
    max: float
    last: float


def _stat(values: Sequence[float]) -> Stat | None:
    if not values:
        return None
    return Stat(avg=sum(values) / len(values), min=min(values), max=max(values), last=values[-1])


@dataclass(frozen=True)
class ReplicaPoint:
    """One process's rows in one bucket."""

    at: datetime
    samples: int
    #: Percent of one core times 100 (Queen's ``user_us``/``system_us``);
    #: None when no row of the bucket has an earlier one to compare with.
    cpu_user: Stat | None
    cpu_system: Stat | None
    rss_bytes: Stat | None
    virtual_bytes: Stat | None
    threads: Stat | None
    #: Cumulative CPU seconds at the bucket's last row.
    cpu_user_seconds: float
    cpu_system_seconds: float
    #: Requests answered during the bucket.
    requests: int


@dataclass(frozen=True)
class Replica:
    host: str
    port: int
    pid: int
    points: list[ReplicaPoint]


def _lookback() -> timedelta:
    """How far before a range to look for each process's previous row."""
    return timedelta(seconds=3 * max(1, int(settings.SAMPLER_INTERVAL_SECONDS)))


def _pairs(since: datetime, until: datetime) -> dict[tuple[str, int, int], list[tuple[SampleRow | None, SampleRow]]]:
    """Per process, each row in the range with the row before it (if read)."""
    out: dict[tuple[str, int, int], list[tuple[SampleRow | None, SampleRow]]] = defaultdict(list)
    previous: SampleRow | None = None
    try:
        start = since - _lookback()
    except OverflowError:  # a range from the year 1
        start = since
    for row in store().rows_between(start, until):
        key = (row.host, row.port, row.pid)
        if previous is not None and (previous.host, previous.port, previous.pid) != key:
            previous = None
        if row.at >= since:
            out[key].append((previous, row))
        previous = row
    return out


def _rate(before: SampleRow | None, row: SampleRow, value: Callable[[SampleRow], float]) -> float | None:
    if before is None:
        return None
    wall = (row.at - before.at).total_seconds()
    if wall <= 0:
        return None
    return round(max(0.0, value(row) - value(before)) / wall * 10000, 2)


def _grown(before: SampleRow | None, row: SampleRow, value: Callable[[SampleRow], int]) -> int:
    """How much a cumulative count grew since ``before`` (since start without one)."""
    if before is None:
        return value(row)
    grown = value(row) - value(before)
    # A restarted process with the same pid counts from 0 again.
    return grown if grown >= 0 else value(row)


def procmetrics_replicas(*, since: datetime, until: datetime, bucket: timedelta) -> list[Replica]:
    """Each process's rows of ``[since, until]`` in buckets of ``bucket``."""
    seconds = max(1, int(bucket.total_seconds()))
    replicas = []
    for (host, port, pid), pairs in sorted(_pairs(since, until).items()):
        buckets: dict[datetime, list[tuple[SampleRow | None, SampleRow]]] = defaultdict(list)
        for pair in pairs:
            buckets[clock.align(pair[1].at, seconds)].append(pair)
        points = []
        for at, group in sorted(buckets.items()):
            user = [r for b, row in group if (r := _rate(b, row, lambda s: s.cpu_user_seconds)) is not None]
            system = [r for b, row in group if (r := _rate(b, row, lambda s: s.cpu_system_seconds)) is not None]
            rows = [row for _, row in group]
            last = rows[-1]
            points.append(
                ReplicaPoint(
                    at=at,
                    samples=len(rows),
                    cpu_user=_stat(user),
                    cpu_system=_stat(system),
                    rss_bytes=_stat([float(r.rss_bytes) for r in rows if r.rss_bytes is not None]),
                    virtual_bytes=_stat([float(r.virtual_bytes) for r in rows if r.virtual_bytes is not None]),
                    threads=_stat([float(r.threads) for r in rows]),
                    cpu_user_seconds=last.cpu_user_seconds,
                    cpu_system_seconds=last.cpu_system_seconds,
                    requests=sum(_grown(b, row, lambda s: s.requests) for b, row in group),
                )
            )
        replicas.append(Replica(host=host, port=port, pid=pid, points=points))
    return replicas


@dataclass(frozen=True)
class RequestCounts:
    """Requests every process answered in one bucket."""

    push: int
    pop: int
    ack: int


def procmetrics_requests(*, since: datetime, until: datetime, bucket: timedelta) -> dict[datetime, RequestCounts]:
    """Push, pop and ack requests of ``[since, until]`` per bucket, summed
    over every process; a bucket no process sampled in is absent."""
    seconds = max(1, int(bucket.total_seconds()))
    sums: dict[datetime, list[int]] = defaultdict(lambda: [0, 0, 0])
    for pairs in _pairs(since, until).values():
        for before, row in pairs:
            counts = sums[clock.align(row.at, seconds)]
            counts[0] += _grown(before, row, lambda s: s.push_requests)
            counts[1] += _grown(before, row, lambda s: s.pop_requests)
            counts[2] += _grown(before, row, lambda s: s.ack_requests)
    return {at: RequestCounts(*counts) for at, counts in sums.items()}
