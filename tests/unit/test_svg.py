"""Server-side SVG charts: shape, escaping, rates from counters."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from queenadmin.dashboard import svg

T0 = datetime(2026, 10, 8, 10, 0, 0, tzinfo=UTC)


def test_bar_chart_draws_a_bar_per_nonzero_value_with_escaped_titles():
    chart = svg.bar_chart(
        [0, 3, 10], title="<due>", left_label="now", right_label="+3 min", bar_titles=["a", "b&", "c"]
    )
    assert chart.startswith("<svg")
    assert chart.count("<rect") == 2
    assert "<title>&lt;due&gt;</title>" in chart
    assert "<title>b&amp;</title>" in chart
    assert ">10<" in chart  # the axis top is a round number at or above the max


def test_line_chart_keeps_points_in_the_window_and_names_series():
    points = [(T0 + timedelta(minutes=m), float(m)) for m in range(-5, 70, 5)]
    chart = svg.line_chart([("depth", points), ("<x>", [])], title="Depth", since=T0, until=T0 + timedelta(hours=1))
    (line,) = chart.split("<polyline")[1:]
    points_attr = line.split('points="', 1)[1].split('"', 1)[0]
    assert len(points_attr.split()) == 13  # minutes 0..60 every 5
    assert "&lt;x&gt;" in chart
    assert "10:00" in chart
    assert "11:00 UTC" in chart


def test_nice_axis_maximum():
    assert [svg._nice_max(v) for v in (0, 0.5, 1, 3, 7, 11, 4200)] == [1, 1, 1, 5, 10, 20, 5000]


def test_line_chart_draws_microsecond_times_as_the_datetimes_they_are():
    """The statistics reads give times as microseconds since the epoch: the
    chart draws them where it draws the same moments as datetimes."""
    moments = [
        T0 + timedelta(seconds=s, microseconds=us) for s, us in ((-10, 0), (0, 0), (7, 250), (1800, 1), (3600, 0))
    ]
    values = [1.0, 2.0, 3.5, 0.0, 9.0]
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    micros = [(t - epoch) // timedelta(microseconds=1) for t in moments]
    window = {"title": "Depth", "since": T0, "until": T0 + timedelta(hours=1)}
    as_datetimes = svg.line_chart([("depth", list(zip(moments, values, strict=True)))], **window)
    as_micros = svg.line_chart([("depth", list(zip(micros, values, strict=True)))], **window)
    assert as_micros == as_datetimes
    assert 'data-values="2,3.5,0,9"' in as_micros  # the point before the window is left out
