"""The leases and message pages over the websocket: pushed on queue events.

The same registry and consumer as every live page (``test_live.py``).
"""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from queenadmin.domain import queues
from queenadmin.plumbing.db import json_text
from tests.dashboard.test_live import _connect, _frames_until, redis_layer

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("short_connections")]

__all__ = ["redis_layer"]


def push(queue: str, n: int) -> list[queues.PushResult]:
    return queues.queue_push(items=[queues.PushItem(queue, "p", json_text({"i": i})) for i in range(n)])


def claim(queue: str, group: str, n: int) -> queues.Claim:
    return queues.queue_claim(request=queues.PopRequest(queue=queue, group=group, batch=n, lease_seconds=300))


async def test_the_message_page_follows_a_lease_over_the_socket(viewer):
    (pushed,) = await sync_to_async(push)("live-orders", 1)
    communicator, connected, _ = await _connect(
        f"/ws/queue-message/?name=live-orders&message_id={pushed.message_id}", viewer
    )
    assert connected
    first = await communicator.receive_from(timeout=10)
    assert 'id="message-delivery"' in first
    assert 'data-state="pending"' in first
    await sync_to_async(claim)("live-orders", "__QUEUE_MODE__", 1)
    frames = await _frames_until(communicator, 'data-state="leased"')
    assert 'id="message-delivery"' in frames[-1]
    await communicator.disconnect()


async def test_the_leases_page_shows_a_new_lease_and_ignores_other_queues(viewer):
    await sync_to_async(push)("live-orders", 2)
    communicator, connected, _ = await _connect("/ws/queue-leases/?name=live-orders", viewer)
    assert connected
    first = await communicator.receive_from(timeout=10)
    assert 'id="queue-leases"' in first
    assert "data-lease=" not in first
    await sync_to_async(push)("other", 1)
    assert await communicator.receive_nothing(timeout=1.5)
    await sync_to_async(claim)("live-orders", "billing", 2)
    frames = await _frames_until(communicator, 'data-lease="billing/p"')
    assert "2 · offsets 0\u20131" in frames[-1]
    await communicator.disconnect()
