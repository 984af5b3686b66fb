"""Ages and durations as the overview and queue pages show them."""

from __future__ import annotations

from datetime import datetime


def age_seconds(moment: datetime | None, now: datetime) -> float | None:
    return None if moment is None else max(0.0, (now - moment).total_seconds())


def short_duration(seconds: float | None) -> str:
    """``seconds`` as a short span: "42 s", "4 min", "3 h 5 min", "2 d 4 h"."""
    if seconds is None:
        return "—"
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"
