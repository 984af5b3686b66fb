"""Process metrics: each serving process samples itself; readers bucket them.

``procmetrics_record`` runs once per tick of ``SAMPLER_INTERVAL_SECONDS`` in
every ``serve`` worker (``server.loops``): CPU seconds (``os.times``),
memory and threads (``/proc/self/stat`` where there is one), and the
requests this process answered (``metrics.tally``), as one row, then
removes rows older than ``SAMPLES_FINE_RETENTION_SECONDS``.

``procmetrics_replicas`` groups the rows of a time range per process and per
bucket, the shape of Queen's ``get_system_metrics``: CPU as Queen counts
it (percent of one core times 100, from the difference of a process's
consecutive rows), memory in bytes. ``procmetrics_requests`` sums the push,
pop and ack requests every process answered per bucket.
"""

from __future__ import annotations

import os
import socket
import threading
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction

from queenadmin import metrics
from queenadmin.conf import settings
from queenadmin.domain import clock
from queenadmin.domain.procmetrics.store import SampleRow, store

#: The environment variable ``serve`` sets to the port it listens on.
PORT_ENV = "QUEENADMIN_SERVE_PORT"
#: Rows deleted per pruning statement. Internal, not a setting
#: (docs/settings.md, "Internal constants").
PRUNE_BATCH = 1000


def _proc_stat() -> tuple[int, int, int] | None:
    """(threads, virtual bytes, resident bytes) from ``/proc/self/stat``."""
    try:
        with open("/proc/self/stat", "rb") as f:
            text = f.read().decode("ascii", "replace")
    except OSError:
        return None
    # The command name (field 2) may hold spaces: count after its ")".
    fields = text[text.rindex(")") + 2 :].split()
    # fields[0] is field 3 (state): field n is fields[n - 3].
    threads, vsize, rss_pages = int(fields[17]), int(fields[20]), int(fields[21])
    return threads, vsize, rss_pages * os.sysconf("SC_PAGE_SIZE")


def procmetrics_read_self(*, now: datetime) -> SampleRow:
    """This process's reading of itself at ``now``."""
    times = os.times()
    stat = _proc_stat()
    served = metrics.tally.served()
    try:
        port = int(os.environ.get(PORT_ENV, "0"))
    except ValueError:
        port = 0
    return SampleRow(
        host=socket.gethostname()[:255],
        port=port,
        pid=os.getpid(),
        at=now,
        cpu_user_seconds=times.user,
        cpu_system_seconds=times.system,
        rss_bytes=stat[2] if stat else None,
        virtual_bytes=stat[1] if stat else None,
        threads=stat[0] if stat else threading.active_count(),
        push_requests=served.get("push", 0),
        pop_requests=served.get("pop", 0),
        ack_requests=served.get("ack", 0),
        requests=sum(served.values()),
    )


def retention() -> timedelta:
    return timedelta(seconds=settings.SAMPLES_FINE_RETENTION_SECONDS)


def procmetrics_record(*, now: datetime | None = None, row: SampleRow | None = None) -> int:
    """Write this process's reading (or ``row``) and prune old rows.

    Returns the rows pruned (at most ``PRUNE_BATCH`` a call).
    """
    now = now or clock.now()
    row = row or procmetrics_read_self(now=now)
    with transaction.atomic(durable=True):
        store().insert(row)
        return store().delete_before(now - retention(), batch=PRUNE_BATCH)


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
