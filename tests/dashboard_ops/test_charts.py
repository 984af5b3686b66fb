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
    assert "Pushed and acked per 10 s interval (as sampled), last hour" in page
    drawn = series(page)
    # Each point is the count of its 10 s tick, as sampled.
    assert drawn["pushed / 10 s"] == [[0, 10, 2]]
    assert drawn["acked / 10 s"] == [[0, 0, 4]]
    assert drawn["depth"] == [[0, 10, 8]]


def test_overview_charts_all_queues_rates_and_the_deepest_queues_depth(viewer, sampled):
    page = viewer.get("/").content.decode()
    drawn = series(page)
    # All queues summed: a's pushes plus b's 3 in the third tick.
    assert drawn["pushed / 10 s"] == [[0, 10, 5]]
    assert drawn["acked / 10 s"] == [[0, 0, 4]]
    assert "Messages per 10 s interval, last hour" in page
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
    assert "Pushed and acked per" not in page


def test_a_burst_draws_as_its_size_not_six_times_it(viewer, db):
    """3,200 messages pushed within one 10 s interval draw as 3,200, on both pages."""
    with time_machine.travel(T0, tick=False) as traveller:
        configure("burst")
        history.stats_refresh()
        traveller.shift(10)
        push("burst", 3_200)
        history.stats_refresh()
        traveller.shift(5)
        for url in ("/queues/burst/", "/"):
            drawn = series(viewer.get(url).content.decode())
            assert max(drawn["pushed / 10 s"][0]) == 3_200, url
            assert re.search(r'<text class="tick"[^>]*>5k</text>', viewer.get(url).content.decode()), url


def test_a_roll_up_draws_its_count_spread_over_sampler_intervals():
    """A 60 s roll-up of 120 pushes draws 20 per 10 s interval."""
    from queenadmin.dashboard.views.queues import series_points

    point = history.SamplePoint(T0, 120, 0, 60, 0, 0, 5, 0.0, seconds=60)
    pushed, acked, depth = series_points([point])
    assert (pushed, acked, depth) == ([(T0, 20.0)], [(T0, 10.0)], [(T0, 5.0)])


def test_axis_labels_are_readable():
    """Tick and legend text draws at 12 px or more at the chart's height."""
    from pathlib import Path

    from django.conf import settings

    from queenadmin.dashboard import svg

    css = (Path(settings.BASE_DIR) / "static/queenadmin/queues.css").read_text()
    size = float(re.search(r"svg\.chart \.tick, svg\.chart \.legend \{ font-size: ([\d.]+)px", css).group(1))
    chart_px = 8 * 16  # svg.chart { height: 8rem }
    assert size * chart_px / svg.HEIGHT >= 12
