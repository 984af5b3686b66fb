"""The timer store's contract, held by the store of the database the run uses.

The same cases run against SQLite's store by default and PostgreSQL's when
``DATABASE_URL`` is set (CI runs both). They assert what each method
answers and leaves behind, never its SQL, so a third store (or a rewrite of
one) passes or fails the same cases.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection, transaction

from queenadmin.domain import queues as log
from queenadmin.domain.timers.store import Due, Held, NewRow, Store, store
from queenadmin.models import Message, Partition, Timer

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 10, 8, 10, 0, 0, tzinfo=UTC)
S = timedelta(seconds=1)
#: A byte budget no case reaches.
BIG = 1 << 30


@pytest.fixture
def timer_store() -> Store:
    return store()


@pytest.fixture
def new_row():
    def make(
        key: str = "k",
        *,
        queue: str = "q",
        due: datetime = T0,
        txn: str | None = None,
        message_id: str | None = None,
        payload: bytes = b'{"n":1}',
        partition: str = "Default",
        encrypted: bool = False,
        producer_sub: str | None = None,
    ) -> NewRow:
        return NewRow(
            queue=queue,
            timer_key=key,
            partition=partition,
            deliver_at=due,
            txn=txn or f"txn-{key}",
            message_id=message_id or f"m-{key}",
            payload=payload,
            payload_json=payload.decode(),
            encrypted=encrypted,
            producer_sub=producer_sub,
        )

    return make


def keys(due: list[Due]) -> list[str]:
    return [d.timer_key for d in due]


# --------------------------------------------------------------------------
# upsert: schedule and replace


def test_upsert_writes_new_timers_and_finds_no_key_that_existed(timer_store, new_row):
    """New timers are written whole; no key existed before."""
    assert timer_store.upsert([new_row("a"), new_row("b", due=T0 + S, producer_sub="sub")], T0) == set()
    held = timer_store.claim_key("q", "b")
    assert held == Held(
        id=held.id,
        queue="q",
        timer_key="b",
        partition="Default",
        txn="txn-b",
        message_id="m-b",
        payload_json='{"n":1}',
        attempts=0,
        deliver_at=T0 + S,
        payload=b'{"n":1}',
        encrypted=False,
        producer_sub="sub",
    )
    row = Timer.objects.get(pk=held.id)
    assert (row.fire_at, row.created_at, row.updated_at, row.last_error) == (T0 + S, T0, T0, None)


def test_upsert_of_no_rows_writes_nothing(timer_store):
    """An empty upsert answers no keys and writes no row."""
    assert timer_store.upsert([], T0) == set()
    assert not Timer.objects.exists()


def test_upsert_replaces_a_pending_timer_keeping_only_its_creation(timer_store, new_row):
    """A replaced timer keeps its row and ``created_at``; everything else is
    the new timer's, and its attempts and last error start again."""
    timer_store.upsert([new_row("a")], T0)
    first = timer_store.claim_key("q", "a")
    timer_store.back_off(first.id, attempts=3, error="boom", fire_at=T0 + 9 * S, now=T0 + S)
    replacement = new_row(
        "a",
        due=T0 + 60 * S,
        txn="t2",
        message_id="m2",
        payload=b"[2]",
        partition="P",
        encrypted=True,
        producer_sub="sub",
    )
    assert timer_store.upsert([replacement, new_row("b")], T0 + 2 * S) == {("q", "a")}
    assert timer_store.claim_key("q", "a") == replace(
        first,
        partition="P",
        txn="t2",
        message_id="m2",
        payload_json="[2]",
        deliver_at=T0 + 60 * S,
        payload=b"[2]",
        encrypted=True,
        producer_sub="sub",
    )
    row = Timer.objects.get(pk=first.id)
    assert (row.fire_at, row.created_at, row.updated_at, row.last_error) == (T0 + 60 * S, T0, T0 + 2 * S, None)


def test_upsert_and_delete_keys_answer_for_hundreds_of_keys_in_one_call(timer_store, new_row):
    """Calls far larger than one statement's share of parameters answer for
    every key."""
    rows = [new_row(f"k{i:04}") for i in range(450)]
    assert timer_store.upsert(rows[:225], T0) == set()
    assert timer_store.upsert(rows, T0) == {("q", r.timer_key) for r in rows[:225]}
    wanted = [("q", r.timer_key) for r in rows] + [("q", f"missing{i}") for i in range(10)]
    assert timer_store.delete_keys(wanted) == {("q", r.timer_key): r.txn for r in rows}
    assert not Timer.objects.exists()


# --------------------------------------------------------------------------
# delete_keys: cancel


def test_delete_keys_answers_the_txn_of_each_timer_that_was_there(timer_store, new_row):
    """Only the named keys go; a key that is not pending is left out of the answer."""
    timer_store.upsert([new_row("a"), new_row("b")], T0)
    assert timer_store.delete_keys([("q", "a"), ("q", "zz"), ("other", "b")]) == {("q", "a"): "txn-a"}
    assert timer_store.claim_key("q", "a") is None
    assert timer_store.claim_key("q", "b") is not None
    assert timer_store.delete_keys([]) == {}


# --------------------------------------------------------------------------
# claim_due, claim_key: what a fire takes


def test_claim_due_answers_due_timers_earliest_first_up_to_the_limit(timer_store, new_row):
    """Due means ``fire_at <= now``; ties go by id (the order of scheduling)."""
    timer_store.upsert([new_row("c", due=T0 + 2 * S), new_row("a"), new_row("b"), new_row("late", due=T0 + 10 * S)], T0)
    due = timer_store.claim_due(T0 + 2 * S, 10, BIG)
    assert keys(due) == ["a", "b", "c"]
    first = due[0]
    assert (first.queue, first.partition, first.txn, first.message_id, first.payload_json, first.attempts) == (
        "q",
        "Default",
        "txn-a",
        "m-a",
        '{"n":1}',
        0,
    )
    assert keys(timer_store.claim_due(T0 + 2 * S, 2, BIG)) == ["a", "b"]
    assert timer_store.claim_due(T0 - S, 10, BIG) == []


def test_claim_due_stops_at_the_byte_budget_but_always_claims_one(timer_store, new_row):
    """The budget counts payload bytes; one timer larger than it still goes."""
    payload = b'"' + b"x" * 98 + b'"'  # 100 bytes
    timer_store.upsert([new_row(f"k{i}", due=T0 + i * S, payload=payload) for i in range(5)], T0)
    assert keys(timer_store.claim_due(T0 + 9 * S, 10, 250)) == ["k0", "k1"]
    assert keys(timer_store.claim_due(T0 + 9 * S, 10, 300)) == ["k0", "k1", "k2"]
    assert keys(timer_store.claim_due(T0 + 9 * S, 10, 1)) == ["k0"]


def test_claim_key_answers_one_pending_timer_or_none(timer_store, new_row):
    """Whatever its due time; other queues' timers of the same key are not it."""
    timer_store.upsert([new_row("a", due=T0 + 3600 * S), new_row("a", queue="other", txn="t-other")], T0)
    held = timer_store.claim_key("q", "a")
    assert (held.queue, held.timer_key, held.txn, held.deliver_at) == ("q", "a", "txn-a", T0 + 3600 * S)
    assert timer_store.claim_key("q", "b") is None


@pytest.mark.django_db(transaction=True)
def test_two_claimers_never_claim_the_same_timer(timer_store, new_row):
    """A timer that an open transaction claimed is not claimed by another:
    PostgreSQL's second claimer skips it, SQLite's waits for the first to
    commit and then finds it deleted. Together they claim every timer once."""
    with transaction.atomic():
        timer_store.upsert([new_row(f"k{i}") for i in range(4)], T0)
    first_claimed, second_done = threading.Event(), threading.Event()
    got: dict[str, Any] = {}

    def first() -> None:
        try:
            with transaction.atomic():
                got["first"] = [d.id for d in timer_store.claim_due(T0, 2, BIG)]
                first_claimed.set()
                # Hold the claim until the second has claimed, or for a while
                # when the second cannot start before this commits.
                second_done.wait(1.0)
                timer_store.delete_ids(got["first"])
        except BaseException as exc:
            got["error"] = exc
            first_claimed.set()
        finally:
            connection.close()

    def second() -> None:
        try:
            assert first_claimed.wait(30)
            with transaction.atomic():
                got["second"] = [d.id for d in timer_store.claim_due(T0, 10, BIG)]
                timer_store.delete_ids(got["second"])
            second_done.set()
        except BaseException as exc:
            got["error"] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert "error" not in got, got.get("error")
    assert len(got["first"]) == 2
    assert set(got["first"]).isdisjoint(got["second"])
    assert len(got["first"]) + len(got["second"]) == 4
    assert not Timer.objects.exists()


# --------------------------------------------------------------------------
# take_due: claim and delete at once, with the earliest timer left


def test_take_due_takes_due_timers_earliest_first_and_answers_the_earliest_left(timer_store, new_row):
    """What ``claim_due`` would answer, deleted; the next fire time is that
    of the earliest timer not taken (a backed-off one by its fire time)."""
    timer_store.upsert([new_row("c", due=T0 + 2 * S), new_row("a"), new_row("b"), new_row("late", due=T0 + 10 * S)], T0)
    due, upcoming = timer_store.take_due(T0 + 2 * S, 2, BIG)
    assert keys(due) == ["a", "b"]
    assert (due[0].queue, due[0].partition, due[0].txn, due[0].message_id, due[0].payload_json) == (
        "q",
        "Default",
        "txn-a",
        "m-a",
        '{"n":1}',
    )
    assert upcoming == T0 + 2 * S
    assert sorted(Timer.objects.values_list("timer_key", flat=True)) == ["c", "late"]
    due, upcoming = timer_store.take_due(T0 + 2 * S, 10, BIG)
    assert (keys(due), upcoming) == (["c"], T0 + 10 * S)
    assert timer_store.take_due(T0 + 2 * S, 10, BIG) == ([], T0 + 10 * S)
    timer_store.take_due(T0 + 10 * S, 10, BIG)
    assert timer_store.take_due(T0 + 10 * S, 10, BIG) == ([], None)


def test_take_due_stops_at_the_byte_budget_but_always_takes_one(timer_store, new_row):
    """Those past the budget stay, and the earliest of them is the next due."""
    payload = b'"' + b"x" * 98 + b'"'  # 100 bytes
    timer_store.upsert([new_row(f"k{i}", due=T0 + i * S, payload=payload) for i in range(5)], T0)
    assert keys(timer_store.take_due(T0 + 9 * S, 10, 250)[0]) == ["k0", "k1"]
    due, upcoming = timer_store.take_due(T0 + 9 * S, 10, 1)
    assert (keys(due), upcoming) == (["k2"], T0 + 3 * S)
    assert keys(timer_store.take_due(T0 + 9 * S, 10, 300)[0]) == ["k3", "k4"]


@pytest.mark.django_db(transaction=True)
def test_two_takers_never_take_the_same_timer(timer_store, new_row):
    """A timer an open transaction took is not taken by another (PostgreSQL's
    second taker skips it, SQLite's waits for the first to commit); a
    rollback puts the taken timers back."""
    with transaction.atomic():
        timer_store.upsert([new_row(f"k{i}") for i in range(4)], T0)
    first_took, second_done = threading.Event(), threading.Event()
    got: dict[str, Any] = {}

    def first() -> None:
        try:
            with transaction.atomic():
                got["first"] = [d.id for d in timer_store.take_due(T0, 2, BIG)[0]]
                first_took.set()
                second_done.wait(1.0)
        except BaseException as exc:
            got["error"] = exc
            first_took.set()
        finally:
            connection.close()

    def second() -> None:
        try:
            assert first_took.wait(30)
            with transaction.atomic():
                got["second"] = [d.id for d in timer_store.take_due(T0, 10, BIG)[0]]
            second_done.set()
        except BaseException as exc:
            got["error"] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert "error" not in got, got.get("error")
    assert len(got["first"]) == 2
    assert set(got["first"]).isdisjoint(got["second"])
    assert len(got["first"]) + len(got["second"]) == 4
    assert not Timer.objects.exists()
    with transaction.atomic():
        timer_store.upsert([new_row("r")], T0)
    taken: list[Due] = []

    def take_then_fail() -> None:
        with transaction.atomic():
            taken.extend(timer_store.take_due(T0, 10, BIG)[0])
            raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        take_then_fail()
    assert keys(taken) == ["r"]
    assert list(Timer.objects.values_list("timer_key", flat=True)) == ["r"]


# --------------------------------------------------------------------------
# move_due: take, and append to the log where the store can


def _log(queue: str) -> list[tuple[int, str, str]]:
    return list(
        Message.objects.filter(partition__queue__name=queue)
        .order_by("offset")
        .values_list("offset", "transaction_id", "message_id")
    )


def test_move_due_appends_each_timer_once_or_leaves_it_to_the_caller(timer_store, new_row):
    """Every timer taken is appended by the store or left for the caller's
    push, never both: with the caller's push of what is left, the log holds
    one message per transactionId, at the partition's next offsets in due
    order; a transactionId already in the log, or taken twice in the
    batch, adds nothing. The partition's offsets and bytes move with it."""
    log.queue_push(items=[log.PushItem(queue="q", partition="Default", payload_json="0", transaction_id="dup")])
    timer_store.upsert(
        [
            new_row("a", due=T0 - 3 * S),
            new_row("b", due=T0 - 2 * S, txn="dup"),
            new_row("c", due=T0 - S, txn="twice"),
            new_row("d", txn="twice"),
            new_row("late", due=T0 + 10 * S),
        ],
        T0,
    )
    moved = timer_store.move_due(T0, 10, BIG)
    assert (moved.taken, moved.upcoming, moved.known_next, moved.due_queues) == (4, T0 + 10 * S, True, ["q"])
    assert moved.appended == 0 or (moved.appended, moved.left, moved.queues) == (2, [], ["q"])
    pushed = log.queue_push_in_txn(items=[_item(d) for d in moved.left], now=T0)
    assert moved.appended + sum(1 for r in pushed if r.status == "queued") == 2
    assert _log("q") == [(0, "dup", _log("q")[0][2]), (1, "txn-a", "m-a"), (2, "twice", "m-c")]
    partition = Partition.objects.get(queue__name="q", name="Default")
    assert (partition.next_offset, partition.retained_bytes) == (3, 1 + 2 * len('{"n":1}'))
    assert sorted(Timer.objects.values_list("timer_key", flat=True)) == ["late"]


def test_move_due_leaves_the_timers_of_a_missing_partition_to_the_caller(timer_store, new_row):
    """A queue or partition that does not exist yet is the push path's to
    make: nothing is appended, and every timer taken is left."""
    log.queue_push(items=[log.PushItem(queue="q", partition="Default", payload_json="0")])
    timer_store.upsert([new_row("a", partition="other"), new_row("b", queue="new")], T0)
    moved = timer_store.move_due(T0, 10, BIG)
    assert (moved.taken, moved.appended, keys(moved.left), moved.queues) == (2, 0, ["a", "b"], [])
    assert len(_log("q")) == 1
    assert not Timer.objects.exists()


def _item(due: Due) -> log.PushItem:
    return log.PushItem(
        queue=due.queue,
        partition=due.partition,
        payload_json=due.payload_json,
        transaction_id=due.txn,
        message_id=due.message_id,
        producer_sub=due.producer_sub,
    )


# --------------------------------------------------------------------------
# delete_ids, back_off, next_fire_at: after a fire


def test_delete_ids_deletes_exactly_those_timers(timer_store, new_row):
    """Hundreds of ids in one call; ids of other timers are left alone."""
    timer_store.upsert([new_row(f"k{i:04}") for i in range(600)], T0)
    due = timer_store.claim_due(T0, 1000, BIG)
    timer_store.delete_ids([d.id for d in due[:550]])
    timer_store.delete_ids([])
    assert keys(timer_store.claim_due(T0, 1000, BIG)) == keys(due[550:])


def test_a_back_off_moves_the_fire_time_not_the_due_time(timer_store, new_row):
    """A failed fire records its attempts and error (cut to 2,000 characters)
    and fires again at ``fire_at``; the timer stays pending meanwhile."""
    timer_store.upsert([new_row("a", due=T0 + 5 * S), new_row("b", due=T0 + 9 * S)], T0)
    a = timer_store.claim_key("q", "a")
    timer_store.back_off(a.id, attempts=1, error="x" * 3000, fire_at=T0 + 20 * S, now=T0 + 6 * S)
    row = Timer.objects.get(pk=a.id)
    assert (row.attempts, row.last_error, row.fire_at, row.deliver_at, row.updated_at) == (
        1,
        "x" * 2000,
        T0 + 20 * S,
        T0 + 5 * S,
        T0 + 6 * S,
    )
    assert keys(timer_store.claim_due(T0 + 10 * S, 10, BIG)) == ["b"]
    assert keys(timer_store.claim_due(T0 + 20 * S, 10, BIG)) == ["b", "a"]
    assert timer_store.claim_key("q", "a").attempts == 1


def test_next_fire_at_is_the_earliest_fire_time(timer_store, new_row):
    """None when no timer is pending; a back-off counts by its new fire time."""
    assert timer_store.next_fire_at() is None
    timer_store.upsert([new_row("a", due=T0 + 5 * S), new_row("b", due=T0 + 9 * S)], T0)
    assert timer_store.next_fire_at() == T0 + 5 * S
    a = timer_store.claim_key("q", "a")
    timer_store.back_off(a.id, attempts=1, error="boom", fire_at=T0 + 20 * S, now=T0)
    assert timer_store.next_fire_at() == T0 + 9 * S


# --------------------------------------------------------------------------
# move


def test_a_move_applies_to_the_row_as_it_was_held(timer_store, new_row):
    """The new due time is also the fire time."""
    timer_store.upsert([new_row("a", due=T0 + 5 * S)], T0)
    held = timer_store.claim_key("q", "a")
    assert timer_store.move(held, deliver_at=T0 + 30 * S, now=T0 + S) is True
    row = Timer.objects.get(pk=held.id)
    assert (row.deliver_at, row.fire_at, row.updated_at, row.message_id) == (T0 + 30 * S, T0 + 30 * S, T0 + S, "m-a")
    assert timer_store.next_fire_at() == T0 + 30 * S


def test_a_move_of_a_timer_replaced_or_gone_since_it_was_held_changes_nothing(timer_store, new_row):
    """Without row locks a move may find another timer under the key, or
    none: it answers False and leaves the row as it is."""
    timer_store.upsert([new_row("a", due=T0 + 5 * S)], T0)
    held = timer_store.claim_key("q", "a")
    timer_store.upsert([new_row("a", due=T0 + 7 * S, message_id="m-new")], T0 + S)
    assert timer_store.move(held, deliver_at=T0 + 40 * S, now=T0 + 2 * S) is False
    assert timer_store.claim_key("q", "a").deliver_at == T0 + 7 * S
    timer_store.delete_keys([("q", "a")])
    assert timer_store.move(held, deliver_at=T0 + 40 * S, now=T0 + 3 * S) is False
    assert not Timer.objects.exists()


# --------------------------------------------------------------------------
# waking the loops


class _RolledBack(Exception):
    pass


def _wake_then_roll_back(timer_store: Store) -> None:
    with transaction.atomic():
        timer_store.notify_wake()
        raise _RolledBack


@pytest.mark.django_db(transaction=True)
def test_a_listener_hears_a_committed_wake_and_not_a_rolled_back_one(timer_store):
    """Where the database has a wake channel, ``listen_wake`` answers a
    listener that hears ``notify_wake`` once its transaction commits; where
    it has none, it answers None and a wake is a no-op."""
    listener = timer_store.listen_wake()
    if listener is None:
        with transaction.atomic():
            timer_store.notify_wake()
        return
    interrupt, interrupt_w = os.pipe()
    try:
        with pytest.raises(_RolledBack):
            _wake_then_roll_back(timer_store)
        assert not listener.wait(0.2, interrupt)
        with transaction.atomic():
            timer_store.notify_wake()
        assert listener.wait(10, interrupt)
        # Heard once: the next wait sleeps its time out again.
        assert not listener.wait(0.2, interrupt)
    finally:
        listener.close()
        os.close(interrupt)
        os.close(interrupt_w)


def test_a_listener_wakes_when_its_interrupt_turns_readable(timer_store):
    """A stop (``wake.wake_local``) reaches a loop asleep on its listener
    through the interrupt descriptor, long before the wait would end."""
    listener = timer_store.listen_wake()
    if listener is None:
        pytest.skip("this database has no wake channel (the loop waits on a condition variable)")
    interrupt, interrupt_w = os.pipe()
    try:
        threading.Timer(0.2, os.write, (interrupt_w, b"w")).start()
        began = time.monotonic()
        assert listener.wait(30, interrupt)
        assert time.monotonic() - began < 10
    finally:
        listener.close()
        os.close(interrupt)
        os.close(interrupt_w)
