"""``/ephemeral/``: every ephemeral queue with its tier, gauges, drops and
effective options; in the nav; and kept fresh over the websocket without
any event (it goes stale by itself)."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from queenadmin.dashboard.views import ephemeral as page
from queenadmin.domain import ephemeral
from tests.dashboard.test_live import _connect, _frames_until, redis_layer

__all__ = ["redis_layer"]

pytestmark = pytest.mark.usefixtures("short_connections")


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_the_page_lists_queues_with_gauges_drops_and_options(viewer):
    ephemeral.eph_configure(queue="eph-page-declared", options={"maxLength": 2, "policy": "dropOldest"})
    for n in range(3):
        ephemeral.eph_push(queue="eph-page-declared", partition="p", payloads=[f'{{"n":{n}}}'])
    ephemeral.eph_push(queue="eph-page-implicit", partition="a", payloads=['"x"'])
    html = _client(viewer).get("/ephemeral/").content.decode()
    assert '<a href="/ephemeral/" aria-current="page">Ephemeral</a>' in html
    declared = html.split('data-eph-queue="eph-page-declared"')[1].split("</tr>")[0]
    cells = [c.split(">", 1)[1].split("<")[0] for c in declared.split("<td")[1:]]
    # queue, tier, depth, bytes, partitions, groups, drops bounds / ttl / retry
    assert cells[:9] == ["eph-page-declared", "declared", "2", "14", "1", "0", "1", "0", "0"]
    assert "max 2 msgs / 16777216 B, dropOldest, lease 30 s, retry 5" in declared
    implicit = html.split('data-eph-queue="eph-page-implicit"')[1].split("</tr>")[0]
    assert "implicit" in implicit


@pytest.mark.django_db
def test_people_without_the_queues_view_are_refused(outsider):
    assert _client(outsider).get("/ephemeral/").status_code == 403


@pytest.mark.django_db(transaction=True)
async def test_the_socket_pushes_the_table_again_by_itself(viewer, monkeypatch):
    """No ephemeral write broadcasts; the region is re-read every few seconds."""
    monkeypatch.setattr(page, "REFRESH_SECONDS", 0.3)
    communicator, connected, _ = await _connect("/ws/ephemeral/", viewer)
    assert connected
    first = await communicator.receive_from(timeout=10)
    assert 'id="eph-table"' in first
    await sync_to_async(ephemeral.eph_push)(queue="eph-live", partition="p", payloads=['{"a":1}'])
    frames = await _frames_until(communicator, 'data-eph-queue="eph-live"')
    assert 'data-eph-queue="eph-live"' in frames[-1]
    await communicator.disconnect()
