"""``/consumers/`` over its websocket: a heartbeat written pushes the table,
a write in another namespace does not."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.http import QueryDict

from queenadmin.dashboard.views.consumers import _about_consumers
from queenadmin.domain import clock
from tests.dashboard.test_live import _connect, _frames_until, redis_layer
from tests.supervised import write_beat

__all__ = ["redis_layer"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("short_connections")
async def test_a_heartbeat_pushes_the_consumers_table(viewer):
    communicator, connected, _ = await _connect("/ws/consumers/", viewer)
    assert connected
    first = await communicator.receive_from(timeout=10)
    assert 'id="consumers-body"' in first
    assert "data-consumer=" not in first
    await sync_to_async(write_beat)(now=clock.now(), application="pusher", queue="orders")
    frames = await _frames_until(communicator, 'data-consumer="running"')
    assert "pusher" in frames[-1]
    await communicator.disconnect()


def test_only_the_heartbeats_namespace_and_queue_events_concern_the_page():
    params = QueryDict()
    assert _about_consumers({"type": "kv.changed", "namespaces": ["queen-supervisor"]}, params)
    assert _about_consumers({"type": "kv.changed", "namespaces": []}, params)
    assert not _about_consumers({"type": "kv.changed", "namespaces": ["app"]}, params)
    assert _about_consumers({"type": "queues.changed", "queues": ["orders"]}, params)
