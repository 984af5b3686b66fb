"""The overview and queue pages over the websocket: pushed on queue events.

The same registry and consumer as every live page (``test_live.py``): a
push through the domain re-renders the regions that show it, and a queue
page ignores events about other queues.
"""

from __future__ import annotations

import re

import pytest
from asgiref.sync import sync_to_async

from queenadmin.domain import queues
from queenadmin.plumbing.db import json_text
from tests.dashboard.test_live import _connect, _frames_until, redis_layer

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("short_connections")]

__all__ = ["redis_layer"]


def _push(queue: str, n: int) -> None:
    items = [queues.PushItem(queue, queues.DEFAULT_PARTITION, json_text({"i": i}), None) for i in range(n)]
    queues.queue_push(items=items)


def _claimable(frame: str) -> str:
    found = re.search(r'Claimable</span><span class="qa-tile-value tone-ready">([^<]*)<', frame)
    assert found, frame[:500]
    return found.group(1)


async def test_a_push_updates_the_queue_page_and_its_messages(viewer):
    await sync_to_async(_push)("orders", 2)
    communicator, connected, _ = await _connect("/ws/queue/?name=orders", viewer)
    assert connected
    first = await communicator.receive_from(timeout=10)
    assert 'id="queue-summary"' in first
    assert 'id="queue-dlq"' in first
    assert _claimable(first) == "2"
    await sync_to_async(_push)("orders", 3)
    frames = await _frames_until(communicator, ">5<")
    assert _claimable(frames[-1]) == "5"
    assert 'id="queue-messages"' in frames[-1]
    await communicator.disconnect()


async def test_a_queue_page_ignores_pushes_to_other_queues(viewer):
    await sync_to_async(_push)("mine", 1)
    communicator, connected, _ = await _connect("/ws/queue/?name=mine", viewer)
    assert connected
    await communicator.receive_from(timeout=10)
    await sync_to_async(_push)("theirs", 1)
    assert await communicator.receive_nothing(timeout=1.5)
    await sync_to_async(_push)("mine", 1)
    frame = await communicator.receive_from(timeout=10)
    assert _claimable(frame) == "2"
    await communicator.disconnect()


@pytest.mark.parametrize(("path", "region"), [("/ws/overview/", "overview-body"), ("/ws/queues/", "queue-table")])
async def test_the_overview_and_queue_list_follow_pushes(viewer, path, region):
    communicator, connected, _ = await _connect(path, viewer)
    assert connected
    first = await communicator.receive_from(timeout=10)
    assert f'id="{region}"' in first
    assert "fresh-queue" not in first
    await sync_to_async(_push)("fresh-queue", 4)
    frames = await _frames_until(communicator, "fresh-queue")
    assert f'id="{region}"' in frames[-1]
    await communicator.disconnect()
