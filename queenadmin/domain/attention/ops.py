"""When a queue needs attention: the thresholds, their limits, and the rules.

No SQL and no transactions: ``calls`` reads the facts (``QueueFacts``, from
the statistics sampler's rows) and ``operator`` writes the thresholds.

A queue needs attention, with each reason that holds, when:

- **no reader**: something is claimable and no consumer group took a
  message within the window, nor does a live supervision heartbeat name
  the queue (a group that long-polls an empty queue takes nothing, which
  is why it takes something claimable to say so);
- **stalled**: something is claimable, a group reads (it took messages
  within the window, or a heartbeat names the queue), and nothing was
  acked or dead-lettered within the window. A queue no group reads is
  "no reader", never "stalled"; a paused queue is neither;
- **lag**: its slowest group has more than ``max_lag`` messages pending;
- **age**: its oldest claimable message is older than ``max_age_seconds``;
- **rising**: its backlog grew over the window, in each half of it (the
  depth at the window's middle tick is between its first and last);
- **DLQ growing**: at least ``dlq_growth`` dead letters within the window.

"No reader", "stalled" and "rising" need the queue sampled at the
window's first tick, so a queue younger than its window (or a sampler that
just started) is not judged by them yet. A threshold of 0 turns its rule
off.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Literal

from queenadmin.errors import InvalidArgument
from queenadmin.plumbing.shapes import quick_init

Kind = Literal["no-reader", "stalled", "lag", "age", "rising", "dlq"]
#: The kinds, most urgent first (the list's order).
KINDS: tuple[Kind, ...] = ("no-reader", "stalled", "lag", "age", "rising", "dlq")


@dataclass(frozen=True)
class Thresholds:
    """The thresholds one queue is judged by."""

    #: Messages pending for the slowest group above which it needs attention (0: never).
    max_lag: int
    #: Seconds the oldest claimable message may wait (0: never).
    max_age_seconds: int
    #: Dead letters within the window that flag it (0: never).
    dlq_growth: int
    #: The window of "no reader", "stalled", "rising" and the DLQ's growth.
    window_minutes: int

    @property
    def window(self) -> timedelta:
        return timedelta(minutes=self.window_minutes)


#: The defaults of every queue, where the stored defaults (the row of queue
#: "") leave a field empty: the one place they are written down.
DEFAULTS = Thresholds(max_lag=10_000, max_age_seconds=300, dlq_growth=1, window_minutes=10)

#: Each field's allowed range, inclusive.
LIMITS: dict[str, tuple[int, int]] = {
    "max_lag": (0, 10**12),
    "max_age_seconds": (0, 30 * 86400),
    "dlq_growth": (0, 10**9),
    "window_minutes": (1, 1440),
}
FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Thresholds))


@dataclass(frozen=True)
class Override:
    """Stored thresholds: each field set, or None (take the default)."""

    max_lag: int | None = None
    max_age_seconds: int | None = None
    dlq_growth: int | None = None
    window_minutes: int | None = None

    def over(self, base: Thresholds) -> Thresholds:
        """``base`` with this override's fields that are set."""
        return Thresholds(
            *(getattr(self, name) if getattr(self, name) is not None else getattr(base, name) for name in FIELDS)
        )

    def describe(self) -> str:
        """The fields set, as an audit entry says them ("defaults" when none)."""
        said = [f"{name}={getattr(self, name)}" for name in FIELDS if getattr(self, name) is not None]
        return " ".join(said) or "defaults"


def check_override(override: Override) -> Override:
    """``override`` if each field set is in ``LIMITS``, else ``InvalidArgument``
    naming the first field that is not."""
    for name in FIELDS:
        value = getattr(override, name)
        low, high = LIMITS[name]
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high):
            raise InvalidArgument(f"{name} must be a whole number from {low:,} to {high:,}", reason=name)
    return override


@quick_init  # one a queue: the overview builds a thousand at 1,000 queues
@dataclass(frozen=True)
class QueueFacts:
    """What the sampler's rows say of one queue's window: its rows at the
    window's last tick, and at its first and middle ticks if sampled then."""

    queue: str
    namespace: str | None
    task: str | None
    #: The window's first and last ticks.
    first_at: datetime
    last_at: datetime
    #: Between them: messages taken by any group, acked or dead-lettered by
    #: any group, and dead-lettered (everything counted, for a queue younger
    #: than the window).
    popped: int
    completed: int
    dlq: int
    #: Depth (the slowest group's pending) at the first tick (None: the queue
    #: was not sampled then, so the window is not covered), at the middle
    #: tick, and at the last.
    first_depth: int | None
    mid_depth: int | None
    last_depth: int
    #: The oldest claimable message's age at the last tick, in seconds (0: none).
    last_age: float
    #: Messages ever taken, every group (the last tick's cumulative count).
    popped_ever: int
    #: An operator paused every pop of the queue: no one takes from it on
    #: purpose, so it is neither "no reader" nor "stalled".
    paused: bool = False


@dataclass(frozen=True)
class Concern:
    kind: Kind
    text: str


def _minutes(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def kinds_of(facts: QueueFacts, thresholds: Thresholds, *, heartbeat: bool) -> tuple[Kind, ...]:
    """The reasons ``facts`` needs attention under ``thresholds``, most
    urgent first; ``heartbeat``: a live supervision heartbeat names the
    queue. Comparisons only (every queue is judged on every render);
    ``concerns`` words them."""
    found: list[Kind] = []
    covered = facts.first_depth is not None
    claimable = facts.last_age > 0 and not facts.paused
    if covered and claimable and not (facts.popped > 0 or heartbeat):
        found.append("no-reader")
    elif covered and claimable and facts.completed == 0:
        found.append("stalled")
    if thresholds.max_lag and facts.last_depth > thresholds.max_lag:
        found.append("lag")
    if thresholds.max_age_seconds and facts.last_age > thresholds.max_age_seconds:
        found.append("age")
    first, middle, last = facts.first_depth, facts.mid_depth, facts.last_depth
    if first is not None and middle is not None and first <= middle <= last and last > first:
        found.append("rising")
    if thresholds.dlq_growth and facts.dlq >= thresholds.dlq_growth:
        found.append("dlq")
    return tuple(found)


def concern(kind: Kind, facts: QueueFacts, thresholds: Thresholds) -> Concern:
    """``kind`` (one of ``kinds_of``'s) as a page says it."""
    span = _minutes(thresholds.window.total_seconds())
    if kind == "no-reader":
        when = "never read" if facts.popped_ever == 0 else f"nothing taken in {span}"
        return Concern(kind, f"no reader ({when}, no live consumer heartbeat)")
    if kind == "stalled":
        return Concern(kind, f"stalled: read, but nothing acked in {span}")
    if kind == "lag":
        return Concern(kind, f"lag {facts.last_depth:,} (over {thresholds.max_lag:,})")
    if kind == "age":
        return Concern(kind, f"oldest {_minutes(facts.last_age)} (over {_minutes(thresholds.max_age_seconds)})")
    if kind == "rising":
        return Concern(kind, f"backlog rising for {span}: {facts.first_depth or 0:,} → {facts.last_depth:,}")
    return Concern(kind, f"DLQ +{facts.dlq:,} in {span}")


def concerns(facts: QueueFacts, thresholds: Thresholds, *, heartbeat: bool) -> list[Concern]:
    """``kinds_of``, each worded (``concern``)."""
    return [concern(k, facts, thresholds) for k in kinds_of(facts, thresholds, heartbeat=heartbeat)]
