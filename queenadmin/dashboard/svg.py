"""Small charts drawn on the server as inline SVG (no JavaScript, no CDN).

Each chart takes plain numbers and returns markup that is safe to put in a
template as it is: every text is escaped here. Colours come from CSS
classes (``static/queenadmin/queues.css``), so the charts follow the page.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

#: Drawing size in SVG units; the element scales to its container's width.
WIDTH = 480
HEIGHT = 120
#: Room for the tick labels, drawn at 12 units (``queues.css``): about
#: 13 px at the chart's 8rem height, the size of the page's small text.
_PAD_LEFT = 44
_PAD_BOTTOM = 20
_PAD_TOP = 10


def _nice_max(value: float) -> float:
    """A round axis maximum at or above ``value`` (1, 2 or 5 times 10^n)."""
    if value <= 0:
        return 1.0
    step = 1.0
    while step * 10 <= value:
        step *= 10
    for factor in (1, 2, 5, 10):
        if value <= factor * step:
            return factor * step
    return 10 * step  # pragma: no cover  (the loop always returns)


def _label(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if value >= 1_000:
        return f"{value / 1_000:g}k"
    return f"{value:g}"


def _frame(title: str, top: float, body: str, left_label: str, right_label: str) -> SafeString:
    plot_h = HEIGHT - _PAD_BOTTOM - _PAD_TOP
    axis = (
        f'<line class="axis" x1="{_PAD_LEFT}" y1="{_PAD_TOP + plot_h}" x2="{WIDTH}" y2="{_PAD_TOP + plot_h}"/>'
        f'<text class="tick" x="{_PAD_LEFT - 4}" y="{_PAD_TOP + 9}" text-anchor="end">{escape(_label(top))}</text>'
        f'<text class="tick" x="{_PAD_LEFT - 4}" y="{_PAD_TOP + plot_h}" text-anchor="end">0</text>'
        f'<text class="tick" x="{_PAD_LEFT}" y="{HEIGHT - 4}">{escape(left_label)}</text>'
        f'<text class="tick" x="{WIDTH}" y="{HEIGHT - 4}" text-anchor="end">{escape(right_label)}</text>'
    )
    return mark_safe(
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}"'
        f' preserveAspectRatio="none"><title>{escape(title)}</title>{axis}{body}</svg>'
    )


def bar_chart(
    values: Sequence[float], *, title: str, left_label: str, right_label: str, bar_titles: Sequence[str] = ()
) -> SafeString:
    """Bars for ``values``, evenly spaced; ``bar_titles`` become hover text."""
    top = _nice_max(max(values, default=0))
    plot_w = WIDTH - _PAD_LEFT
    plot_h = HEIGHT - _PAD_BOTTOM - _PAD_TOP
    width = plot_w / max(1, len(values))
    bars = []
    for i, value in enumerate(values):
        if value <= 0:
            continue
        h = max(1.0, plot_h * value / top)
        x = _PAD_LEFT + i * width
        tip = f"<title>{escape(bar_titles[i])}</title>" if i < len(bar_titles) else ""
        bars.append(
            f'<rect class="bar" x="{x + 0.5:.1f}" y="{_PAD_TOP + plot_h - h:.1f}"'
            f' width="{max(1.0, width - 1):.1f}" height="{h:.1f}">{tip}</rect>'
        )
    return _frame(title, top, "".join(bars), left_label, right_label)


#: A point's time: an aware datetime, or whole microseconds since the Unix
#: epoch (what the statistics reads give: a chart of thousands of points
#: need not build a datetime for each).
Moment = datetime | int
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def _micros(t: Moment) -> int:
    return t if isinstance(t, int) else (t - _EPOCH) // _MICROSECOND


def line_chart(
    series: Sequence[tuple[str, Sequence[tuple[Moment, float]]]],
    *,
    title: str,
    since: datetime,
    until: datetime,
) -> SafeString:
    """One polyline per named series of (time, value) points over [since, until].

    Points outside the window are dropped; a series gets the CSS class
    ``line line-<n>`` (its position), and a legend names it. The polyline
    carries its name and values (``data-series``, ``data-values``) for
    tests and anyone reading the page's source.
    """
    lo, hi = _micros(since), _micros(until)
    inside = [
        (name, [(m, v) for m, v in ((_micros(t), v) for t, v in points) if lo <= m <= hi]) for name, points in series
    ]
    top = _nice_max(max((v for _, points in inside for _, v in points), default=0))
    plot_w = WIDTH - _PAD_LEFT
    plot_h = HEIGHT - _PAD_BOTTOM - _PAD_TOP
    per_micro = plot_w / max(1, hi - lo)
    body = []
    for n, (name, points) in enumerate(inside):
        coords = " ".join(
            f"{_PAD_LEFT + per_micro * (m - lo):.1f},{_PAD_TOP + plot_h * (1 - v / top):.1f}" for m, v in points
        )
        if coords:
            values = ",".join(f"{v:g}" for _, v in points)
            body.append(
                f'<polyline class="line line-{n}" points="{coords}" data-series="{escape(name)}"'
                f' data-values="{values}"><title>{escape(name)}</title></polyline>'
            )
        if len(points) == 1:
            x, y = coords.split(",")
            body.append(f'<circle class="line line-{n}" cx="{x}" cy="{y}" r="2"/>')
        body.append(
            f'<text class="legend line-{n}" x="{_PAD_LEFT + 6 + 130 * n}" y="{_PAD_TOP + 12}">{escape(name)}</text>'
        )
    return _frame(title, top, "".join(body), f"{since:%H:%M}", f"{until:%H:%M} UTC")
