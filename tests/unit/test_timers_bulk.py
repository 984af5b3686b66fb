"""Timers at scale: a filter's count and due chart, and bulk cancel and move
in batches with one audit entry (issue 26 item 4)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from queenadmin.domain import timers
from queenadmin.domain.audit import Who
from queenadmin.domain.timers.bulk import buckets_for, shift_text, timers_bulk_cancel, timers_bulk_move, timers_summary
from queenadmin.domain.timers.ops import TimerFilter
from queenadmin.errors import TimerHorizonExceeded, TimersBadRequest
from queenadmin.models import AuditEntry, Message, Timer

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 10, 8, 10, 0, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)
OTTO = Who("otto", "tidy up")


@pytest.fixture
def at_t0(time_machine):
    time_machine.move_to(T0, tick=False)


def spread(count: int, *, queue: str = "mail", key: str = "t", every: timedelta = MIN, first: timedelta = MIN):
    """``count`` timers of ``queue`` due ``first``, then one every ``every``."""
    ops = [
        timers.TimerSchedule(queue, f"{key}{i:05d}", b"{}", first + every * i, f"txn-{queue}-{key}{i}")
        for i in range(count)
    ]
    for start in range(0, count, 1000):
        timers.timers_call(ops[start : start + 1000])


def test_summary_counts_what_the_filter_selects(at_t0):
    spread(30)
    spread(10, queue="sms")
    spread(5, key="other-")
    whole = timers_summary(selection=TimerFilter(), with_last_id=True)
    assert (whole.total, whole.first_due, whole.last_due) == (45, T0 + MIN, T0 + 30 * MIN)
    assert whole.last_id == Timer.objects.order_by("-id").values_list("id", flat=True).first()
    assert timers_summary(selection=TimerFilter(queue="sms")).total == 10
    assert timers_summary(selection=TimerFilter(key_prefix="other-")).total == 5
    assert timers_summary(selection=TimerFilter(queue="mail", key_prefix="t")).total == 30
    ranged = timers_summary(selection=TimerFilter(queue="mail", due_from=T0 + 5 * MIN, due_to=T0 + 10 * MIN))
    # [from, to): minutes 5 to 9 of t, and of other- (minutes 1 to 5) the one due at 5.
    assert ranged.total == 6
    assert timers_summary(selection=TimerFilter(queue="nobody")).chart is None


def test_summary_counts_the_rows_before_a_cursor(at_t0):
    spread(20)
    page = timers.timers_pending(limit=7)
    cursor = timers.timers_cursor(page.next_after or "")
    assert timers_summary(selection=TimerFilter(), cursor=cursor).before == 7


def test_the_chart_adapts_its_buckets_to_the_range(at_t0):
    spread(120)  # one a minute for two hours
    chart = timers_summary(selection=TimerFilter()).chart
    assert chart is not None
    assert chart.bucket == timedelta(minutes=5)
    assert len(chart.counts) <= 60
    assert sum(chart.counts) == 120
    hour = timers_summary(selection=TimerFilter(due_from=T0, due_to=T0 + timedelta(hours=1))).chart
    assert hour is not None
    assert (hour.start, hour.bucket, len(hour.counts)) == (T0, MIN, 60)
    assert hour.counts[0] == 0  # nothing due in the first minute
    assert hour.counts[1:] == (1,) * 59
    week = timers_summary(selection=TimerFilter(due_from=T0, due_to=T0 + timedelta(days=7))).chart
    assert week is not None
    assert week.bucket == timedelta(hours=3)
    assert sum(week.counts) == 120


def test_bucket_sizes():
    assert buckets_for(T0, T0) == (T0, timedelta(seconds=1), 1)
    assert buckets_for(T0, T0 + timedelta(hours=1)) == (T0, MIN, 60)
    assert buckets_for(T0 + timedelta(seconds=30), T0 + timedelta(hours=1, seconds=30))[1] == 2 * MIN
    assert buckets_for(T0, T0 + timedelta(days=30))[1:] == (timedelta(days=1), 31)
    assert buckets_for(T0, T0 + timedelta(days=3650))[1] == timedelta(days=62)


def test_a_filter_that_makes_no_sense_is_refused():
    with pytest.raises(TimersBadRequest):
        timers_summary(selection=TimerFilter(due_from=T0, due_to=T0))
    with pytest.raises(TimersBadRequest):
        timers_summary(selection=TimerFilter(queue="a\x00b"))
    with pytest.raises(TimersBadRequest):
        timers.timers_pending(after="2026-10-08T10:00:00|99999999999999999999999")
    with pytest.raises(TimersBadRequest):
        timers.timers_pending(after="2026-10-08T10:00:00|5")  # no zone: not one of ours


def test_a_jump_starts_the_page_at_that_due_time(at_t0):
    spread(300)
    page = timers.timers_pending(selection=TimerFilter(queue="mail"), start=T0 + 200 * MIN, limit=5)
    assert [r.deliver_at for r in page.rows] == [T0 + m * MIN for m in range(200, 205)]
    following = timers.timers_pending(selection=TimerFilter(queue="mail"), after=page.next_after or "", limit=5)
    assert following.rows[0].deliver_at == T0 + 205 * MIN


def test_bulk_cancel_in_batches_writes_one_audit_entry(at_t0):
    spread(1234)
    spread(50, queue="sms")
    selection = TimerFilter(queue="mail", due_from=T0 + 100 * MIN)
    seen = timers_summary(selection=selection, with_last_id=True)
    assert seen.total == 1135
    outcome = timers_bulk_cancel(selection=selection, who=OTTO, expected=seen.total, upto_id=seen.last_id, batch=100)
    assert (outcome.done, outcome.missing, outcome.batches) == (1135, 0, 12)
    assert Timer.objects.filter(queue="mail").count() == 99
    assert Timer.objects.filter(queue="sms").count() == 50
    (entry,) = AuditEntry.objects.all()
    assert (entry.action, entry.kind, entry.actor, entry.reason) == ("timer.bulk_cancel", "timer", "otto", "tidy up")
    assert "1,135 timers matched" in entry.before
    assert "queue mail" in entry.before
    assert "due from 2026-10-08T11:40:00+00:00" in entry.target
    assert entry.after == "cancelled: 1,135 (of 1,135 counted at confirmation)"


def test_bulk_move_shifts_due_and_fire_time_and_keeps_the_rest(at_t0):
    spread(300)
    before = {t.timer_key: (t.deliver_at, t.message_id, t.txn) for t in Timer.objects.all()}
    outcome = timers_bulk_move(selection=TimerFilter(queue="mail"), by=timedelta(hours=2), who=OTTO, batch=64)
    assert (outcome.done, outcome.expected, outcome.missing) == (300, 300, 0)
    for t in Timer.objects.all():
        due, message_id, txn = before[t.timer_key]
        assert (t.deliver_at, t.fire_at, t.message_id, t.txn) == (
            due + timedelta(hours=2),
            t.deliver_at,
            message_id,
            txn,
        )
    (entry,) = AuditEntry.objects.all()
    assert entry.action == "timer.bulk_move"
    assert "move by +2h" in entry.before
    assert entry.after == "moved by +2h: 300 (of 300 counted at confirmation)"


def test_bulk_move_visits_each_timer_once_even_when_it_stays_selected(at_t0):
    """A timer moved within the due range is not moved again by a later batch."""
    spread(100)
    outcome = timers_bulk_move(
        selection=TimerFilter(due_from=T0, due_to=T0 + timedelta(days=1)), by=MIN, who=OTTO, batch=7
    )
    assert outcome.done == 100
    assert sorted(Timer.objects.values_list("deliver_at", flat=True)) == [T0 + (m + 2) * MIN for m in range(100)]


def test_bulk_move_past_the_horizon_is_refused_whole(at_t0, settings):
    settings.QUEENADMIN_TIMERS_HORIZON_SECONDS = 3 * 3600
    spread(10)
    with pytest.raises(TimerHorizonExceeded):
        timers_bulk_move(selection=TimerFilter(), by=timedelta(hours=3), who=OTTO)
    assert not AuditEntry.objects.exists()
    assert min(Timer.objects.values_list("deliver_at", flat=True)) == T0 + MIN
    with pytest.raises(TimersBadRequest):
        timers_bulk_move(selection=TimerFilter(), by=timedelta(0), who=OTTO)


def test_a_timer_that_fired_after_confirmation_is_reported_missing_not_an_error(at_t0):
    spread(20, first=-MIN / 2)  # the first one is already due
    seen = timers_summary(selection=TimerFilter(queue="mail"), with_last_id=True)
    step = timers.timers_fire_due()
    assert step.fired == 1
    outcome = timers_bulk_cancel(
        selection=TimerFilter(queue="mail"), who=OTTO, expected=seen.total, upto_id=seen.last_id
    )
    assert (outcome.expected, outcome.done, outcome.missing) == (20, 19, 1)
    assert Message.objects.count() == 1
    assert "19 (of 20 counted" in AuditEntry.objects.get().after


def test_timers_scheduled_after_confirmation_are_left_alone(at_t0):
    spread(10)
    seen = timers_summary(selection=TimerFilter(queue="mail"), with_last_id=True)
    spread(5, key="late-")
    outcome = timers_bulk_cancel(
        selection=TimerFilter(queue="mail"), who=OTTO, expected=seen.total, upto_id=seen.last_id
    )
    assert outcome.done == 10
    assert sorted(Timer.objects.values_list("timer_key", flat=True)) == [f"late-{i:05d}" for i in range(5)]


def test_nothing_selected_writes_no_audit_entry(at_t0):
    spread(3)
    outcome = timers_bulk_cancel(selection=TimerFilter(queue="nobody"), who=OTTO)
    assert (outcome.done, outcome.batches, outcome.audit_id) == (0, 0, None)
    assert not AuditEntry.objects.exists()


def test_bulk_actions_must_be_the_outermost_call():
    from django.db import transaction

    with transaction.atomic(), pytest.raises(RuntimeError, match="durable"):
        timers_bulk_cancel(selection=TimerFilter(), who=OTTO)


def test_shift_text():
    assert shift_text(timedelta(hours=26, minutes=5)) == "+1d2h5m"
    assert shift_text(-timedelta(minutes=15)) == "-15m"


@pytest.mark.django_db(transaction=True)
def test_a_bulk_cancel_racing_the_firing_loop_delivers_or_cancels_each_timer_once():
    """While a thread fires due timers, a bulk cancel of the same timers in
    small batches: each timer is either delivered once or cancelled, never
    both; the cancel's missing count is exactly what fired; nothing is left."""
    count = 600
    ops = [
        timers.TimerSchedule("race", f"r{i:04d}", b"{}", -timedelta(seconds=1), f"txn-race-{i}") for i in range(count)
    ]
    timers.timers_call(ops)
    seen = timers_summary(selection=TimerFilter(queue="race"), with_last_id=True)
    stop = threading.Event()
    fired: list[int] = []

    def fire() -> None:
        try:
            while not stop.is_set():
                fired.append(timers.timers_fire_due(limit=20).fired)
        finally:
            connection.close()

    thread = threading.Thread(target=fire)
    thread.start()
    try:
        outcome = timers_bulk_cancel(
            selection=TimerFilter(queue="race"), who=OTTO, expected=seen.total, upto_id=seen.last_id, batch=25
        )
    finally:
        stop.set()
        thread.join(timeout=60)
    assert not thread.is_alive()
    delivered = set(Message.objects.filter(partition__queue__name="race").values_list("transaction_id", flat=True))
    assert Message.objects.filter(partition__queue__name="race").count() == len(delivered) == sum(fired)
    assert outcome.done + len(delivered) == count
    assert outcome.missing == len(delivered)
    assert not Timer.objects.filter(queue="race").exists()
    print(f"fired {len(delivered)}, cancelled {outcome.done} in {outcome.batches} batches")


@pytest.mark.parametrize(
    "selection",
    [
        TimerFilter(),
        TimerFilter(queue="mail"),
        TimerFilter(key_prefix="t001"),
        TimerFilter(queue="mail", due_from=T0 + 7 * MIN, due_to=T0 + 95 * MIN),
    ],
)
def test_range_counts_and_grouped_counts_agree(at_t0, selection):
    """Both ways of drawing the chart count each timer in the same bucket,
    boundaries included, and the same rows before a cursor."""
    from queenadmin.domain.timers.store import store

    spread(150)
    spread(40, queue="sms", every=MIN / 2)
    start, bucket, count = T0, 5 * MIN, 40
    bounds = [start + bucket * i for i in range(count + 1)]
    cursor = (T0 + 50 * MIN, 10**9)
    ranged = store().range_counts(selection, bounds, cursor)
    grouped = store().grouped_counts(selection, start=start, bucket=bucket, count=count, cursor=cursor)
    assert ranged == grouped
    assert sum(ranged[0]) == timers_summary(selection=selection).total
