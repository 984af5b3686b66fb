"""Change events leave ``serve`` after commit, coalesced, through the channel
layer: with ``REDIS_URL`` set, another process (another replica, a dashboard)
receives them from real Redis.
"""

from __future__ import annotations

import asyncio
import os

import httpx
import pytest
from channels_redis.core import RedisChannelLayer

from queenadmin.domain import events
from queenadmin.server.channel_layer import redis_layer_config
from tests.conftest import run_server

pytestmark = pytest.mark.live

REDIS_URL = os.environ.get("REDIS_URL_FOR_TESTS", "redis://127.0.0.1:6379/0")


async def test_a_write_on_serve_reaches_a_listener_through_redis(unique):
    layer = RedisChannelLayer(**redis_layer_config(REDIS_URL))
    channel = await layer.new_channel()
    await layer.group_add(events.KV_GROUP, channel)
    ns = unique("events")
    try:
        with run_server(extra_env={"REDIS_URL": REDIS_URL}) as server:
            headers = {"Authorization": f"Bearer {server.token}"}
            async with httpx.AsyncClient(base_url=server.url, headers=headers) as client:
                for key in ("a", "b", "c"):
                    op = {"op": "put", "ns": ns, "key": key, "value": 1, "forever": True}
                    assert (await client.post("/api/v1/kv", json={"operations": [op]})).status_code == 200
                seen: set[str] = set()
                while ns not in seen:
                    message = await asyncio.wait_for(layer.receive(channel), timeout=10)
                    assert message["type"] == "kv.changed"
                    seen.update(message["namespaces"])
    finally:
        await layer.group_discard(events.KV_GROUP, channel)
        await layer.flush()


def test_coalesced_events_keep_every_name():
    publisher = events._Publisher()
    seen: list[tuple[str, dict]] = []
    publisher.listeners.append(lambda group, message: seen.append((group, message)))
    with publisher._cond:
        publisher._thread = _AliveThread()  # keep the flush thread out of this test
    publisher.mark("kv", {"type": "kv.changed", "namespaces": ["a"]})
    publisher.mark("kv", {"type": "kv.changed", "namespaces": ["b", "a"]})
    assert publisher._pending["kv"] == {"type": "kv.changed", "count": 2, "namespaces": ["a", "b"]}
    assert len(seen) == 2


class _AliveThread:
    def is_alive(self) -> bool:
        return True


class _CountingCondition:
    """A condition that counts its wake-ups."""

    def __init__(self) -> None:
        import threading

        self._cond = threading.Condition()
        self.wakes = 0

    def __enter__(self) -> bool:
        return self._cond.__enter__()

    def __exit__(self, *exc: object) -> None:
        self._cond.__exit__(*exc)

    def notify(self, n: int = 1) -> None:
        self.wakes += 1
        self._cond.notify(n)

    def notify_all(self) -> None:
        self.wakes += 1
        self._cond.notify_all()


def test_marks_wake_the_flush_thread_only_when_nothing_was_pending():
    """Writes marked while an event is pending do not wake the thread again:
    it is awake already, or was woken by the first."""
    publisher = events._Publisher()
    cond = _CountingCondition()
    publisher._cond = cond  # type: ignore[assignment]
    publisher._thread = _AliveThread()  # type: ignore[assignment]
    publisher.mark("kv", {"type": "kv.changed", "namespaces": ["a"]})
    publisher.mark("kv", {"type": "kv.changed", "namespaces": ["b"]})
    publisher.mark("locks", {"type": "lock.changed"})
    assert cond.wakes == 1
    publisher._pending.clear()  # as the flush thread takes a batch
    publisher.mark("kv", {"type": "kv.changed", "namespaces": ["c"]})
    assert cond.wakes == 2
