"""The dashboard's websocket: pushes, coalescing, permissions, masking."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing.websocket import WebsocketCommunicator
from django.test import Client, override_settings

from queenadmin.domain import kv, locks, timers
from queenadmin.server.app import _websocket as websocket_app
from queenadmin.server.channel_layer import redis_layer_config
from tests.api.test_events import REDIS_URL
from tests.dashboard.conftest import advance_versions

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("short_connections")]


@pytest.fixture(autouse=True)
def redis_layer():
    """A real Redis channel layer (the one replicas share), private to this test."""
    config = redis_layer_config(REDIS_URL, prefix=f"dash-test-{uuid.uuid4().hex[:8]}")
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


async def test_a_burst_of_1000_writes_is_coalesced_into_a_few_renders(operator, settings):
    """1,000 KV writes in a burst reach a namespace page as a handful of
    frames (at most one per DASHBOARD_LIVE_GAP_SECONDS), and the last frame
    shows the final state."""
    settings.QUEENADMIN_DASHBOARD_LIVE_GAP_SECONDS = 0.5
    communicator, connected, _ = await _connect("/ws/kv-keys/?ns=burst", operator)
    assert connected
    await communicator.receive_from(timeout=10)

    from django.db import connections

    def burst() -> float:
        loop_start = time.monotonic()
        try:
            for i in range(1000):
                kv.kv_put(namespace="burst", key="counter", value=i, ttl=None)
        finally:
            connections.close_all()
        return time.monotonic() - loop_start

    started = time.monotonic()
    # Another thread than the consumer's database thread, as a real writer is.
    await sync_to_async(burst, thread_sensitive=False)()
    frames = await _frames_until(communicator, "999", timeout=30)
    elapsed = time.monotonic() - started
    assert all('id="kv-keys"' in frame for frame in frames)
    # One render at most per gap, plus the one in flight when the burst began.
    assert len(frames) <= elapsed / 0.5 + 2
    assert len(frames) < 100
    await communicator.disconnect()


async def test_events_of_other_namespaces_do_not_render_a_namespace_page(operator):
    communicator, connected, _ = await _connect("/ws/kv-keys/?ns=mine", operator)
    assert connected
    await communicator.receive_from(timeout=10)
    await sync_to_async(kv.kv_put)(namespace="theirs", key="k", value=1, ttl=None)
    await sync_to_async(kv.kv_put)(namespace="mine", key="k", value=2, ttl=None)
    frame = await communicator.receive_from(timeout=10)
    assert 'data-key="k"' in frame
    assert await communicator.receive_nothing(timeout=1)
    await communicator.disconnect()


@pytest.mark.parametrize("who", ["anonymous", "outsider", "no_perm"])
async def test_the_socket_refuses_anyone_but_staff_with_the_view_permission(who, outsider):
    from django.contrib.auth.models import User

    user = {
        "anonymous": None,
        "outsider": outsider,
        "no_perm": await sync_to_async(User.objects.create_user)("pat", password="pw", is_staff=True),
    }[who]
    communicator, connected, _ = await _connect("/ws/locks/", user)
    assert connected, "accepted, to close with a reason the browser can read"
    closed = await communicator.receive_output(timeout=10)
    assert closed == {"type": "websocket.close", "code": 4401 if who == "anonymous" else 4403}
    await communicator.disconnect()


async def test_viewers_get_the_live_page_without_buttons(viewer):
    await sync_to_async(locks.lock_acquire)(name="viewed", ttl=60, owner="o")
    communicator, connected, _ = await _connect("/ws/locks/", viewer)
    assert connected
    frame = await communicator.receive_from(timeout=10)
    assert 'data-lock="viewed#0"' in frame
    assert "Force release" not in frame
    await communicator.disconnect()


async def test_a_foreign_origin_is_refused(operator):
    communicator, connected, _ = await _connect("/ws/locks/", operator, origin="http://evil.example")
    assert not connected
    # The browser answers the refusal: the app and its channel layer reader
    # end before the test's event loop closes (else a Redis stream left to
    # the collector warns "loop is closed", an error at teardown).
    await communicator.disconnect()


async def test_an_unknown_page_is_refused(operator):
    """No route: refused at the handshake (asgi logs it in one line)."""
    communicator, connected, _ = await _connect("/ws/nope/", operator)
    assert not connected
    await communicator.disconnect()


async def test_logging_out_closes_the_logins_sockets_at_once(operator):
    client = Client()
    await sync_to_async(client.force_login)(operator)
    cookie = client.cookies["sessionid"].value
    headers = [(b"origin", b"http://testserver"), (b"host", b"testserver"), (b"cookie", f"sessionid={cookie}".encode())]
    communicator = WebsocketCommunicator(websocket_app, "/ws/audit/", headers=headers)
    connected, _ = await communicator.connect(timeout=10)
    assert connected
    await communicator.receive_from(timeout=10)
    assert (await sync_to_async(client.post)("/logout/")).status_code == 302
    closed = await communicator.receive_output(timeout=10)
    assert closed == {"type": "websocket.close", "code": 4401}
    # The browser answers the close; the consumer then ends (its channel
    # layer reader too) before the test's event loop closes.
    await communicator.disconnect()


async def test_a_deleted_session_closes_the_socket_at_its_next_render(operator):
    communicator, connected, _ = await _connect("/ws/locks/", operator)
    assert connected
    await communicator.receive_from(timeout=10)
    from django.contrib.sessions.models import Session

    await sync_to_async(Session.objects.all().delete)()
    await sync_to_async(locks.lock_acquire)(name="after.logout", ttl=60, owner="o")
    closed = await communicator.receive_output(timeout=10)
    assert closed == {"type": "websocket.close", "code": 4401}
    # The browser answers the close; the consumer then ends (its channel
    # layer reader too) before the test's event loop closes.
    await communicator.disconnect()


async def test_a_lease_expiring_re_renders_the_page_with_no_event(operator):
    """Expiry publishes nothing; the page re-renders at the lease's end.
    (3 s: long enough that a loaded machine still renders it held first.)"""
    await sync_to_async(locks.lock_acquire)(name="short.lease", ttl=3, owner="o")
    communicator, connected, _ = await _connect("/ws/locks/", operator)
    assert connected
    first = await communicator.receive_from(timeout=10)
    assert 'data-lock="short.lease#0"' in first
    second = await communicator.receive_from(timeout=15)
    assert "short.lease" not in second
    await communicator.disconnect()


async def test_a_reconnect_gets_every_region_again(operator):
    """Resync: whatever changed while the socket was away arrives on connect."""
    communicator, connected, _ = await _connect("/ws/timers/", operator)
    assert connected
    await communicator.receive_from(timeout=10)
    await communicator.disconnect()
    await sync_to_async(timers.timer_schedule)(queue="q", timer_key="while-away", payload=1, delay=timedelta(minutes=5))
    communicator, connected, _ = await _connect("/ws/timers/", operator)
    assert connected
    frame = await communicator.receive_from(timeout=10)
    assert 'data-timer="q/while-away"' in frame
    await communicator.disconnect()


async def test_a_key_page_follows_its_key(operator):
    await sync_to_async(kv.kv_put)(namespace="cfg", key="mode", value="safe", ttl=None)
    communicator, connected, _ = await _connect("/ws/kv-key/?ns=cfg&key=mode", operator)
    assert connected
    first = await communicator.receive_from(timeout=10)
    assert 'id="kv-key"' in first
    assert "&quot;safe&quot;" in first
    await sync_to_async(kv.kv_put)(namespace="cfg", key="mode", value="fast", ttl=None)
    frames = await _frames_until(communicator, "&quot;fast&quot;")
    assert 'id="kv-key"' in frames[-1]
    await communicator.disconnect()
