"""Counts for the dashboard's overview that belong to no single concept.

Reads only, a fixed number of statements whatever the data holds. A count
stops at a cap and says so (``Bounded.capped``), because an exact count
scans everything counted; past the cap, PostgreSQL gives the planner's
estimate of the table (``Bounded.estimate``). The statements are the
overview store's (``store/``); this module turns them into ``Bounded``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from queenadmin.domain.kv import LOCKS_NAMESPACE
from queenadmin.domain.overview.store import store
from queenadmin.models import DeadLetter, Timer

#: Lock permits counted at most.
LOCK_COUNT_CAP = 10_000
#: Pending timers counted at most.
TIMER_COUNT_CAP = 10_000
#: Dead letters (of every queue) counted at most.
DEAD_LETTER_COUNT_CAP = 10_000
#: Timers read for the due chart at most (in due order).
TIMER_WINDOW_CAP = 20_000


@dataclass(frozen=True)
class Bounded:
    """A count that stopped at ``cap``: ``capped`` means "at least ``value``"."""

    value: int
    capped: bool
    #: The planner's row estimate of the whole table, when capped (PostgreSQL).
    estimate: int | None = None


def _bounded(n: int, cap: int) -> Bounded:
    """``n`` rows counted up to ``cap + 1`` as a figure of at most ``cap``."""
    return Bounded(min(n, cap), n > cap)


def _bounded_table(table: str, cap: int) -> Bounded:
    """Rows of ``table`` up to ``cap``, with the planner's estimate past it (if any).

    One statement either way, so the page's query count does not change
    when the cap is passed.
    """
    n, estimate = store().table_count(table, cap)
    return Bounded(min(n, cap), n > cap, estimate if n > cap else None)


def locks_held(*, now: datetime) -> Bounded:
    """Live lock permits, up to ``LOCK_COUNT_CAP``."""
    return _bounded(store().live_keys(LOCKS_NAMESPACE, now=now, cap=LOCK_COUNT_CAP), LOCK_COUNT_CAP)


@dataclass(frozen=True)
class TimersDue:
    """Pending timers: how many, the next due, and how many fall due per bucket."""

    start: datetime
    bucket: timedelta
    #: Timers due in each bucket from ``start``.
    counts: tuple[int, ...]
    #: The window held more than ``TIMER_WINDOW_CAP`` timers: the buckets
    #: from the one the count stopped in on are lower bounds.
    capped_from: int | None
    #: Timers already due and not yet fired (up to ``TIMER_COUNT_CAP``).
    overdue: Bounded
    pending: Bounded
    next_due: datetime | None


def timers_due(*, now: datetime, bucket: timedelta = timedelta(minutes=1), buckets: int = 60) -> TimersDue:
    """Pending timers per ``bucket`` over the next ``buckets``, bounded.

    Unlike ``timers.timers_due_histogram`` (exact, and a count of every
    timer), every figure here reads a bounded stretch of the ``deliver_at``
    index: the bars read at most ``TIMER_WINDOW_CAP`` timers in due order
    (one statement, grouped in the database), the overdue and the total
    at most ``TIMER_COUNT_CAP`` each, and the next due is the index's first
    entry.
    """
    found: dict[int, int] = {}
    rows = store().timer_buckets(
        start=now, end=now + bucket * buckets, bucket_seconds=bucket.total_seconds(), cap=TIMER_WINDOW_CAP
    )
    for index, n in rows:
        at = min(max(index, 0), buckets - 1)
        found[at] = found.get(at, 0) + n
    next_due = store().next_timer_due()
    counts = [found.get(i, 0) for i in range(buckets)]
    capped_from = None
    if sum(counts) > TIMER_WINDOW_CAP:
        # The one row past the cap sits in the last bucket read: drop it.
        capped_from = max(i for i, n in enumerate(counts) if n)
        counts[capped_from] -= 1
    overdue = _bounded(store().timers_due_before(now, cap=TIMER_COUNT_CAP), TIMER_COUNT_CAP)
    pending = _bounded_table(Timer._meta.db_table, TIMER_COUNT_CAP)
    return TimersDue(now, bucket, tuple(counts), capped_from, overdue, pending, next_due)


def dead_letters_total() -> Bounded:
    """Dead letters of every queue, up to ``DEAD_LETTER_COUNT_CAP`` (the
    planner's estimate past it): one statement, whatever the number of
    queues."""
    return _bounded_table(DeadLetter._meta.db_table, DEAD_LETTER_COUNT_CAP)
