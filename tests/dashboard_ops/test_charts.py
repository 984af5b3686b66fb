"""The queue and overview charts draw the statistics sampler's numbers.

A known workload, sampled by ``stats_refresh`` at chosen moments (time
frozen with time-machine), must come out of the page as the rates and
depths it implies: each polyline carries its values (``data-values``).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from queenadmin.domain.queues import history
from tests.dashboard_ops.conftest import ack, claim, configure, push

T0 = datetime(2026, 10, 8, 10, 0, 0, tzinfo=UTC)


def series(page: str) -> dict[str, list[list[float]]]:
    """Every polyline of ``page``: series name -> the values of each chart that has it."""
    found: dict[str, list[list[float]]] = {}
    for name, values in re.findall(r'<polyline [^>]*data-series="([^"]+)" data-values="([^"]*)"', page):
        found.setdefault(name, []).append([float(v) for v in values.split(",")])
    return found


@pytest.fixture
def sampled(db: None):
    """Queue ``a``: 10 pushed in the second tick, 2 more and 4 acked in the
    third; queue ``b``: 3 pushed in the third. Ticks of 10 s from T0."""
    with time_machine.travel(T0, tick=False) as traveller:
        configure("a")
        configure("b")
        history.stats_refresh()
        traveller.shift(10)
        push("a", 10)
        history.stats_refresh()
        traveller.shift(10)
        ack(claim("a", batch=4))
        push("a", 2)
        push("b", 3)
        history.stats_refresh()
        traveller.shift(5)
        yield traveller


def test_queue_page_charts_are_the_sampled_rates_and_depth(viewer, sampled):
    page = viewer.get("/queues/a/").content.decode()
    assert "Pushed and acked per minute, last hour" in page
    drawn = series(page)
    # 10 pushed in a 10 s tick is 60 a minute; 2 is 12; 4 acked is 24.
    assert drawn["pushed / min"] == [[0, 60, 12]]
    assert drawn["acked / min"] == [[0, 0, 24]]
    assert drawn["depth"] == [[0, 10, 8]]


def test_overview_charts_all_queues_rates_and_the_deepest_queues_depth(viewer, sampled):
    page = viewer.get("/").content.decode()
    drawn = series(page)
    # All queues summed: a's pushes plus b's 3 (18 a minute) in the third tick.
    assert drawn["pushed / min"] == [[0, 60, 30]]
    assert drawn["acked / min"] == [[0, 0, 24]]
    # One depth chart per queue, deepest first: a (8 left), then b (3).
    assert drawn["depth"] == [[0, 10, 8], [0, 0, 3]]
    assert page.index('aria-label="Depth, a"') < page.index('aria-label="Depth, b"')
    assert "Timers due per minute" in page


def test_points_older_than_the_hour_are_left_out(viewer, sampled):
    sampled.shift(timedelta(minutes=60, seconds=-10))
    page = viewer.get("/queues/a/").content.decode()
    # T0 and T0+10 s fell out of the window; the third tick is its first point.
    assert series(page)["depth"] == [[8]]


def test_no_samples_no_charts(viewer, db):
    configure("quiet")
    page = viewer.get("/queues/quiet/").content.decode()
    assert "<polyline" not in page
    assert "Pushed and acked per minute" not in page
