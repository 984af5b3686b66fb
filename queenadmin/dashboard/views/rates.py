"""Rates as the pages show them: messages per second, time to drain.

The queue page's rates block (``queue_rates_block``, in its summary
region) and the consumers page's table read ``domain/queues/rates.py``:
the sampler's rows of the last minutes, two statements for a page.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from queenadmin.dashboard.views.durations import short_duration
from queenadmin.domain.queues import rates
from queenadmin.domain.queues.board import GroupLag
from queenadmin.models.queues import QUEUE_MODE


def per_second(value: float | None) -> str:
    """A rate as a page shows it: "120 msg/s", "3.4 msg/s", "0.25 msg/s",
    "1.2 msg/min"; "—" unknown."""
    if value is None:
        return "—"
    if value <= 0:
        return "0 msg/s"
    if value >= 100:
        return f"{value:,.0f} msg/s"
    if value >= 1:
        return f"{value:.1f} msg/s"
    if value >= 0.05:
        return f"{value:.2f} msg/s"
    return f"{value * 60:.2g} msg/min"


def drain_text(*, lag: int, out_per_second: float | None) -> str:
    """How long ``lag`` takes at ``out_per_second`` (None: not measured)."""
    if lag <= 0:
        return "drained"
    if out_per_second is None:
        return "—"
    seconds = rates.drain_seconds(lag=lag, out_per_second=out_per_second)
    return "never at this rate" if seconds is None else short_duration(seconds)


def window_text() -> str:
    return f"{rates.RATE_WINDOW.total_seconds() / 60:.0f} min"


@dataclass(frozen=True)
class GroupRateLine:
    """One consumer group's row of a rates table."""

    queue: str
    group: str
    in_rate: str
    out_rate: str
    lag: int
    drain: str
    #: The rates were measured (the sampler has the group's rows).
    measured: bool

    @property
    def is_queue_mode(self) -> bool:
        return self.group == QUEUE_MODE


@dataclass(frozen=True)
class RatesBlock:
    """The queue page's rates: in, out (every group), and per group."""

    window: str
    in_rate: str
    out_rate: str
    groups: tuple[GroupRateLine, ...]
    #: The newest sampler tick measured (None: no sample in the window).
    as_of: datetime | None


def group_line(rate: rates.GroupRate, lag: int | None = None) -> GroupRateLine:
    """``rate`` as a row; ``lag``: the live lag, if read (else the sampled one)."""
    lag = rate.lag if lag is None else lag
    return GroupRateLine(
        rate.queue,
        rate.group,
        per_second(rate.in_per_second),
        per_second(rate.out_per_second),
        lag,
        drain_text(lag=lag, out_per_second=rate.out_per_second),
        True,
    )


def queue_rates_block(*, name: str, groups: tuple[GroupLag, ...], now: datetime) -> RatesBlock:
    """The rates of queue ``name`` and of each of its ``groups`` (the queue
    page's, with their live lag). Two statements."""
    ins = rates.queue_rates(now=now, queue=name)
    measured = {r.group: r for r in rates.group_rates(now=now, queue=name, ins=ins)}
    queue_rate = ins.get(name)
    lines = []
    for g in groups:
        found = measured.get(g.name)
        if found is not None:
            lines.append(group_line(found, g.lag))
        else:
            in_rate = per_second(queue_rate.in_per_second) if queue_rate else "—"
            lines.append(
                GroupRateLine(name, g.name, in_rate, "—", g.lag, drain_text(lag=g.lag, out_per_second=None), False)
            )
    return RatesBlock(
        window_text(),
        per_second(queue_rate.in_per_second) if queue_rate else "—",
        per_second(queue_rate.out_per_second) if queue_rate else "—",
        tuple(lines),
        queue_rate.last_at if queue_rate else None,
    )
