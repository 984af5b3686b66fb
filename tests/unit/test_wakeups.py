"""The pop hub's stop: waiting pops end at once, later ones do not wait."""

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
