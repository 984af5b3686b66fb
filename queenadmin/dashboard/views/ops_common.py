"""Small helpers of the overview, queues and search pages (ages, durations, ints).

Access is ``views/common.py``'s ``staff_page`` / ``staff_action``, as on
every other page.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime


def age_seconds(moment: datetime | None, now: datetime) -> float | None:
    return None if moment is None else max(0.0, (now - moment).total_seconds())


def int_param(params: Mapping[str, str], name: str) -> int | None:
    """A non-negative integer parameter, or None when absent or bad."""
    raw = params.get(name, "")
    return int(raw) if raw.isdigit() and len(raw) < 19 else None


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
