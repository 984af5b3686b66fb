"""The timers domain: schedule, move, cancel, fire exactly once, never early."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.db import transaction

from queenadmin.domain import locks, timers
from queenadmin.domain import queues as log_domain
from queenadmin.domain.timers.store import Store as TimerStore
from queenadmin.domain.timers.store import store as timer_store
from queenadmin.errors import LeaseExpired, PreconditionFailed, TimerHorizonExceeded
from queenadmin.models import DeadLetter, Message, Timer

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 10, 8, 10, 0, 0, tzinfo=UTC)
S = timedelta(seconds=1)


def schedule(
    key: str = "k", delay: timedelta = 10 * S, queue: str = "orders", payload=None, **kw
) -> timers.TimerOutcome:
    return timers.timer_schedule(queue=queue, timer_key=key, payload=payload or {"key": key}, delay=delay, **kw)


def messages(queue: str = "orders") -> list[Message]:
    return list(Message.objects.filter(partition__queue__name=queue).order_by("partition_id", "offset"))


def fire(at: datetime, **kw) -> timers.FireStep:
    with time_machine.travel(at, tick=False):
        return timers.timers_fire_due(**kw)


def test_schedule_peek_and_reschedule_keeps_created_at_and_resets_attempts():
    with time_machine.travel(T0, tick=False):
        first = schedule(txn="t1")
    assert (first.status, first.ok, first.txn, first.deliver_at) == ("scheduled", True, "t1", T0 + 10 * S)
    Timer.objects.filter(timer_key="k").update(attempts=3, last_error="boom")
    with time_machine.travel(T0 + 5 * S, tick=False):
        again = schedule(delay=60 * S, txn="t2", payload={"v": 2})
    assert (again.status, again.deliver_at) == ("rescheduled", T0 + 65 * S)
    assert again.message_id != first.message_id
    row = timers.timer_peek(queue="orders", timer_key="k")
    assert row is not None
    assert (row.created_at, row.updated_at, row.attempts, row.last_error) == (T0, T0 + 5 * S, 0, None)
    assert (row.txn, row.message_id, row.payload) == ("t2", again.message_id, b'{"v":2}')


def test_cancel_then_absent_echoes_the_given_txn():
    schedule(txn="t1")
    assert timers.timer_cancel(queue="orders", timer_key="k").status == "cancelled"
    gone = timers.timer_cancel(queue="orders", timer_key="k", txn="t1")
    assert (gone.status, gone.ok, gone.txn) == ("absent", False, "t1")
    assert not Timer.objects.exists()


def test_move_to_a_time_or_by_a_delta_keeps_the_payload():
    with time_machine.travel(T0, tick=False):
        schedule(delay=10 * S)
        later = timers.timer_move(queue="orders", timer_key="k", by=timedelta(minutes=15))
        assert (later.status, later.deliver_at) == ("moved", T0 + 10 * S + timedelta(minutes=15))
        sooner = timers.timer_move(queue="orders", timer_key="k", to=T0 + 2 * S)
        assert sooner.deliver_at == T0 + 2 * S
        assert timers.timer_move(queue="orders", timer_key="nope", by=S).status == "absent"
        with pytest.raises(TimerHorizonExceeded):
            timers.timer_move(queue="orders", timer_key="k", by=timedelta(days=91))
    row = timers.timer_peek(queue="orders", timer_key="k")
    assert row is not None
    assert (row.deliver_at, row.fire_at, row.payload) == (T0 + 2 * S, T0 + 2 * S, b'{"key":"k"}')


def test_a_timer_fires_once_never_early_with_its_promised_id_and_txn():
    with time_machine.travel(T0, tick=False):
        scheduled = schedule(delay=10 * S, txn="order-9:expire", payload={"orderId": 9}, partition="order-9")
    assert fire(T0 + 10 * S - timedelta(microseconds=1)).fired == 0
    assert messages() == []
    step = fire(T0 + 10 * S)
    assert (step.fired, step.duplicates, step.more) == (1, 0, False)
    (message,) = messages()
    assert (message.message_id, message.transaction_id, message.payload) == (
        scheduled.message_id,
        "order-9:expire",
        '{"orderId":9}',
    )
    assert message.partition.name == "order-9"
    assert not Timer.objects.exists()
    assert fire(T0 + 20 * S).fired == 0
    assert len(messages()) == 1


def test_a_fired_timer_is_poppable_as_json_data():
    with time_machine.travel(T0, tick=False):
        schedule(delay=-5 * S, payload=[1, "two", {"three": 3.5}])
        timers.timers_fire_due()
        claim = log_domain.queue_claim(request=log_domain.PopRequest(queue="orders"))
    (delivered,) = claim.messages
    assert delivered.payload_json == '[1,"two",{"three":3.5}]'


def test_bytes_that_are_not_json_arrive_wrapped_not_lost():
    with time_machine.travel(T0, tick=False):
        schedule(payload=b"\xff\x00raw", delay=0 * S)
        timers.timers_fire_due()
    (message,) = messages()
    assert message.payload == '{"_raw_b64":"/wByYXc="}'


def test_a_txn_already_in_the_dedup_window_completes_the_timer_without_a_second_message():
    with time_machine.travel(T0, tick=False):
        log_domain.queue_push(
            items=[log_domain.PushItem(queue="orders", partition="Default", payload_json="1", transaction_id="once")]
        )
        schedule(delay=S, txn="once")
    step = fire(T0 + S)
    assert (step.fired, step.duplicates) == (0, 1)
    assert len(messages()) == 1
    assert not Timer.objects.exists()


def test_a_step_fires_at_most_its_batch_earliest_first():
    with time_machine.travel(T0, tick=False):
        for i in range(5):
            schedule(key=f"k{i}", delay=(5 - i) * S)
    step = fire(T0 + 10 * S, limit=3)
    assert (step.fired, step.more) == (3, True)
    assert sorted(Timer.objects.values_list("timer_key", flat=True)) == ["k0", "k1"]
    assert fire(T0 + 10 * S).fired == 2


def test_a_stale_guard_or_a_passed_deadline_commits_nothing():
    with time_machine.travel(T0, tick=False):
        schedule(delay=0 * S)
        granted = locks.lock_acquire(name=timers.LOOP_LOCK, ttl=10 * S, limit=4)
        assert granted.guard is not None
        renewed = locks.lock_renew(name=timers.LOOP_LOCK, token=granted.token, slot=granted.slot, ttl=10 * S)
        assert renewed.renewed
        with pytest.raises(PreconditionFailed):
            timers.timers_fire_due(guard=granted.guard)
        with pytest.raises(LeaseExpired):
            timers.timers_fire_due(guard=renewed.guard, deadline=0.0)
        assert messages() == []
        assert Timer.objects.count() == 1
        assert timers.timers_fire_due(guard=renewed.guard).fired == 1


def test_a_step_takes_its_timers_in_one_statement_and_pushes_without_a_savepoint():
    """Claim and delete are one statement (SQLite reads the next due time
    in a second), whatever the batch size, and the push runs in the step's
    own transaction, no savepoint. The step also answers when the next
    timer is due, so the loop reads nothing more before it sleeps."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with time_machine.travel(T0, tick=False):
        timers.timer_schedule(queue="orders", timer_key="warm", payload={}, delay=0 * S)
    fire(T0)  # the queue and its partition exist from here on
    per_step = []
    for n in (1, 100):
        with time_machine.travel(T0, tick=False):
            for i in range(n):
                schedule(f"k{n}-{i}", delay=S)
            schedule(f"later{n}", delay=30 * S)
        with CaptureQueriesContext(connection) as ran:
            step = fire(T0 + S)
        assert (step.fired, step.known_next, step.next_fire_at) == (n, True, T0 + 30 * S)
        sql = [q["sql"] for q in ran.captured_queries]
        # One SAVEPOINT: the step's own transaction, nested in the test's.
        assert sum(1 for q in sql if q.upper().startswith("SAVEPOINT")) == 1, sql
        per_step.append(sum(1 for q in sql if "queenadmin_timer" in q))
    assert per_step == [1, 1] if connection.vendor == "postgresql" else per_step == [2, 2]


def store_moves_batches() -> bool:
    """Whether the timer store appends due batches itself (PostgreSQL's does)."""
    return type(timer_store()).move_due is not TimerStore.move_due


def test_a_batch_into_existing_partitions_is_appended_without_the_push_path(monkeypatch):
    """Where the store can, the statement that takes a due batch also appends
    it to the log when every partition exists: no row comes back to be
    pushed, and the messages are those the push path would write (ids,
    txns, due order)."""
    if not store_moves_batches():
        pytest.skip("this database's store leaves every batch to the push path")
    with time_machine.travel(T0, tick=False):
        schedule(key="warm", delay=0 * S)
    fire(T0)  # the push path makes the queue and its partition
    real_push = log_domain.queue_push_in_txn

    def no_push(**kw):
        raise AssertionError(f"pushed {len(kw['items'])} timers")

    monkeypatch.setattr(log_domain, "queue_push_in_txn", no_push)
    with time_machine.travel(T0, tick=False):
        scheduled = [schedule(key=f"k{i}", delay=(1 + i % 3) * S) for i in range(9)]
    step = fire(T0 + 5 * S)
    assert (step.fired, step.duplicates, step.more) == (9, 0, False)
    monkeypatch.setattr(log_domain, "queue_push_in_txn", real_push)
    fired = [(m.offset, m.message_id, m.transaction_id) for m in messages()[1:]]
    by_due = sorted(scheduled, key=lambda o: (o.deliver_at, o.timer_key))
    assert fired == [(1 + n, o.message_id, o.txn) for n, o in enumerate(by_due)]


def test_a_step_after_a_full_batch_starts_past_it_and_the_next_from_the_earliest():
    """A step given the ``resume`` of a full batch takes the timers after it;
    a timer that came due before that point waits for a step without one."""
    if not store_moves_batches():
        pytest.skip("this database's store reads the due timers from the earliest every step")
    with time_machine.travel(T0, tick=False):
        for i in range(4):
            schedule(key=f"k{i}", delay=(2 + i) * S)
    first = fire(T0 + 10 * S, limit=2)
    assert (first.fired, first.more) == (2, True)
    assert first.resume is not None
    with time_machine.travel(T0, tick=False):
        schedule(key="early", delay=S)
    assert fire(T0 + 10 * S, limit=5, after=first.resume).fired == 2
    assert list(Timer.objects.values_list("timer_key", flat=True)) == ["early"]
    assert fire(T0 + 10 * S).fired == 1


def test_fire_now_delivers_once_and_then_answers_absent():
    with time_machine.travel(T0, tick=False):
        scheduled = schedule(delay=timedelta(hours=5))
        fired = timers.timer_fire_now(queue="orders", timer_key="k")
        assert (fired.status, fired.message_id) == ("fired", scheduled.message_id)
        assert timers.timer_fire_now(queue="orders", timer_key="k").status == "absent"
        assert timers.timers_fire_due().fired == 0
    assert len(messages()) == 1


def test_a_refused_push_backs_off_then_dead_letters_after_five_attempts(monkeypatch):
    """A push the log refuses (which no valid timer can cause today, so the
    refusal is injected) backs off 1, 2, 4, 8 s, then files a dead letter
    under ``__timer__`` and removes the timer."""
    from queenadmin.errors import InvalidArgument

    real_push = log_domain.queue_push_in_txn

    def refusing_push(*, items, now):
        if any(item.queue == "poison" for item in items):
            raise InvalidArgument("refused for the test")
        return real_push(items=items, now=now)

    monkeypatch.setattr(log_domain, "queue_push_in_txn", refusing_push)
    with time_machine.travel(T0, tick=False):
        schedule(queue="poison", delay=0 * S, txn="p")
        schedule(queue="orders", delay=0 * S, txn="fine")
    at = T0
    backoffs = []
    for attempt in range(4):
        step = fire(at)
        assert (step.backed_off, step.dead_lettered) == (1, 0)
        row = Timer.objects.get(queue="poison")
        assert (row.attempts, row.deliver_at) == (attempt + 1, T0)
        backoffs.append(row.fire_at - at)
        assert fire(row.fire_at - timedelta(microseconds=1)).backed_off == 0
        at = row.fire_at
    assert backoffs == [S, 2 * S, 4 * S, 8 * S]
    assert fire(at).dead_lettered == 1
    assert not Timer.objects.filter(queue="poison").exists()
    letter = DeadLetter.objects.get()
    assert (letter.group, letter.offset, letter.transaction_id, letter.retry_count) == ("__timer__", -1, "p", 5)
    assert "refused for the test" in (letter.error or "")
    assert [m.transaction_id for m in messages()] == ["fine"]


def test_pending_pages_across_queues_by_due_time():
    with time_machine.travel(T0, tick=False):
        for i in range(5):
            schedule(key=f"a{i}", queue="qa", delay=(10 - i) * S)
            schedule(key=f"b{i}", queue="qb", delay=(10 - i) * S + timedelta(milliseconds=1))
    first = timers.timers_pending(limit=4)
    assert [r.timer_key for r in first.rows] == ["a4", "b4", "a3", "b3"]
    assert first.truncated
    rest = timers.timers_pending(after=first.next_after or "", limit=100)
    assert len(rest.rows) == 6
    assert not rest.truncated
    assert [r.timer_key for r in timers.timers_pending(queue="qb", key_prefix="b1").rows] == ["b1"]


def test_due_histogram_counts_per_bucket():
    with time_machine.travel(T0, tick=False):
        schedule(key="late", delay=-30 * S)
        schedule(key="m0", delay=30 * S)
        schedule(key="m2a", delay=timedelta(minutes=2, seconds=1))
        schedule(key="m2b", delay=timedelta(minutes=2, seconds=59))
        schedule(key="far", delay=timedelta(hours=3))
        histogram = timers.timers_due_histogram(bucket=timedelta(minutes=1), buckets=60)
    assert histogram.counts[:4] == (2, 0, 2, 0)
    assert sum(histogram.counts) == 4
    assert (histogram.total, histogram.next_due) == (5, T0 - 30 * S)


@pytest.mark.django_db(transaction=True)
def test_timers_call_in_txn_runs_inside_a_caller_transaction_and_rolls_back_with_it():
    op = timers.TimerSchedule("orders", "tx", b"1", S, "t")

    def schedule_then_fail() -> None:
        with transaction.atomic():
            timers.timers_call_in_txn([op], now=T0)
            raise RuntimeError("roll back")

    with pytest.raises(RuntimeError):
        schedule_then_fail()
    assert not Timer.objects.exists()
    with pytest.raises(AssertionError):
        timers.timers_call_in_txn([op], now=T0)


def test_loops_take_turns_on_one_grid_after_a_step_that_fired(settings):
    """Loop i of n waits for the grid points (k * n + i) * grid: together
    they step once a grid period, not n times."""
    from queenadmin.domain.timers.fire import grid_wait
    from queenadmin.domain.timers.ops import LOOP_LOCK

    assert grid_wait(100.005, 0, 1, 0.025) == pytest.approx(0.02)
    assert grid_wait(100.01, 0, 1, 0.025) == pytest.approx(0.015)
    assert grid_wait(100.01, 0, 2, 0.025) == pytest.approx(0.04)
    assert grid_wait(100.01, 1, 2, 0.025) == pytest.approx(0.015)
    assert grid_wait(100.03, 1, 2, 0.025) == pytest.approx(0.045)
    assert grid_wait(100.03, 3, 4, 0.025) == pytest.approx(0.045)

    settings.QUEENADMIN_TIMER_LOOPS = 4
    settings.QUEENADMIN_TIMER_TICK_SECONDS = 0.05
    loop = timers.TimerLoop()
    assert loop.turn_wait() <= 0.05
    assert loop._lease.hold() == "granted"
    other = locks.lock_acquire(name=LOOP_LOCK, ttl=10, owner="other", limit=4)
    loop._count_at = 0.0
    assert loop.turn_wait() <= 0.1
    assert (loop._loops, loop._turn) == (2, 0 if loop.lock.slot < other.slot else 1)
