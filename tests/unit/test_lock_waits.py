"""A lease is counted from when it is granted, not from when its call began.

An acquire or renew can wait on the permit's key: a guarded transaction of
the holder keeps it while it runs (PostgreSQL: the key's advisory lock;
SQLite: the one write lock). A call that waited longer than the lease it
asked for must not come back granted with a permit that ran out while it
waited: the CI run of 2026-12-02 saw a timer loop granted such a permit,
and the loop it was taken from took it straight back.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.db import connections, transaction

from queenadmin.domain import clock, kv, locks
from tests.conftest import one_writer_at_a_time, permit_key_waiters
from tests.threads import in_thread

pytestmark = pytest.mark.django_db(transaction=True)

T0 = datetime(2026, 10, 8, 10, 0, 0, tzinfo=UTC)
TTL = timedelta(seconds=10)


def _hold_the_key(name: str, token: int, entered: threading.Event, leave: threading.Event) -> None:
    """Run a guarded transaction on the permit until ``leave`` is set."""
    try:
        with transaction.atomic():
            kv.kv_call_in_txn([locks.guard_check(name=name, slot=0, token=token)], now=clock.now())
            entered.set()
            leave.wait(30)
    finally:
        connections.close_all()


@pytest.mark.parametrize("waited", [TTL, 2 * TTL])
def test_an_acquire_that_waited_past_its_lease_holds_a_live_permit(waited):
    """The first holder's guarded step keeps the key while its lease runs out
    and another owner's acquire waits for the key longer than the lease it
    asks for. Granted, the new permit is live for its whole lease from the
    grant: the holders list names it, and nobody else can take it."""
    with time_machine.travel(T0, tick=False) as traveller:
        first = locks.lock_acquire(name="report", ttl=TTL, owner="w-1")
        entered, leave = threading.Event(), threading.Event()
        holder = threading.Thread(target=_hold_the_key, args=("report", first.token, entered, leave))
        holder.start()
        assert entered.wait(10)
        traveller.shift(TTL)  # w-1's lease has run out; its step still runs
        waiter, got = in_thread(lambda: locks.lock_acquire(name="report", ttl=TTL, owner="w-2"))
        time.sleep(0.5)  # the acquire is waiting for the key
        assert not got
        traveller.shift(waited)
        leave.set()
        holder.join(10)
        waiter.join(10)
        (granted,) = got
        assert granted.acquired
        state = locks.lock_holders(name="report")
        assert [(h.owner, h.token) for h in state.holders] == [("w-2", granted.token)]
        assert state.holders[0].expires_at == clock.now() + TTL
        late = locks.lock_acquire(name="report", ttl=TTL, owner="w-1")
        assert (late.acquired, late.reason) == (False, "held")


def test_a_renew_that_waited_past_its_lease_leaves_a_live_permit():
    """The same wait on a renew: renewed, the permit is live for the new
    lease counted from the renew's grant."""
    with time_machine.travel(T0, tick=False) as traveller:
        first = locks.lock_acquire(name="report", ttl=TTL, owner="w-1")
        entered, leave = threading.Event(), threading.Event()
        holder = threading.Thread(target=_hold_the_key, args=("report", first.token, entered, leave))
        holder.start()
        assert entered.wait(10)
        traveller.shift(TTL / 2)
        waiter, got = in_thread(lambda: locks.lock_renew(name="report", token=first.token, ttl=TTL, owner="w-1"))
        time.sleep(0.5)
        assert not got
        traveller.shift(2 * TTL)
        leave.set()
        holder.join(10)
        waiter.join(10)
        (renewal,) = got
        if renewal.renewed:
            (held,) = locks.lock_holders(name="report").holders
            assert (held.owner, held.token) == ("w-1", renewal.token)
            assert held.expires_at == clock.now() + TTL
        else:
            # Lost is the other honest answer: the lease had run out.
            assert renewal.reason == "lost"
            assert locks.lock_holders(name="report").holders == ()


def test_a_semaphore_acquire_takes_an_unused_permit_before_an_expired_one():
    """An expired permit's holder may still be in a guarded step that keeps
    the permit's key, and a put on that key waits for the step to end. So
    an acquire takes a permit with no row first: here, every time, the one
    the expired holder never had (by chance alone: 1 in 4,096)."""
    with time_machine.travel(T0, tick=False) as traveller:
        for n in range(12):
            name = f"pool{n}"
            first = locks.lock_acquire(name=name, ttl=TTL, owner="w-1", limit=2)
            traveller.shift(TTL)
            second = locks.lock_acquire(name=name, ttl=TTL, owner="w-2", limit=2)
            assert second.acquired
            assert second.slot != first.slot
            # With both rows stored, an expired one is taken as before.
            traveller.shift(TTL)
            third = locks.lock_acquire(name=name, ttl=TTL, owner="w-3", limit=2)
            assert third.acquired


def test_the_first_acquire_queued_on_an_expired_permit_takes_it():
    """The holder's guarded step keeps the key of its expired permit; w-2's
    acquire queues for the key, then w-1's (the old holder, back for it
    after its step). When the step ends the key goes to w-2 first, and its
    grant is decided in that one statement: it is not sent to the back of
    the queue to take the expired row over in a second transaction, where
    w-1 could take it first (the timer loops' frozen-step test saw that:
    the loop that waited lost the permit to the loop it waited for).
    PostgreSQL only: there the key is an advisory lock, granted in queue
    order; SQLite's one write lock is taken by whoever polls first."""
    if one_writer_at_a_time():
        pytest.skip("on SQLite writers are not queued in order: the first to poll takes the write lock")
    with time_machine.travel(T0, tick=False) as traveller:
        # Three rounds: without the one-statement grant each is a fair coin.
        for n in range(3):
            name = f"queued{n}"
            first = locks.lock_acquire(name=name, ttl=TTL, owner="w-1")
            entered, leave = threading.Event(), threading.Event()
            holder = threading.Thread(target=_hold_the_key, args=(name, first.token, entered, leave))
            holder.start()
            assert entered.wait(10)
            traveller.shift(TTL)
            waiter, got = in_thread(lambda name=name: locks.lock_acquire(name=name, ttl=TTL, owner="w-2"))
            _wait_for(lambda name=name: permit_key_waiters(name, 0) == 1)
            back, got_back = in_thread(lambda name=name: locks.lock_acquire(name=name, ttl=TTL, owner="w-1"))
            _wait_for(lambda name=name: permit_key_waiters(name, 0) == 2)
            leave.set()
            for thread in (holder, waiter, back):
                thread.join(10)
            ((granted,), (refused,)) = got, got_back
            assert granted.acquired, granted
            assert (refused.acquired, refused.reason) == (False, "held")
            assert [h.owner for h in locks.lock_holders(name=name).holders] == ["w-2"]


def _wait_for(condition, seconds: float = 10) -> None:
    # Counted in sleeps: the clocks are the time machine's here.
    for _ in range(int(seconds / 0.02)):
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError("timed out")
