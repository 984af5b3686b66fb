"""Issue 36, finding 2 on the live sockets: a stored name with a control
character keeps the overview, queue-list and queue sockets open; a socket
query no page sends is refused with its own close code."""

from __future__ import annotations

import re

import pytest
from asgiref.sync import sync_to_async

from queenadmin.dashboard import links
from tests.dashboard.test_live import _connect, redis_layer
from tests.dashboard.test_stored_names import _old_queue

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("short_connections")]

__all__ = ["redis_layer"]


async def test_the_overview_and_queue_sockets_stay_open_on_a_queue_with_a_newline(operator):
    """The overview, queue-list and queue page sockets send their regions
    with ``orders.\\nboom`` stored, and stay open."""
    await sync_to_async(_old_queue)("orders.\nboom")
    query = "name=" + links.spell("orders.\nboom")
    shown = re.compile(r"orders\.<span class=\"ctl\" title=\"U\+000A\">\\n</span>boom")
    for path, needle in (("/ws/overview/", shown), ("/ws/queues/", shown), (f"/ws/queue/?{query}", "queue-summary")):
        communicator, connected, _ = await _connect(path, operator)
        assert connected, path
        frame = await communicator.receive_from(timeout=10)
        assert re.search(needle, frame), path
        assert await communicator.receive_nothing(timeout=0.2), path
        await communicator.disconnect()


async def test_a_socket_with_nul_in_its_query_is_refused_with_4400(operator):
    """A socket query no page sends (NUL as such) is closed with 4400, not
    an error."""
    communicator, connected, _ = await _connect("/ws/locks/?prefix=%00", operator)
    assert connected
    closed = await communicator.receive_output(timeout=10)
    assert closed == {"type": "websocket.close", "code": 4400}
    await communicator.disconnect()
