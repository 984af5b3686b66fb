"""The events publisher sends every flush on one long-lived event loop.

It used ``async_to_sync`` per message: a new thread and event loop each
time, and with Redis a new connection per loop. Real Redis here.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from channels_redis.core import RedisChannelLayer

from queenadmin.domain import events
from queenadmin.server.channel_layer import redis_layer_config
from tests.conftest import settings_of

REDIS_URL = os.environ.get("REDIS_URL_FOR_TESTS", "redis://127.0.0.1:6379/0")

#: The loops group_send ran on.
LOOPS: list[asyncio.AbstractEventLoop] = []


class RecordingRedisLayer(RedisChannelLayer):
    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        LOOPS.append(asyncio.get_running_loop())
        await super().group_send(group, message)


def test_every_flush_goes_out_on_one_loop(settings):
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "tests.unit.test_events_publisher.RecordingRedisLayer",
            "CONFIG": redis_layer_config(REDIS_URL),
        }
    }
    listener = RedisChannelLayer(**redis_layer_config(REDIS_URL))
    group = f"publisher-test-{os.getpid()}"

    async def subscribe() -> str:
        channel = await listener.new_channel()
        await listener.group_add(group, channel)
        return channel

    loop = asyncio.new_event_loop()
    try:
        channel = loop.run_until_complete(subscribe())
        publisher = events._Publisher()
        LOOPS.clear()
        received = []
        for n in range(4):
            publisher.mark(group, {"type": "kv.changed", "namespaces": [f"ns{n}"]})
            # A bound on waiting, not a speed figure: CI's three legs on two
            # cores once kept the first flush from arriving within 5 s.
            message = loop.run_until_complete(asyncio.wait_for(listener.receive(channel), 20))
            received.append(message["namespaces"])
            time.sleep(events.FLUSH_INTERVAL + 0.05)
        assert received == [["ns0"], ["ns1"], ["ns2"], ["ns3"]]
        assert len(LOOPS) == 4
        assert len({id(loop) for loop in LOOPS}) == 1
        assert not LOOPS[0].is_closed()
    finally:
        loop.run_until_complete(listener.flush())
        loop.close()


class FlakyLayer:
    """A channel layer down for its first ``down`` sends."""

    def __init__(self, down: int) -> None:
        self.down = down
        self.sent: list[str] = []

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        if self.down:
            self.down -= 1
            raise ConnectionError("Connection refused")
        self.sent.append(group)


def test_an_outage_of_the_channel_layer_is_logged_once_and_its_end_once(monkeypatch, caplog):
    """Redis down: one line when sends start failing, one when they go out again, not one per flush."""
    layer = FlakyLayer(down=6)
    monkeypatch.setattr("channels.layers.get_channel_layer", lambda: layer)
    publisher = events._Publisher()
    caplog.set_level("INFO", logger=events.log.name)
    for n in range(7):
        publisher.mark(f"group-{n % 2}", {"type": "kv.changed", "namespaces": [f"ns{n}"]})
        publisher.drain(5)
        time.sleep(events.FLUSH_INTERVAL + 0.05)
    lines = [r.getMessage() for r in caplog.records if r.name == events.log.name]
    assert len(lines) == 2, lines
    assert lines[0].startswith("could not publish to group group-0 (ConnectionError: Connection refused)")
    assert lines[1] == "publishing to dashboards again"
    assert layer.sent == ["group-0"]


def test_a_layer_on_redis_waits_longer_for_a_reply_than_redis_holds_a_receive():
    """A receive is a BZPOPMIN Redis holds for ``brpop_timeout`` seconds.
    Read with redis-py 8's own 5 s, an idle receive raced that and raised
    TimeoutError on a busy host: the settings' layer reads for longer."""
    made = settings_of({**os.environ, "REDIS_URL": REDIS_URL})
    layer = RedisChannelLayer(**made["CHANNEL_LAYERS"]["default"]["CONFIG"])
    connection = layer.create_pool(0).connection_kwargs
    assert connection["socket_timeout"] >= 2 * layer.brpop_timeout
    assert connection["socket_connect_timeout"] <= layer.brpop_timeout
