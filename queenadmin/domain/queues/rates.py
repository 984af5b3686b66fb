"""Rates over the last minutes: messages in and out per second, and time to drain.

Read from the statistics sampler's rows, never by counting messages: a
queue's ``QueueSample`` rows give what was pushed (in) and completed
(acked or dead-lettered: out, every group summed), each consumer group's
``GroupSample`` rows what it completed and its lag.

A queue's rate is the difference of its cumulative counters between the
sampler's newest tick and the tick a window before it, over the time
between: two rows a queue, found by index, whatever the window's length
(the overview reads every queue's). A group's is the sum of its rows'
counts in the window over the span they cover (``last - first +
interval``: a row of the tick at ``T`` counts what happened in the interval
that ends at its sampling), since a group may be younger than the window
and has no time of birth of its own; its readers show one queue, or page.
Each read is a fixed number of statements whatever the number of queues
or groups.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from queenadmin.conf import settings
from queenadmin.domain.queues.history import latest_sample_at
from queenadmin.domain.queues.store import store

#: The window rates are measured over.
RATE_WINDOW = timedelta(minutes=5)
#: Groups listed at most by one read of every group's rates.
GROUP_RATES_CAP = 1_000


def _interval() -> int:
    return max(1, int(settings.SAMPLER_INTERVAL_SECONDS))


@dataclass(frozen=True)
class QueueRate:
    """A queue's messages in and out over the window."""

    queue: str
    pushed: int
    #: Acked or dead-lettered, every consumer group summed.
    completed: int
    popped: int
    #: Seconds the sampled rows cover.
    seconds: float
    #: The newest tick measured (the rate is as of then).
    last_at: datetime

    @property
    def in_per_second(self) -> float:
        return self.pushed / self.seconds

    @property
    def out_per_second(self) -> float:
        return self.completed / self.seconds


@dataclass(frozen=True)
class GroupRate:
    """One consumer group's messages out over the window, and its lag."""

    queue: str
    group: str
    popped: int
    #: Acked or dead-lettered by the group.
    completed: int
    seconds: float
    last_at: datetime
    #: Messages the group had not finished at ``last_at``.
    lag: int
    #: The queue's pushes per second over the same window (every group
    #: reads every message): 0.0 when the queue has no sample.
    in_per_second: float = 0.0

    @property
    def out_per_second(self) -> float:
        return self.completed / self.seconds


def drain_seconds(*, lag: int, out_per_second: float) -> float | None:
    """Seconds to finish ``lag`` messages at ``out_per_second``: 0.0 with
    nothing to finish, None when nothing goes out (it never drains)."""
    if lag <= 0:
        return 0.0
    if out_per_second <= 0:
        return None
    return lag / out_per_second


def _span(first: datetime, last: datetime) -> float:
    return (last - first).total_seconds() + _interval()


def queue_rates(
    *, now: datetime, window: timedelta = RATE_WINDOW, queue: str | None = None, queues: Sequence[str] | None = None
) -> dict[str, QueueRate]:
    """Every queue's rates (or ``queue``'s, or those of ``queues``) over ``window`` before the
    sampler's newest tick, by name. Two statements: the newest tick, then
    each queue's cumulative counters at it and at the tick ``window`` before
    (its difference is what happened between). A queue younger than the
    window counts from its creation; one sampled at the newest tick only
    because the window's first was missed, and every queue when the newest
    tick is older than the window, is left out."""
    interval = _interval()
    last = latest_sample_at(upto=now)
    if last is None or now - last >= window:
        return {}
    back = int(window.total_seconds())
    first = last - timedelta(seconds=back - back % interval)
    names = [queue] if queue is not None else queues
    found = {}
    for q, created, pushed, popped, completed, f_pushed, f_popped, f_completed in store().queue_rate_ends(
        resolution=interval, last=last, first=first, queues=names
    ):
        if f_pushed is not None:
            since, base = first, (f_pushed, f_popped or 0, f_completed or 0)
        elif created is not None and created > first:
            since, base = created, (0, 0, 0)
        else:
            continue
        seconds = max(float(interval), (last - since).total_seconds())
        found[q] = QueueRate(
            q, max(0, pushed - base[0]), max(0, completed - base[2]), max(0, popped - base[1]), seconds, last
        )
    return found


def group_rates(
    *,
    now: datetime,
    window: timedelta = RATE_WINDOW,
    queue: str | None = None,
    limit: int = GROUP_RATES_CAP,
    ins: Mapping[str, QueueRate] | None = None,
) -> list[GroupRate]:
    """Each consumer group's rates and lag over ``window`` before ``now``
    (of every queue, or ``queue``), in (queue, group) order, at most
    ``limit``, with its queue's in rate. Two statements; one when ``ins``,
    the queues' rates over the same window, was read already."""
    if ins is None:
        ins = queue_rates(now=now, window=window, queue=queue)
    rows = store().group_rate_sums(since=now - window, until=now, queue=queue, limit=limit)
    return [
        GroupRate(
            q,
            g,
            popped,
            acked + dlq,
            _span(first, last),
            last,
            lag,
            ins[q].in_per_second if q in ins else 0.0,
        )
        for q, g, first, last, popped, acked, dlq, lag in rows
    ]
