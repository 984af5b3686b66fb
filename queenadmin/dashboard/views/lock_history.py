"""A lock's life on its page (``/locks/?name=``, issue 41): its newest
events and, over the last hour, acquires a minute, waits, holds and
refused guards."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.utils.safestring import SafeString

from queenadmin.dashboard import svg
from queenadmin.domain import clock
from queenadmin.domain.locks import history
from queenadmin.domain.masking import mask_token
from queenadmin.errors import LocksBadRequest

#: Events in the table under the charts.
TABLE_EVENTS = 50
#: The charts' window, and the most events they read (one page).
WINDOW = timedelta(hours=1)
CHART_EVENTS = 1000


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def _minutes(now: datetime) -> list[datetime]:
    start = (now - WINDOW).replace(second=0, microsecond=0)
    return [start + timedelta(minutes=i) for i in range(int(WINDOW.total_seconds() // 60) + 1)]


def charts(events: list[history.LockEvent], now: datetime) -> dict[str, SafeString]:
    """The contention charts of ``events`` over the last ``WINDOW``."""
    minutes = _minutes(now)
    since = minutes[0]
    acquires = dict.fromkeys(minutes, 0.0)
    refusals = dict.fromkeys(minutes, 0.0)
    waits: dict[datetime, list[float]] = {m: [] for m in minutes}
    holds: dict[datetime, list[float]] = {m: [] for m in minutes}
    for event in events:
        if event.at < since:
            continue
        minute = event.at.replace(second=0, microsecond=0)
        if minute not in acquires:
            continue
        if event.event == "acquired":
            acquires[minute] += 1
            waits[minute].append(float(event.waited_ms or 0))
        elif event.event == "guard_refused":
            refusals[minute] += 1
        if event.held_ms is not None:
            holds[minute].append(event.held_ms / 1000)
    labels = [f"{m:%H:%M}" for m in minutes]
    wait_p50 = [(m, _percentile(v, 0.5)) for m, v in waits.items() if v]
    wait_p99 = [(m, _percentile(v, 0.99)) for m, v in waits.items() if v]
    hold_p50 = [(m, _percentile(v, 0.5)) for m, v in holds.items() if v]
    left, right = f"{since:%H:%M}", f"{now:%H:%M} UTC"
    return {
        "acquires": svg.bar_chart(
            list(acquires.values()),
            title="Acquires a minute",
            left_label=left,
            right_label=right,
            bar_titles=[f"{label}: {int(n)} acquired" for label, n in zip(labels, acquires.values(), strict=True)],
        ),
        "waits": svg.line_chart(
            [("wait p50 (ms)", wait_p50), ("wait p99 (ms)", wait_p99)], title="Waits", since=since, until=now
        ),
        "holds": svg.line_chart([("hold p50 (s)", hold_p50)], title="Holds", since=since, until=now),
        "refusals": svg.bar_chart(
            list(refusals.values()),
            title="Refused guards a minute",
            left_label=left,
            right_label=right,
            bar_titles=[f"{label}: {int(n)} refused" for label, n in zip(labels, refusals.values(), strict=True)],
        ),
    }


def life_context(name: str) -> dict[str, Any]:
    """The life panel of lock ``name`` (empty for no name or a bad one)."""
    if not name:
        return {}
    now = clock.now()
    try:
        page = history.lock_events(name=name, limit=CHART_EVENTS, now=now)
    except LocksBadRequest:
        return {}
    events = list(page.events)
    shown = [
        {
            "event": e.event.replace("_", " "),
            "at": e.at,
            "slot": e.slot,
            "token_fp": mask_token(e.token),
            "holder": e.holder,
            "waited_ms": e.waited_ms if e.event == "acquired" else None,
            "held_ms": e.held_ms,
            "margin_ms": e.margin_ms,
        }
        for e in events[:TABLE_EVENTS]
    ]
    return {"life": shown, "life_more": len(events) > TABLE_EVENTS, "life_charts": charts(events, now)}
