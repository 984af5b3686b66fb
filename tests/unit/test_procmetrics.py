"""Process samples: reading oneself, retention, and the per-bucket arithmetic
of ``procmetrics_replicas`` and ``procmetrics_requests`` on rows of known values."""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.test import override_settings

from queenadmin import metrics
from queenadmin.domain import procmetrics
from queenadmin.domain.procmetrics.store import SampleRow
from queenadmin.domain.queues.sampler import SamplerLoop
from queenadmin.metrics import process
from queenadmin.models import ProcessSample

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 10, 8, 10, 0, 0, tzinfo=UTC)


def row(at: datetime, *, pid: int = 100, user: float = 0.0, system: float = 0.0, push: int = 0, **kw) -> SampleRow:
    values = {
        "host": "h1",
        "port": 6632,
        "pid": pid,
        "at": at,
        "cpu_user_seconds": user,
        "cpu_system_seconds": system,
        "rss_bytes": 50_000_000,
        "virtual_bytes": 90_000_000,
        "threads": 8,
        "push_requests": push,
        "pop_requests": 0,
        "ack_requests": 0,
        "requests": push,
    }
    values.update(kw)
    return SampleRow(**values)


def test_read_self_measures_this_process():
    """A reading names this process, its CPU seconds, memory, threads and the requests its tally counted."""
    metrics.tally.started("push")
    metrics.tally.finished("push", 201, 0.001)
    mine = process.read_self(now=T0)
    assert mine.pid == os.getpid()
    assert mine.cpu_user_seconds > 0
    assert mine.rss_bytes is not None
    assert mine.rss_bytes > 10 * 2**20
    assert mine.virtual_bytes is not None
    assert mine.virtual_bytes >= mine.rss_bytes
    assert mine.threads >= 1
    assert mine.push_requests >= 1
    assert mine.requests >= mine.push_requests


def test_a_step_of_the_serve_sampler_stores_this_process_reading():
    """The loop step ``serve`` runs stores one row: this process's reading of
    itself, at the clock's now."""
    from queenadmin.server.loops import process_sample_once

    with time_machine.travel(T0, tick=False):
        assert process_sample_once() == 0
    (stored,) = ProcessSample.objects.all()
    assert (stored.pid, stored.at) == (os.getpid(), T0)


def test_served_survives_a_flush():
    """The tally's flush hands its deltas to prometheus_client; the
    process's own totals keep counting."""
    before = metrics.tally.served().get("ack", 0)
    metrics.tally.started("ack")
    metrics.tally.finished("ack", 200, 0.001)
    metrics.tally.flush()
    assert metrics.tally.served()["ack"] == before + 1


@override_settings(QUEENADMIN_SAMPLES_FINE_RETENTION_SECONDS=3600)
def test_rows_older_than_the_retention_go():
    """Each sample prunes rows older than SAMPLES_FINE_RETENTION_SECONDS; an hour old exactly stays."""
    from queenadmin.conf import settings

    assert settings.SAMPLES_FINE_RETENTION_SECONDS == 3600
    for minutes in (-90, -30):
        # An hour old exactly is kept: T0-90 min stays at T0-30 min.
        at = T0 + timedelta(minutes=minutes)
        assert procmetrics.procmetrics_record(now=at, row=row(at)) == 0
    assert ProcessSample.objects.count() == 2
    assert procmetrics.procmetrics_record(now=T0, row=row(T0)) == 1
    assert sorted(ProcessSample.objects.values_list("at", flat=True)) == [T0 - timedelta(minutes=30), T0]
    later = T0 + timedelta(minutes=31)
    assert procmetrics.procmetrics_record(now=later, row=row(later)) == 1
    assert sorted(ProcessSample.objects.values_list("at", flat=True)) == [T0, later]


@override_settings(QUEENADMIN_SAMPLER_INTERVAL_SECONDS=10)
def test_cpu_is_percent_of_a_core_times_100_from_consecutive_rows():
    """CPU per bucket is Queen's percent-of-a-core x 100 from each row and the one before it; requests are the counters' growth."""
    # Before the range (the base of the first delta), then 3 rows in it.
    rows = [
        row(T0 - timedelta(seconds=10), user=1.0, system=0.2, push=5),
        row(T0, user=2.0, system=0.2, push=15),  # 1 s of 10: 10% -> 1000
        row(T0 + timedelta(seconds=10), user=2.5, system=0.7, push=16),  # 5% -> 500; system 5% -> 500
        row(T0 + timedelta(seconds=60), user=2.5, system=0.7, push=20, rss_bytes=70_000_000),  # next minute
    ]
    for r in rows:
        procmetrics.procmetrics_record(now=T0, row=r)
    (replica,) = procmetrics.procmetrics_replicas(
        since=T0, until=T0 + timedelta(minutes=5), bucket=timedelta(minutes=1)
    )
    assert (replica.host, replica.port, replica.pid) == ("h1", 6632, 100)
    first, second = replica.points
    assert (first.at, first.samples, second.at, second.samples) == (T0, 2, T0 + timedelta(minutes=1), 1)
    assert first.cpu_user == procmetrics.Stat(avg=750.0, min=500.0, max=1000.0, last=500.0)
    assert first.cpu_system == procmetrics.Stat(avg=250.0, min=0.0, max=500.0, last=500.0)
    assert (first.cpu_user_seconds, first.cpu_system_seconds) == (2.5, 0.7)
    assert first.requests == 11
    # 50 s without CPU: 0 %, not a gap.
    assert second.cpu_user == procmetrics.Stat(avg=0.0, min=0.0, max=0.0, last=0.0)
    assert second.rss_bytes == procmetrics.Stat(avg=70e6, min=70e6, max=70e6, last=70e6)
    assert second.requests == 4
    buckets = procmetrics.procmetrics_requests(since=T0, until=T0 + timedelta(minutes=5), bucket=timedelta(minutes=1))
    assert buckets == {
        T0: procmetrics.RequestCounts(push=11, pop=0, ack=0),
        T0 + timedelta(minutes=1): procmetrics.RequestCounts(push=4, pop=0, ack=0),
    }
    # Out of the range: nothing.
    assert (
        procmetrics.procmetrics_replicas(
            since=T0 + timedelta(hours=1), until=T0 + timedelta(hours=2), bucket=timedelta(minutes=1)
        )
        == []
    )


@override_settings(QUEENADMIN_SAMPLER_INTERVAL_SECONDS=10)
def test_a_new_process_counts_from_zero_and_processes_are_apart():
    """A process's first row (or a pid reused) counts its requests since it began; two processes are two replicas."""
    procmetrics.procmetrics_record(now=T0, row=row(T0, pid=1, user=3.0, push=7))
    procmetrics.procmetrics_record(now=T0, row=row(T0 + timedelta(seconds=10), pid=1, user=3.0, push=2))  # pid reused
    procmetrics.procmetrics_record(now=T0, row=row(T0, pid=2, host="h2", push=4))
    replicas = procmetrics.procmetrics_replicas(since=T0, until=T0 + timedelta(minutes=1), bucket=timedelta(minutes=1))
    assert [(r.host, r.pid) for r in replicas] == [("h1", 1), ("h2", 2)]
    one, two = replicas
    # No earlier row: no CPU rate, and the counts since the process began.
    assert one.points[0].cpu_user == procmetrics.Stat(avg=0.0, min=0.0, max=0.0, last=0.0)
    assert one.points[0].requests == 7 + 2
    assert two.points[0].cpu_user is None
    assert procmetrics.procmetrics_requests(since=T0, until=T0 + timedelta(minutes=1), bucket=timedelta(minutes=1)) == {
        T0: procmetrics.RequestCounts(push=13, pop=0, ack=0)
    }


def test_unknown_memory_stays_unknown():
    """Without /proc, memory answers None, not 0."""
    procmetrics.procmetrics_record(now=T0, row=replace(row(T0), rss_bytes=None, virtual_bytes=None))
    (replica,) = procmetrics.procmetrics_replicas(since=T0, until=T0, bucket=timedelta(minutes=1))
    assert (replica.points[0].rss_bytes, replica.points[0].virtual_bytes) == (None, None)


@override_settings(QUEENADMIN_SAMPLER_INTERVAL_SECONDS=10)
def test_the_sampler_loop_runs_its_per_tick_step_once_a_tick_leader_or_not():
    """The sampler loop calls every_tick once per aligned tick; a failure in it is logged and the next tick runs."""
    calls: list[datetime] = []

    def sample() -> None:
        calls.append(datetime.now(UTC))
        if len(calls) == 2:
            raise RuntimeError("a failing step is logged, not raised")

    loop = SamplerLoop(every_tick=sample, owner="test")
    with time_machine.travel(T0 + timedelta(seconds=1), tick=False) as traveller:
        loop._every_tick()
        loop._every_tick()
        traveller.shift(timedelta(seconds=8))  # still the tick of T0
        loop._every_tick()
        assert len(calls) == 1
        traveller.shift(timedelta(seconds=1))
        loop._every_tick()  # raises inside: swallowed
        traveller.shift(timedelta(seconds=10))
        loop._every_tick()
    assert calls == [T0 + timedelta(seconds=1), T0 + timedelta(seconds=10), T0 + timedelta(seconds=20)]
