"""``/queues/<name>/leases/`` and ``/queues/<name>/messages/<id>/``: who may
see them, what they show (holders masked), where they are linked from, what
bad input answers, and how many queries they cost (not more with more data).
"""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from queenadmin.domain import queues
from queenadmin.domain.masking import mask_token
from queenadmin.plumbing.db import json_text

pytestmark = pytest.mark.django_db


def push(queue: str, n: int, partition: str = "p") -> list[queues.PushResult]:
    return queues.queue_push(items=[queues.PushItem(queue, partition, json_text({"i": i})) for i in range(n)])


def claim(queue: str, group: str, n: int, partition: str | None = None) -> queues.Claim:
    return queues.queue_claim(
        request=queues.PopRequest(queue=queue, partition=partition, group=group, batch=n, lease_seconds=300)
    )


def ack(c: queues.Claim, status: str = "completed") -> None:
    queues.queue_ack(
        items=[
            queues.AckItem(i, m.transaction_id, str(m.partition_id), status, c.lease_id, None, c.group)  # type: ignore[arg-type]
            for i, m in enumerate(c.messages)
        ]
    )


@pytest.fixture
def orders() -> dict[str, str]:
    """A queue with one message consumed by billing and leased to fulfillment."""
    (first, *_) = push("orders", 3)
    ack(claim("orders", "billing", 1))
    held = claim("orders", "fulfillment", 2)
    return {"mid": first.message_id, "txn": first.transaction_id, "lease": held.lease_id}


def paths(orders: dict[str, str]) -> list[str]:
    return ["/queues/orders/leases/", f"/queues/orders/messages/{orders['mid']}/"]


def test_anonymous_users_go_to_the_login_page(client_for, orders):
    for path in paths(orders):
        response = client_for(None).get(path)
        assert response.status_code == 302
        assert response["Location"].startswith("/login/?next=")


def test_signed_in_users_who_are_not_staff_are_refused(client_for, outsider, orders):
    for path in paths(orders):
        assert client_for(outsider).get(path).status_code == 403


def test_viewers_read_both_pages_live_with_holders_masked(client_for, viewer, orders, pages):
    client = client_for(viewer)
    for path in paths(orders):
        response = client.get(path)
        html = response.content.decode()
        assert response.status_code == 200, path
        assert 'id="live"' in html
        assert "ws-connect=" in html
        assert mask_token(orders["lease"]) in html
    pages.assert_free_of(orders["lease"])


def test_the_leases_page_lists_each_groups_batch(client_for, viewer, orders):
    html = client_for(viewer).get("/queues/orders/leases/").content.decode()
    (row,) = re.findall(r'<tr data-lease="([^"]+)"', html)
    assert row == "fulfillment/p"
    assert "2 · offsets 0\u20131" in html
    assert "data-countdown" in html
    assert f'href="/queues/orders/messages/{orders["mid"]}/"' in html  # the batch's first message
    # The batch links to its messages in the queue's browser.
    assert 'href="/queues/orders/?partition=p&amp;before=2#queue-messages"' in html


def test_the_leases_page_filters_by_group_and_pages_by_cursor(client_for, viewer):
    for part in ("p1", "p2", "p3"):
        push("orders", 1, part)
        claim("orders", "a", 1, part)
        claim("orders", "b", 1, part)
    client = client_for(viewer)
    html = client.get("/queues/orders/leases/", {"group": "b"}).content.decode()
    assert sorted(re.findall(r'<tr data-lease="([^"]+)"', html)) == ["b/p1", "b/p2", "b/p3"]
    from queenadmin.domain.queues import leases

    leases_page = leases.lease_page(queue="orders", limit=4)
    assert leases_page is not None
    html = client.get("/queues/orders/leases/", {"after": leases_page.leases[1].id}).content.decode()
    assert len(re.findall(r"<tr data-lease=", html)) == 4
    assert "(not the first)" in html


def test_the_message_page_shows_each_groups_state(client_for, viewer, orders):
    html = client_for(viewer).get(f"/queues/orders/messages/{orders['mid']}/").content.decode()
    states = dict(re.findall(r'<tr data-group="([^"]+)" data-state="([^"]+)"', html))
    assert states == {"billing": "consumed", "fulfillment": "leased"}
    assert orders["txn"] in html
    assert "&quot;i&quot;: 0" in html  # pretty-printed payload


def test_an_htmx_request_for_the_region_gets_the_partial(client_for, viewer, orders):
    response = client_for(viewer).get(
        f"/queues/orders/messages/{orders['mid']}/", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="message-delivery"
    )
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="message-delivery"')
    assert "<html" not in html


@pytest.mark.parametrize(
    "path",
    [
        "/queues/nosuchqueue/leases/",
        "/queues/nosuchqueue/messages/0190c3a4-0000-7000-8000-000000000000/",
        "/queues/orders/messages/0190c3a4-0000-7000-8000-000000000000/",
        "/queues/orders/messages/not-a-uuid%20at%20all/",
        "/queues/orders/messages/" + "x" * 300 + "/",
        "/queues/orders/messages/0190c3a4%00/",
        "/queues/ord%00ers/leases/",
        "/queues/ord%00ers/messages/0190c3a4-0000-7000-8000-000000000000/",
        "/queues/orders/leases/?after=abc&group=%00",
    ],
)
def test_unknown_or_malformed_input_is_a_styled_404_never_a_500(client_for, viewer, orders, path):
    """Nothing there is a styled 404; NUL anywhere is the styled 400."""
    response = client_for(viewer).get(path)
    assert response.status_code == (400 if "%00" in path else 404)
    assert 'class="panel problem"' in response.content.decode()


def test_a_message_of_another_queue_is_not_found_here(client_for, viewer, orders):
    push("mail", 1)
    assert client_for(viewer).get(f"/queues/mail/messages/{orders['mid']}/").status_code == 404


def test_search_and_the_queue_page_link_to_the_message(client_for, viewer, orders):
    client = client_for(viewer)
    detail = f'href="/queues/orders/messages/{orders["mid"]}/"'
    for text in (orders["mid"], orders["txn"]):
        assert detail in client.get("/search/", {"q": text}).content.decode()
    html = client.get("/queues/orders/").content.decode()
    assert detail in html
    assert 'href="/queues/orders/leases/"' in html
    # A group holding leases links to them; one holding none does not.
    assert 'href="/queues/orders/leases/?group=fulfillment"' in html
    assert "leases/?group=billing" not in html


def _queries(client, path: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(path).status_code == 200
    return len(captured.captured_queries)


def test_query_counts_do_not_grow_with_leases_groups_or_dead_letters(client_for, viewer, orders):
    client = client_for(viewer)
    leases_before = _queries(client, "/queues/orders/leases/")
    message_before = _queries(client, f"/queues/orders/messages/{orders['mid']}/")
    for part in ("p1", "p2", "p3", "p4"):
        push("orders", 3, part)
        for group in ("g1", "g2", "g3"):
            claim("orders", group, 1, part)
    claim("orders", "g1", 1, "p")
    assert _queries(client, "/queues/orders/leases/") == leases_before
    assert _queries(client, f"/queues/orders/messages/{orders['mid']}/") == message_before
