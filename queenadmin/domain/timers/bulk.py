"""Timers at scale: what a filter selects, counted and charted, and acted on
in bulk on a person's word.

The reads answer the dashboard's list at any size in a fixed number of
statements: ``timers_summary`` counts what a ``TimerFilter`` selects (one
aggregate over an index range) and draws how it falls due in buckets sized
to the range (one grouped statement).

``timers_bulk_cancel`` and ``timers_bulk_move`` act on everything a filter
selects, in batches of ``BULK_BATCH`` timers, each batch its own short
transaction: the firing loops (and anyone else) get the table between two
batches, so 20,000 timers never hold one long lock. One audit entry
stands for the whole action: the first batch that acts writes it and each
later one brings its ``after`` up to date in the batch's own transaction,
so the entry always tells what committed. A timer that fired (or was
cancelled or moved out of the filter) before its batch reached it is
simply not there: it is reported as missing from the count the operator
confirmed, not an error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from django.db import transaction

from queenadmin.conf import settings
from queenadmin.domain import clock, events
from queenadmin.domain.audit import Who
from queenadmin.domain.timers import wake
from queenadmin.domain.timers.ops import TimerFilter, check_filter
from queenadmin.domain.timers.store import store
from queenadmin.errors import TimerHorizonExceeded, TimersBadRequest
from queenadmin.models import AuditEntry

#: Timers per batch: each batch is one transaction holding at most this
#: many rows.
BULK_BATCH = 500
#: At most this many bars in a due chart.
MAX_BUCKETS = 60
#: Bucket sizes a chart may use, in seconds, smallest first.
_BUCKET_SECONDS = (
    1,
    2,
    5,
    10,
    15,
    30,
    60,
    120,
    300,
    600,
    900,
    1800,
    3600,
    7200,
    10800,
    21600,
    43200,
    86400,
    2 * 86400,
    7 * 86400,
    30 * 86400,
)

BulkVerb = Literal["cancel", "move"]


@dataclass(frozen=True, slots=True)
class DueChart:
    """Timers due per ``bucket`` from ``start`` (a multiple of the bucket
    since the epoch, UTC)."""

    start: datetime
    bucket: timedelta
    counts: tuple[int, ...]

    @property
    def end(self) -> datetime:
        return self.start + self.bucket * len(self.counts)


@dataclass(frozen=True, slots=True)
class TimerSummary:
    """What a filter selects, as of one read."""

    selection: TimerFilter
    total: int
    first_due: datetime | None
    last_due: datetime | None
    #: The highest id selected: a bulk action confirmed on this summary
    #: leaves timers scheduled after it alone.
    last_id: int
    #: How many sort at or before the cursor asked about (0 without one).
    before: int
    chart: DueChart | None


def buckets_for(low: datetime, high: datetime, *, max_buckets: int = MAX_BUCKETS) -> tuple[datetime, timedelta, int]:
    """``(start, bucket, count)``: the smallest bucket of ``_BUCKET_SECONDS``
    (whole days past the largest) whose buckets, from a multiple of it at or
    before ``low``, reach ``high`` in at most ``max_buckets``."""
    sizes = [*_BUCKET_SECONDS]
    sizes.append(86400 * math.ceil((high - low).total_seconds() / (max_buckets - 1) / 86400))
    for size in sizes:
        bucket = timedelta(seconds=size)
        epoch = math.floor(low.timestamp())
        start = datetime.fromtimestamp(epoch - epoch % size, tz=UTC)
        count = max(1, math.ceil((high - start) / bucket))
        if count <= max_buckets:
            return start, bucket, count
    raise AssertionError("the last size always fits")  # pragma: no cover


def timers_summary(
    *,
    selection: TimerFilter,
    cursor: tuple[datetime, int] | None = None,
    with_last_id: bool = False,
    max_buckets: int = MAX_BUCKETS,
) -> TimerSummary:
    """Count what ``selection`` selects and chart when it falls due.

    The chart spans the filter's due range, or where one side is open the
    first or last due time selected, in at most ``max_buckets`` buckets of
    a size that suits the span (a second to days); the total is the sum of
    its bars (exact: every timer selected is in one). ``cursor`` (a list
    position, ``(deliver_at, id)``) gets ``before``: how many sort at or
    before it; ``with_last_id`` the highest id selected (for a bulk
    action's confirmation). Two statements, the second one only when
    something is selected; each reads index ranges, no sort. Takes no
    lock. Raises ``TimersBadRequest`` for a filter that makes no sense
    (``check_filter``).
    """
    check_filter(selection)
    the_store = store()
    ends = the_store.endpoints(selection, with_last_id=with_last_id)
    if ends.first_due is None or ends.last_due is None:
        return TimerSummary(selection, 0, None, None, ends.last_id, 0, None)
    low = selection.due_from or ends.first_due
    high = selection.due_to or (ends.last_due + timedelta(microseconds=1))
    start, bucket, count = buckets_for(low, high, max_buckets=max_buckets)
    if selection.queue or selection.key_prefix:
        # One grouped pass over what the queue's or the prefix's index
        # selects: per-bucket range counts would read that index once per
        # bucket (20,000 timers in 10 queues on SQLite: 71 ms for one queue).
        counts, before = the_store.grouped_counts(selection, start=start, bucket=bucket, count=count, cursor=cursor)
    else:
        bounds = [start + bucket * i for i in range(count + 1)]
        counts, before = the_store.range_counts(selection, bounds, cursor)
    chart = DueChart(start, bucket, tuple(counts))
    return TimerSummary(selection, sum(counts), ends.first_due, ends.last_due, ends.last_id, before, chart)


# --------------------------------------------------------------------------
# Bulk actions


@dataclass(frozen=True, slots=True)
class BulkOutcome:
    """What a bulk cancel or move did.

    ``done`` timers were cancelled (moved by ``by``); ``past_horizon`` were
    left alone because the move would take them past the scheduling
    horizon. Of the ``expected`` the operator confirmed, ``missing`` were
    no longer selected when their batch came: they fired, or were
    cancelled, moved or rescheduled out of the filter meanwhile.
    """

    verb: BulkVerb
    selection: TimerFilter
    expected: int
    done: int
    past_horizon: int = 0
    by: timedelta | None = None
    batches: int = 0
    #: The action's audit entry; None when nothing was done.
    audit_id: int | None = None

    @property
    def missing(self) -> int:
        return max(0, self.expected - self.done - self.past_horizon)


def shift_text(by: timedelta) -> str:
    """``+1d2h``, ``-15m``: a shift as people type it."""
    seconds = int(by.total_seconds())
    sign = "-" if seconds < 0 else "+"
    seconds = abs(seconds)
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return sign + ("".join(parts) or "0s")


class _Run:
    """One bulk action's state across its batches."""

    def __init__(self, verb: BulkVerb, selection: TimerFilter, who: Who, expected: int, by: timedelta | None) -> None:
        self.verb, self.selection, self.who, self.expected, self.by = verb, selection, who, expected, by
        self.done = self.past_horizon = self.batches = 0
        self.after_id = 0
        self.audit_id: int | None = None

    def after_text(self) -> str:
        what = "cancelled" if self.verb == "cancel" else f"moved by {shift_text(self.by or timedelta())}"
        text = f"{what}: {self.done:,} (of {self.expected:,} counted at confirmation)"
        if self.past_horizon:
            text += f"; {self.past_horizon:,} left alone: past the scheduling horizon"
        return text

    def record_in_txn(self, now: datetime) -> None:
        if self.audit_id is None:
            before = f"{self.expected:,} timers matched when confirmed: {self.selection.describe()}"
            if self.by is not None:
                before += f"; move by {shift_text(self.by)}"
            entry = self.who.record_in_txn(
                now=now,
                action=f"timer.bulk_{self.verb}",
                target=self.selection.describe(),
                before=before,
                after=self.after_text(),
            )
            self.audit_id = entry.pk
        else:
            # The one entry of the action, brought up to date with what
            # this batch's transaction commits.
            AuditEntry.objects.filter(pk=self.audit_id).update(after=self.after_text())
            events.broadcast_on_commit(events.AUDIT_GROUP, {"type": "audit.changed", "kinds": ["timer"]})

    def outcome(self) -> BulkOutcome:
        return BulkOutcome(
            self.verb,
            self.selection,
            self.expected,
            self.done,
            self.past_horizon,
            self.by,
            self.batches,
            self.audit_id,
        )


@transaction.atomic(durable=True)
def _batch(run: _Run, *, upto_id: int, batch: int, now: datetime) -> bool:
    """One batch in its own transaction; False when nothing was left."""
    the_store = store()
    picked = the_store.pick(run.selection, after_id=run.after_id, upto_id=upto_id, limit=batch)
    if not picked:
        return False
    run.after_id = picked[-1].id
    run.batches += 1
    ids = [p.id for p in picked]
    if run.verb == "cancel":
        acted = the_store.delete_picked(ids)
    else:
        assert run.by is not None
        latest = now + timedelta(seconds=settings.TIMERS_HORIZON_SECONDS)
        acted = the_store.shift_picked(ids, by=run.by, latest=latest, now=now)
        run.past_horizon += len(ids) - acted
        if acted:
            wake.on_commit(min(p.deliver_at for p in picked) + run.by, now)
    if acted:
        run.done += acted
        run.record_in_txn(now)
        queues = sorted({p.queue for p in picked})
        events.broadcast_on_commit(events.TIMERS_GROUP, {"type": "timers.changed", "queues": queues[:20]})
    return True


def _bulk(
    verb: BulkVerb,
    *,
    selection: TimerFilter,
    who: Who,
    expected: int | None,
    upto_id: int | None,
    by: timedelta | None,
    batch: int,
    now: datetime | None,
) -> BulkOutcome:
    # Each batch is durable: called inside a transaction, the first one raises.
    check_filter(selection)
    now = now or clock.now()
    if expected is None or upto_id is None:
        found = timers_summary(selection=selection, with_last_id=True)
        expected = found.total if expected is None else expected
        upto_id = found.last_id if upto_id is None else upto_id
    if by is not None:
        last = store().endpoints(selection).last_due
        horizon = timedelta(seconds=settings.TIMERS_HORIZON_SECONDS)
        if last is not None and last + by - now > horizon:
            raise TimerHorizonExceeded(f"the move takes timers past the {int(horizon.total_seconds())} s horizon")
    run = _Run(verb, selection, who, expected, by)
    while _batch(run, upto_id=upto_id, batch=max(1, batch), now=now):
        pass
    return run.outcome()


def timers_bulk_cancel(
    *,
    selection: TimerFilter,
    who: Who,
    expected: int | None = None,
    upto_id: int | None = None,
    batch: int = BULK_BATCH,
    now: datetime | None = None,
) -> BulkOutcome:
    """Cancel every pending timer ``selection`` selects, in batches.

    ``expected`` and ``upto_id`` are what the operator confirmed (the
    ``total`` and ``last_id`` of a ``timers_summary``): timers with a
    higher id (scheduled since) are left alone, and what no longer matches
    when its batch comes is counted as ``missing``. Without them, the
    filter is counted first. Each batch of ``batch`` timers is its own
    transaction; one audit entry by ``who`` (written with the first batch
    that cancels anything, updated by each later one) names the filter
    and the count. Raises ``TimersBadRequest`` for a filter that makes no
    sense. Must be the outermost call.
    """
    return _bulk(
        "cancel", selection=selection, who=who, expected=expected, upto_id=upto_id, by=None, batch=batch, now=now
    )


def timers_bulk_move(
    *,
    selection: TimerFilter,
    by: timedelta,
    who: Who,
    expected: int | None = None,
    upto_id: int | None = None,
    batch: int = BULK_BATCH,
    now: datetime | None = None,
) -> BulkOutcome:
    """Move every pending timer ``selection`` selects by ``by``, in batches.

    As ``timers_bulk_cancel``; the payloads and message ids are kept, a
    timer moved into the past fires on the next step, and a failed fire's
    back-off ends (its fire time moves with it). Raises
    ``TimersBadRequest`` for a zero shift and ``TimerHorizonExceeded`` when
    the latest timer selected would pass the horizon (nothing is moved);
    a timer that passes it anyway (rescheduled later meanwhile) is left
    alone and counted in ``past_horizon``. Must be the outermost call.
    """
    if not by:
        raise TimersBadRequest("a bulk move needs a shift other than zero")
    return _bulk("move", selection=selection, who=who, expected=expected, upto_id=upto_id, by=by, batch=batch, now=now)
