"""The dashboard's websocket: pushes, coalescing, permissions, masking."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing.websocket import WebsocketCommunicator
from django.test import Client, override_settings

from queenadmin.asgi import websocket_app
from queenadmin.domain import locks
from tests.api.test_events import REDIS_URL
from tests.dashboard.conftest import advance_versions

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def redis_layer():
    """A real Redis channel layer (the one replicas share), private to this test."""
    config = {"hosts": [REDIS_URL], "prefix": f"dash-test-{uuid.uuid4().hex[:8]}"}
    with override_settings(
        CHANNEL_LAYERS={"default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": config}}
    ):
        yield


def _session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


async def _connect(path: str, user=None, origin: str = "http://testserver") -> tuple[WebsocketCommunicator, bool, Any]:
    headers = [(b"origin", origin.encode()), (b"host", b"testserver")]
    if user is not None:
        cookie = await sync_to_async(_session_cookie)(user)
        headers.append((b"cookie", f"sessionid={cookie}".encode()))
    communicator = WebsocketCommunicator(websocket_app, path, headers=headers)
    connected, code = await communicator.connect(timeout=10)
    return communicator, connected, code


async def _frames_until(communicator: WebsocketCommunicator, needle: str, timeout: float = 10) -> list[str]:
    frames: list[str] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        frame = await communicator.receive_from(timeout=max(0.1, deadline - loop.time()))
        frames.append(frame)
        if needle in frame:
            return frames


async def test_a_lock_acquired_through_the_domain_appears_without_reload(operator):
    """The socket first sends the holders region, then pushes it again when a
    lock is taken, with owner and token masked."""
    communicator, connected, _ = await _connect("/ws/locks/", operator)
    assert connected
    first = await communicator.receive_from(timeout=10)
    assert 'id="locks-holders"' in first
    assert "payments.settle" not in first
    await sync_to_async(advance_versions)()
    got = await sync_to_async(locks.lock_acquire)(name="payments.settle", ttl=60, owner="host-a:pid-4242")
    frames = await _frames_until(communicator, "payments.settle")
    assert 'id="locks-holders"' in frames[-1]
    for frame in [first, *frames]:
        assert "host-a:pid-4242" not in frame
        assert str(got.token) not in frame
    await communicator.disconnect()
