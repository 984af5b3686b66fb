"""The official queen-mq client's ``Lock`` handle against a live ``serve``.

Real time here (the server is another process), where the client's own
renew loop is under test; lifetimes are 1-2 s so the module stays quick.
An expiry alone is reached by moving the server's clock (``clock_server``).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from queen import Queen

pytestmark = pytest.mark.live


async def test_background_renew_keeps_the_lock_past_several_lifetimes(queen, unique):
    name = unique("renewed")
    lock = queen.lock(name, ttl_seconds=1)
    assert await lock.acquire()
    first = lock.token
    other = queen.lock(name, ttl_seconds=1)
    for _ in range(3):
        await asyncio.sleep(1.1)
        assert lock.held
        assert not lock.lost.is_set()
        assert await other.acquire() is False
    assert lock.token > first
    state = await queen.locks.get(name)
    assert [h["token"] for h in state["holders"]] == [lock.token]
    assert state["holders"][0]["owner"] == lock.owner
    assert await lock.release() is True
    assert await other.acquire() is True
    await other.release()


async def test_semaphore_of_three_admits_three_of_ten_and_a_waiter_gets_a_freed_slot(live_server, unique):
    name = unique("gpu")
    clients = [Queen(url=live_server.url, bearer_token=live_server.token, retry_attempts=1) for _ in range(10)]
    try:
        handles = [c.semaphore(name, 3, ttl_seconds=30) for c in clients]
        granted = await asyncio.gather(*(h.acquire() for h in handles))
        holders = [h for h, ok in zip(handles, granted, strict=True) if ok]
        waiters = [h for h, ok in zip(handles, granted, strict=True) if not ok]
        assert len(holders) == 3
        assert sorted(h.slot for h in holders) == [0, 1, 2]
        state = await clients[0].locks.get(name)
        assert sorted(h["owner"] for h in state["holders"]) == sorted(h.owner for h in holders)

        waiter = waiters[0]
        waiting = asyncio.ensure_future(waiter.acquire(wait=10))
        await asyncio.sleep(0.3)
        assert not waiting.done()
        leaving = holders[1]
        freed = leaving.slot
        assert await leaving.release() is True
        assert await asyncio.wait_for(waiting, 10) is True
        assert waiter.slot == freed
        assert all(await asyncio.gather(*(h.release() for h in (holders[0], holders[2], waiter))))
    finally:
        await asyncio.gather(*(c.close() for c in clients))


async def test_an_expired_holder_is_replaced_with_a_higher_token_and_its_renew_is_lost(
    clock_server, clock_queen, unique
):
    queen = clock_queen
    name = unique("expiry")
    stale = queen.lock(name, ttl_seconds=1, auto_renew=False)
    assert await stale.acquire()
    old_token, old_guard = stale.token, stale.guard()
    clock_server.shift(timedelta(seconds=1.2))
    fresh = queen.lock(name, ttl_seconds=30)
    assert await fresh.acquire()
    assert fresh.token > old_token
    # The raw renew with the old token answers lost, naming the new holder.
    answer = await queen.locks.renew(name, token=old_token, ttl_seconds=1)
    assert (answer["renewed"], answer["reason"]) == (False, "lost")
    assert answer["holders"] == [{"slot": 0, "owner": fresh.owner}]
    # The old guard no longer holds in a KV batch.
    stale_batch = await queen.kv.batch([old_guard, {"op": "put", "ns": name, "key": "k", "value": 1, "forever": True}])
    assert stale_batch == []
    assert (await queen.kv.get(name, "k"))["found"] is False
    fresh_batch = await queen.kv.batch(
        [fresh.guard(), {"op": "put", "ns": name, "key": "k", "value": 1, "forever": True}]
    )
    assert fresh_batch[1]["applied"] is True
    await fresh.release()


async def test_owner_resend_gets_the_same_permit_back(queen, unique):
    name = unique("resend")
    first = await queen.locks.acquire(name, ttl_seconds=30, owner="worker-1")
    again = await queen.locks.acquire(name, ttl_seconds=30, owner="worker-1")
    assert again["already"] is True
    assert again["token"] == first["token"]
    other = await queen.locks.acquire(name, ttl_seconds=30, owner="worker-2")
    assert not other
    assert other["reason"] == "held"
    assert (await queen.locks.release(name, token=first["token"]))["released"] is True


async def test_async_with_on_a_held_lock_raises(queen, unique):
    from queen.errors import LockNotHeldError

    name = unique("scoped")
    async with queen.lock(name, ttl_seconds=30) as held:
        assert held.held
        with pytest.raises(LockNotHeldError):
            async with queen.lock(name, ttl_seconds=30):
                pytest.fail("the block must not run")
    assert not (await queen.locks.get(name))["held"]
