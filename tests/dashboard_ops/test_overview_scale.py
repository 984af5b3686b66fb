"""The overview at scale: the same number of queries whatever the number of
queues, messages, samples, heartbeats and thresholds, with the attention
list and the rates included; and how long it takes to render.

``QA_SCALE=full`` (tests/scale.py) seeds 1,000 queues of 1,000 messages
(1,000,000), a consumer group reading every other, ten minutes of samples, 200
heartbeats and 100 queues' thresholds, through the domain; ``ci`` a
dozen queues of 20. The render time is printed, not asserted (speed lives
in bench/): run ``QA_SCALE=full DATABASE_URL=... pytest -s`` on PostgreSQL
to read it.
"""

from __future__ import annotations

import os
import statistics
import time
from datetime import UTC, datetime

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext

from queenadmin.domain import clock, queues
from queenadmin.domain.attention import Override, attention_thresholds_set
from queenadmin.domain.audit import Who
from queenadmin.domain.queues import history
from queenadmin.plumbing.db import json_text
from tests.dashboard_ops.conftest import ack, claim, dead_letter
from tests.scale import scaled, sized
from tests.supervised import write_beat

pytestmark = [scaled, pytest.mark.django_db]

T0 = datetime(2026, 12, 6, 9, 0, 0, tzinfo=UTC)
QUEUES = sized(ci=12, full=1_000)
PER_QUEUE = sized(ci=20, full=1_000)
HEARTBEATS = sized(ci=6, full=200)
THRESHOLDS = sized(ci=3, full=100)
#: The sampler's ticks after each stage: the defaults' whole 10-minute
#: window at full size (what the attention list reads in production).
TICKS = sized(ci=7, full=61)
RENDERS = 9


def _fill(names: list[str]) -> None:
    """``PER_QUEUE`` messages in each of ``names`` (two partitions), in pushes of 1,000."""
    items = [
        queues.PushItem(name, f"p{i % 2}", json_text({"n": i, "pad": "x" * 24}), None)
        for name in names
        for i in range(PER_QUEUE)
    ]
    for start in range(0, len(items), 1_000):
        queues.queue_push(items=items[start : start + 1_000])


def _seed(first: int, last: int, traveller) -> None:
    """Queues ``first`` to ``last - 1``: filled, every other read by a group
    (which acks a quarter), every fifth with dead letters; ``TICKS`` samples
    after it, heartbeats and thresholds for some."""
    names = [f"scale-{i:04d}" for i in range(first, last)]
    _fill(names)
    for i, name in enumerate(names, start=first):
        if i % 2 == 0:
            ack(claim(name, group=f"g{i % 3}", batch=PER_QUEUE // 4))
        if i % 5 == 0:
            dead_letter(name, 2)
        if i < THRESHOLDS:
            attention_thresholds_set(queue=name, override=Override(max_lag=PER_QUEUE // 2), who=Who("otto"))
    for _ in range(TICKS):
        traveller.shift(10)
        history.stats_refresh()
    # Live consumers: their last beat is fresh when the page renders.
    for j in range(first, min(last, first + HEARTBEATS)):
        write_beat(now=clock.now(), application=f"app-{j}", queue=f"scale-{j:04d}", group=f"g{j % 3}")
    traveller.shift(5)


def _render(client) -> tuple[int, float, float]:
    """(queries, wall ms, this process's CPU ms) of one render of the overview."""
    with CaptureQueriesContext(connection) as captured:
        started, started_cpu = time.perf_counter(), time.process_time()
        page = client.get("/")
        elapsed = (time.perf_counter() - started) * 1000
        cpu = (time.process_time() - started_cpu) * 1000
    assert page.status_code == 200
    assert "Needs attention" in page.content.decode()
    return len(captured.captured_queries), elapsed, cpu


def test_the_overview_takes_the_same_queries_at_any_size(viewer):
    with time_machine.travel(T0, tick=False) as traveller:
        _seed(0, 2, traveller)
        viewer.get("/")  # warm the session and permission caches
        small, _, _ = _render(viewer)
        started = time.perf_counter()
        _seed(2, QUEUES, traveller)
        seeded_in = time.perf_counter() - started
        if connection.vendor == "postgresql":
            with connection.cursor() as cur:
                cur.execute("ANALYZE")
        viewer.get("/")
        measured = [_render(viewer) for _ in range(RENDERS)]
    assert {n for n, _, _ in measured} == {small}
    times = sorted(ms for _, ms, _ in measured)
    cpu = statistics.median(c for _, _, c in measured)
    load = os.getloadavg()[0]
    print(
        f"\noverview at {QUEUES:,} queues, {QUEUES * PER_QUEUE:,} messages ({connection.vendor}, seeded in"
        f" {seeded_in:.0f} s): {small} queries; median {statistics.median(times):.1f} ms, best {times[0]:.1f} ms,"
        f" worst {times[-1]:.1f} ms; Django CPU {cpu:.1f} ms a render; load average {load:.1f}"
    )
