"""The DLQ page and a queue's recovery over the websocket: a dead letter, a
replay and a purge made through the domain reach open pages without reload."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from queenadmin.domain.audit import Who
from queenadmin.domain.queues import board
from queenadmin.domain.queues import operator as queue_operator
from queenadmin.models import DeadLetter
from tests.dashboard.test_live import _connect, _frames_until, redis_layer
from tests.dashboard_ops.conftest import dead_letter, push

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("short_connections")]

__all__ = ["redis_layer"]


def _newest_message_id() -> str:
    return DeadLetter.objects.order_by("-id").values_list("message_id", flat=True)[0]


async def test_a_dead_letter_and_its_replay_reach_the_dlq_page(viewer):
    await sync_to_async(dead_letter)("live-dlq", 1)
    communicator, connected, _ = await _connect("/ws/dlq/", viewer)
    assert connected
    first = await communicator.receive_from(timeout=10)
    assert 'id="dlq-table"' in first
    await sync_to_async(dead_letter)("live-dlq", 1, "other")
    newest = await sync_to_async(_newest_message_id)()
    frames = await _frames_until(communicator, newest)
    assert frames[-1].count('name="ids"') == 0  # a viewer gets no checkboxes
    selection = board.DeadLetterFilter(queue="live-dlq")
    await sync_to_async(queue_operator.queue_dlq_action)(verb="replay", selection=selection, who=Who("ann"))
    frames = await _frames_until(communicator, "No dead letters.")
    assert newest not in frames[-1]
    await communicator.disconnect()


async def test_a_purge_reaches_the_queue_page(viewer):
    await sync_to_async(push)("live-purge", 3)
    communicator, connected, _ = await _connect("/ws/queue/?name=live-purge", viewer)
    assert connected
    first = await communicator.receive_from(timeout=10)
    assert '<span class="qa-tile-value tone-ready">3</span>' in first
    await sync_to_async(queue_operator.queue_purge)(queue="live-purge", who=Who("ann"))
    frames = await _frames_until(communicator, '<span class="qa-tile-value tone-ready">0</span>')
    assert 'id="queue-summary"' in frames[-1]
    await communicator.disconnect()
