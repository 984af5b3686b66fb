"""The pop hub: one waiter woken per lane; its stop ends waiting pops at once, later ones do not wait."""

from __future__ import annotations

import asyncio

from queenadmin.domain.queues.wakeups import Hub


async def test_close_ends_every_wait_as_not_woken():
    hub = Hub()
    hub.loop = asyncio.get_running_loop()
    waits = [
        asyncio.ensure_future(hub.wait("orders", hub.generation("orders"), 30.0, lane=("g", None))),
        asyncio.ensure_future(hub.wait("orders", hub.generation("orders"), 30.0, lane=("g", None))),
        asyncio.ensure_future(hub.wait("*", hub.generation("*"), 30.0)),
    ]
    await asyncio.sleep(0)
    assert sum(len(w) for lanes in hub.lanes.values() for w in lanes.values()) == 3
    hub.close()
    assert await asyncio.wait_for(asyncio.gather(*waits), 1.0) == [False, False, False]
    assert hub.lanes == {}
    # A pop arriving after the stop does not wait at all.
    assert await asyncio.wait_for(hub.wait("orders", hub.generation("orders"), 30.0), 1.0) is False


async def test_a_wake_still_wakes_before_close():
    hub = Hub()
    hub.loop = asyncio.get_running_loop()
    waiting = asyncio.ensure_future(hub.wait("orders", hub.generation("orders"), 30.0))
    await asyncio.sleep(0)
    hub.wake(["orders"])
    assert await asyncio.wait_for(waiting, 1.0) is True


async def test_a_noted_empty_claim_holds_until_a_wake_or_its_time():
    """Pops of one shape skip their first claim only while nothing could have changed."""
    hub = Hub()
    loop = asyncio.get_running_loop()
    hub.loop = loop
    shape = (("g", None), None, None)
    other = (("h", None), None, None)
    assert hub.known_empty("orders", shape) is False
    waiting = asyncio.ensure_future(hub.wait("orders", hub.generation("orders"), 30.0, lane=("g", None)))
    hub.note_empty("orders", shape, hub.generation("orders"), loop.time() + 30)
    await asyncio.sleep(0)
    assert hub.known_empty("orders", shape) is True
    # Another consumer group, or another queue, still claims.
    assert hub.known_empty("orders", other) is False
    assert hub.known_empty("invoices", shape) is False
    # A push to the queue: the next pop claims again.
    hub.wake(["orders"])
    assert await asyncio.wait_for(waiting, 1.0) is True
    assert hub.known_empty("orders", shape) is False
    # A note taken before the wake (an older generation) is stale at once.
    hub.note_empty("orders", shape, hub.generation("orders") - 1, loop.time() + 30)
    assert hub.known_empty("orders", shape) is False
    # A note whose time ran out (a lease the claim saw has expired).
    hub.note_empty("orders", shape, hub.generation("orders"), loop.time() - 0.001)
    assert hub.known_empty("orders", shape) is False


async def test_notes_leave_with_the_last_waiter_of_their_queue():
    hub = Hub()
    loop = asyncio.get_running_loop()
    hub.loop = loop
    shape = ((None, None), None, None)
    waiting = asyncio.ensure_future(hub.wait("orders", hub.generation("orders"), 0.05, lane=(None, None)))
    hub.note_empty("orders", shape, hub.generation("orders"), loop.time() + 30)
    assert await waiting is False
    assert hub.empty == {}
    assert hub.known_empty("orders", shape) is False


async def test_a_wake_wakes_the_first_waiter_of_each_lane_not_every_waiter():
    """A push wakes one waiter per lane (consumer group and partition), the
    one that came first; the woken pop, once it has claimed, passes the wake
    to the next of its lane (``wake_one``). Waking every waiter of a queue
    at once was the thundering herd that made 2,000 waiting pops answer
    seconds late (tests/api/test_longpoll_scale.py)."""
    hub = Hub()
    hub.loop = asyncio.get_running_loop()
    generation = hub.generation("orders")
    group_g = [asyncio.ensure_future(hub.wait("orders", generation, 30.0, lane=("g", None))) for _ in range(3)]
    group_h = [asyncio.ensure_future(hub.wait("orders", generation, 30.0, lane=("h", None))) for _ in range(2)]
    everyone = group_g + group_h
    await asyncio.sleep(0)

    hub.wake(["orders"])
    await asyncio.wait(everyone, timeout=0.2)
    assert [w.done() for w in group_g] == [True, False, False]
    assert [w.done() for w in group_h] == [True, False]

    hub.wake_one("orders", ("g", None))
    await asyncio.wait(everyone, timeout=0.2)
    assert [w.done() for w in group_g] == [True, True, False]
    assert [w.done() for w in group_h] == [True, False]
    assert [w.result() for w in everyone if w.done()] == [True, True, True]
    hub.close()
    assert await asyncio.wait_for(asyncio.gather(*everyone), 1.0) == [True, True, False, True, False]


async def test_an_ephemeral_wake_leaves_the_any_queue_pops_asleep():
    """A push to an ephemeral queue wakes its own pops, not the namespace/task
    pops (which take durable queues only); a durable queue's wake does."""
    from queenadmin.domain import ephemeral

    hub = Hub()
    hub.loop = asyncio.get_running_loop()
    key = ephemeral.wake_key("presence")
    anyq = asyncio.ensure_future(hub.wait("*", hub.generation("*"), 30.0))
    own = asyncio.ensure_future(hub.wait(key, hub.generation(key), 30.0))
    await asyncio.sleep(0)
    hub.wake([key])
    assert await asyncio.wait_for(own, 1.0) is True
    await asyncio.sleep(0.05)
    assert not anyq.done()
    hub.wake(["orders"])
    assert await asyncio.wait_for(anyq, 1.0) is True


async def test_pops_wait_on_a_claim_of_their_shape_while_it_runs():
    """A claim in flight stands for its shape only at the generation it started at, and only while it runs."""
    hub = Hub()
    hub.loop = asyncio.get_running_loop()
    shape = (("g", None), None, None)
    other = (("h", None), None, None)
    assert hub.claim_in_flight("orders", shape) is False
    hub.claim_started("orders", shape, hub.generation("orders"))
    hub.claim_started("orders", shape, hub.generation("orders"))
    assert hub.claim_in_flight("orders", shape) is True
    assert hub.claim_in_flight("orders", other) is False
    assert hub.claim_in_flight("invoices", shape) is False
    # One of the two ends: the other still runs.
    hub.claim_ended("orders", shape)
    assert hub.claim_in_flight("orders", shape) is True
    # A push after the claims started: they may have missed it, so the next pop claims.
    hub.wake(["orders"])
    assert hub.claim_in_flight("orders", shape) is False
    # A claim started after the push stands again; when it ends, nothing is left behind.
    hub.claim_started("orders", shape, hub.generation("orders"))
    assert hub.claim_in_flight("orders", shape) is True
    hub.claim_ended("orders", shape)
    hub.claim_ended("orders", shape)
    assert hub.claim_in_flight("orders", shape) is False
    assert hub.claiming == {}
