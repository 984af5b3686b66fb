"""Statistics over time: the sampler's counters, roll-up, pruning, and the loop."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.db import transaction

from queenadmin.domain import clock, queues
from queenadmin.domain.queues import history, sampler
from queenadmin.domain.queues.sampler import SamplerLoop
from queenadmin.domain.queues.store.base import from_unix_micros
from queenadmin.models import QueueSample
from queenadmin.plumbing.db import json_text

T0 = datetime(2026, 10, 8, 10, 0, 0, tzinfo=UTC)


def push(queue: str, n: int, partition: str = queues.DEFAULT_PARTITION):
    items = [queues.PushItem(queue, partition, json_text({"i": i}), None) for i in range(n)]
    return queues.queue_push(items=items)


def claim(queue: str, **kw: Any) -> queues.Claim:
    return queues.queue_claim(request=queues.PopRequest(queue=queue, **kw))


def ack(c: queues.Claim, status: str, messages: Any) -> list[queues.AckOutcome]:
    items = [
        queues.AckItem(i, m.transaction_id, str(m.partition_id), status, c.lease_id, None, c.group)  # type: ignore[arg-type]
        for i, m in enumerate(messages)
    ]
    return queues.queue_ack(items=items)


def configure(name: str, **options: Any) -> None:
    queues.queue_configure(request=queues.ConfigureRequest(name, options=queues.QueueOptions(tuple(options.items()))))


def point(at: datetime, *values: Any, seconds: int = 10) -> history.SamplePoint:
    return history.SamplePoint(at, *values, seconds=seconds)


def workload(queue: str) -> None:
    """Push 20, pop 24 (4 redelivered), ack 6, fail 2 (the second to the DLQ),
    dead-letter 1 more by a ``dlq`` ack."""
    push(queue, 12)
    push(queue, 8, "p2")
    first = claim(queue, partition=queues.DEFAULT_PARTITION, batch=10)
    assert len(first.messages) == 10
    assert all(o.success for o in ack(first, "completed", first.messages[:6]))
    second = claim(queue, partition="p2", batch=5)
    assert [o.dlq for o in ack(second, "failed", second.messages[:1])] == [False]
    again = claim(queue, partition="p2", batch=5)
    assert [o.dlq for o in ack(again, "failed", again.messages[:1])] == [True]
    third = claim(queue, partition="p2", batch=4)
    assert [m.offset for m in third.messages] == [1, 2, 3, 4]
    assert [o.dlq for o in ack(third, "dlq", third.messages[:1])] == [True]


@pytest.mark.django_db
def test_counters_match_a_known_workload():
    """Push 20, pop 24, ack 6, fail 2, DLQ 2: the sample says exactly that,
    with the depth of the unfinished messages and the age of the oldest
    claimable one (the message after each leased batch)."""
    with time_machine.travel(T0, tick=False) as traveller:
        configure("hist", retryLimit=1)
        assert history.stats_refresh().queues == 1
        traveller.shift(10)
        workload("hist")
        traveller.shift(15)
        assert history.stats_refresh().queues == 1

        (counters,) = queues.queue_counters()
        assert (counters.queue, counters.pushed, counters.popped, counters.acked, counters.failed, counters.dlq) == (
            "hist",
            20,
            24,
            6,
            2,
            2,
        )
        # Default: 12 - 6 acked; p2: 8 - 2 dead-lettered.
        assert counters.depth == 12
        assert counters.oldest_claimable_age == 15.0
        assert queues.queue_series(queue="hist", since=T0) == [
            point(T0, 0, 0, 0, 0, 0, 0, 0.0),
            point(T0 + timedelta(seconds=20), 20, 24, 6, 2, 2, 12, 15.0),
        ]


@pytest.mark.django_db
def test_a_refresh_within_a_tick_rewrites_it_without_counting_twice():
    """Two refreshes in one tick leave one row whose counters run from the
    previous tick to the last refresh."""
    with time_machine.travel(T0, tick=False) as traveller:
        push("twice", 3)
        history.stats_refresh()
        traveller.shift(12)
        push("twice", 2)
        history.stats_refresh()
        traveller.shift(5)
        push("twice", 4)
        claim("twice", batch=1)
        history.stats_refresh()
        assert queues.queue_series(queue="twice", since=T0) == [
            point(T0, 3, 0, 0, 0, 0, 3, 0.0),
            point(T0 + timedelta(seconds=10), 6, 1, 0, 0, 0, 9, 17.0),
        ]
        assert QueueSample.objects.filter(queue="twice").count() == 2


@pytest.mark.django_db
def test_an_old_queue_first_sampled_counts_nothing_a_new_one_counts_all():
    """A queue older than the first tick counts nothing it did before (when
    is unknown); one created after a recorded tick counts everything."""
    with time_machine.travel(T0, tick=False) as traveller:
        push("old", 5)
        traveller.shift(400)
        history.stats_refresh()
        traveller.shift(10)
        push("old", 1)
        push("new", 7)
        history.stats_refresh()
        old = queues.queue_series(queue="old", since=T0)
        assert [(p.pushed, p.depth) for p in old] == [(0, 5), (1, 6)]
        assert [(p.pushed, p.depth) for p in queues.queue_series(queue="new", since=T0)] == [(7, 7)]
        # All queues: summed per tick, the oldest age is the largest.
        assert queues.queue_series(queue=None, since=T0) == [
            point(T0 + timedelta(seconds=400), 0, 0, 0, 0, 0, 5, 400.0),
            point(T0 + timedelta(seconds=410), 8, 0, 0, 0, 0, 13, 410.0),
        ]


@pytest.mark.django_db
def test_a_young_queue_first_sampled_late_counts_everything():
    """With no tick recorded yet, a queue created within a coarse interval
    of the first sample counts everything (a late first tick loses nothing)."""
    with time_machine.travel(T0, tick=False) as traveller:
        push("young", 3)
        traveller.shift(250)
        history.stats_refresh()
        assert [p.pushed for p in queues.queue_series(queue="young", since=T0)] == [3]


@pytest.mark.django_db
def test_a_deleted_group_never_makes_a_counter_negative():
    """A counter that falls (its cursors were deleted) counts 0, not less."""
    with time_machine.travel(T0, tick=False) as traveller:
        push("fall", 4)
        c = claim("fall", batch=4, group="g")
        ack(c, "completed", c.messages)
        history.stats_refresh()
        traveller.shift(10)
        with transaction.atomic():
            queues.queue_position_in_txn(queue="fall", group="g", partition="Default", offset=None, now=T0)
        history.stats_refresh()
        last = queues.queue_series(queue="fall", since=T0)[-1]
        assert (last.popped, last.acked) == (0, 0)


@pytest.mark.django_db
def test_rollup_and_pruning_keep_the_table_bounded(settings, monkeypatch):
    """Ticks roll up into coarse rows (sums, last gauges); fine rows go once
    older than their retention and rolled up, coarse ones after theirs; the
    series reads fine rows for recent spans and coarse ones beyond."""
    settings.QUEENADMIN_SAMPLER_INTERVAL_SECONDS = 10
    monkeypatch.setattr(history, "SAMPLES_COARSE_SECONDS", 60)  # internal: a module constant
    settings.QUEENADMIN_SAMPLES_FINE_RETENTION_SECONDS = 300
    settings.QUEENADMIN_SAMPLES_COARSE_RETENTION_SECONDS = 1200
    with time_machine.travel(T0, tick=False) as traveller:
        configure("roll")
        for _ in range(180):  # 30 minutes
            push("roll", 1)
            history.stats_step()
            traveller.shift(10)
        now = T0 + timedelta(seconds=1800)
        fine = QueueSample.objects.filter(resolution=10)
        coarse = QueueSample.objects.filter(resolution=60)
        # The last step ran at now - 10 s: kept fine rows start at its
        # retention cut-off (now - 310 s) aligned down to a coarse boundary.
        assert fine.count() == 36
        assert min(fine.values_list("at", flat=True)) == now - timedelta(seconds=360)
        assert coarse.count() == 19  # 1200 s of coarse retention, 60 s not yet complete
        assert min(coarse.values_list("at", flat=True)) == now - timedelta(seconds=1200)
        for row in coarse:
            assert (row.pushed, row.depth) == (6, row.pushed_total)
        recent = queues.queue_series(queue="roll", since=now - timedelta(seconds=120))
        assert [(p.at, p.seconds, p.pushed) for p in recent] == [
            (now - timedelta(seconds=s), 10, 1) for s in range(120, 0, -10)
        ]
        # Older than the fine rows kept: coarse points up to where they start.
        older = queues.queue_series(queue="roll", since=now - timedelta(seconds=600))
        assert [(p.at, p.seconds, p.pushed) for p in older] == [
            *((now - timedelta(seconds=s), 60, 6) for s in range(600, 360, -60)),
            *((now - timedelta(seconds=s), 10, 1) for s in range(360, 0, -10)),
        ]
        assert sum(p.pushed for p in older) == 60


@pytest.mark.django_db
def test_rollup_and_prune_work_in_bounded_batches(settings, monkeypatch):
    """A backlog is worked through a bounded number of buckets and rows per
    call, and later calls finish it."""
    monkeypatch.setattr(history, "SAMPLES_COARSE_SECONDS", 60)  # internal: a module constant
    settings.QUEENADMIN_SAMPLES_FINE_RETENTION_SECONDS = 60
    with time_machine.travel(T0, tick=False) as traveller:
        configure("a")
        configure("b")
        for _ in range(60):  # 10 minutes of ticks, nothing rolled up
            with transaction.atomic():
                history.stats_sample_in_txn(now=clock.now())
            traveller.shift(10)
        now = clock.now()
        with transaction.atomic():
            assert history.stats_rollup_in_txn(now=now, max_buckets=3) == 6  # 3 buckets x 2 queues
            assert history.stats_rollup_in_txn(now=now, max_buckets=3) == 6
            assert history.stats_rollup_in_txn(now=now, max_buckets=100) == 8
            assert history.stats_rollup_in_txn(now=now, max_buckets=100) == 0
        assert QueueSample.objects.filter(resolution=60).count() == 20
        # Fine rows older than 60 s and rolled up: 2 queues x 6 ticks x 9 minutes.
        with transaction.atomic():
            assert history.stats_prune_in_txn(now=now, batch=7, max_batches=4) == 28
            assert history.stats_prune_in_txn(now=now, batch=7, max_batches=100) == 108 - 28
            assert history.stats_prune_in_txn(now=now, batch=7, max_batches=100) == 0
        assert QueueSample.objects.filter(resolution=10).count() == 12


def wait_until(condition, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {seconds} s for {what}")
        time.sleep(0.05)


@pytest.mark.django_db(transaction=True)
def test_two_loops_sample_each_tick_once_and_the_other_takes_over(settings, monkeypatch):
    """Two sampler loops, each on its own connection: one holds the lock and
    samples every tick, the other writes nothing; when the first stops, the
    second samples the following ticks. No tick is sampled twice."""
    settings.QUEENADMIN_SAMPLER_INTERVAL_SECONDS = 1
    monkeypatch.setattr(sampler, "SAMPLER_LEASE_SECONDS", 3)  # internal: a module constant
    push("loops", 1)
    written: list[tuple[str, datetime]] = []
    lock = threading.Lock()

    def run(name: str, stop: threading.Event) -> None:
        def record(tick: datetime, step: history.SampleStep) -> None:
            with lock:
                written.append((name, tick))

        SamplerLoop(on_step=record).run(stop)

    stops = {"a": threading.Event(), "b": threading.Event()}
    threads = {name: threading.Thread(target=run, args=(name, stop)) for name, stop in stops.items()}
    threads["a"].start()
    wait_until(lambda: len(written) >= 1, 30, "loop a to sample")
    threads["b"].start()
    try:
        wait_until(lambda: len(written) >= 4, 30, "four ticks")
        assert {name for name, _ in written} == {"a"}
        stops["a"].set()
        threads["a"].join(timeout=30)
        wait_until(lambda: sum(1 for name, _ in written if name == "b") >= 2, 30, "loop b to take over")
    finally:
        for stop in stops.values():
            stop.set()
        for thread in threads.values():
            thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads.values())
    ticks = [tick for _, tick in written]
    assert len(ticks) == len(set(ticks))
    names = [name for name, _ in sorted(written, key=lambda w: w[1])]
    assert names == sorted(names)  # a's ticks, then b's
    assert QueueSample.objects.filter(queue="loops", resolution=1).count() == len(ticks)


@pytest.mark.django_db
def test_a_loop_whose_lease_was_taken_over_writes_nothing():
    """A sampler whose lease expired and went to another loop finds its
    guard stale at the next step: it writes nothing and marks the lease lost."""
    with time_machine.travel(T0, tick=False) as traveller:
        push("fenced", 2)
        first, second = SamplerLoop(owner="first"), SamplerLoop(owner="second")
        assert first.step() is not None
        assert second.step() is None  # The permit is taken.
        traveller.shift(40)  # Past the 30 s lease.
        assert second.step() is not None
        traveller.shift(10)
        push("fenced", 1)
        # By its own (monotonic) clock the first still holds the lease.
        assert first.lock.held
        assert first.step() is None
        assert first.lock.lost.is_set()
        ticks = sorted(QueueSample.objects.filter(queue="fenced").values_list("at", flat=True))
        assert ticks == [T0, T0 + timedelta(seconds=40)]
        assert second.step() is not None
        assert QueueSample.objects.get(queue="fenced", at=T0 + timedelta(seconds=50)).pushed == 1


@pytest.mark.django_db
def test_depth_and_age_start_at_the_log_start_after_retention() -> None:
    """Retention deleted offsets 1..3 that nobody consumed: the sample's depth
    counts only what is stored, and its oldest claimable age is offset 4's."""
    with time_machine.travel(T0, tick=False) as traveller:
        configure("kept", retentionSeconds=10)
        push("kept", 3)
        traveller.shift(timedelta(seconds=8))
        push("kept", 2)
        traveller.shift(timedelta(seconds=5))
        assert queues.queue_retention_sweep().deleted == 3
        (kept,) = [c for c in history.queue_counters() if c.queue == "kept"]
    assert (kept.pushed, kept.depth) == (5, 2)
    assert kept.oldest_claimable_age == 5


@pytest.mark.django_db
def test_the_sums_per_tick_are_every_queues_series_through_rollup_and_pruning(settings, monkeypatch):
    """``total_series`` (one row a tick) draws what ``queue_series(queue=None)``
    sums over every queue's rows, fine and rolled up, and is pruned with them."""
    from queenadmin.models import QueueSampleTotal

    settings.QUEENADMIN_SAMPLER_INTERVAL_SECONDS = 10
    monkeypatch.setattr(history, "SAMPLES_COARSE_SECONDS", 60)
    settings.QUEENADMIN_SAMPLES_FINE_RETENTION_SECONDS = 300
    settings.QUEENADMIN_SAMPLES_COARSE_RETENTION_SECONDS = 1200
    with time_machine.travel(T0, tick=False) as traveller:
        configure("sum-a")
        configure("sum-b")
        for i in range(120):  # 20 minutes
            push("sum-a", 1)
            if i % 3 == 0:
                push("sum-b", 2)
                taken = claim("sum-b", batch=1)
                ack(taken, "completed", taken.messages)
            history.stats_step()
            traveller.shift(10)
        history.stats_refresh()
        now = T0 + timedelta(seconds=1200)
        for since in (now - timedelta(seconds=120), now - timedelta(seconds=900)):
            summed = queues.queue_series(queue=None, since=since)
            assert summed
            assert history.total_series(since=since) == summed
        assert QueueSampleTotal.objects.count() == QueueSample.objects.values("resolution", "at").distinct().count()
        # The overview's small charts read the same depth points, their
        # times in microseconds.
        since = now - timedelta(seconds=900)
        depths = history.queues_depth_series(queues=["sum-a", "sum-b", "none"], since=since)
        assert set(depths) == {"sum-a", "sum-b"}
        for name, points in depths.items():
            expected = [(p.at, float(p.depth)) for p in queues.queue_series(queue=name, since=since)]
            assert [(from_unix_micros(t), depth) for t, depth in points] == expected
