"""Issue 36, finding 2 on the dashboard: a stored name with a control
character keeps every page up and links to its own page, on both databases."""

from __future__ import annotations

import pytest

from queenadmin.domain import queues
from queenadmin.models import Queue
from queenadmin.plumbing.db import json_text


def _old_queue(name: str) -> None:
    """A queue named ``name`` as a database from before the name rule holds it."""
    queues.queue_push(items=[queues.PushItem("placeholder", "p", json_text({"n": 1}))])
    assert Queue.objects.filter(name="placeholder").update(name=name)


@pytest.mark.django_db
def test_a_queue_with_a_newline_keeps_the_overview_queues_and_search_up(client_for, operator):
    """After a push to ``orders.\\nboom``, /, /queues/ and /search/ answer
    200 and link the queue to its own page, which answers 200."""
    _old_queue("orders.\nboom")
    client = client_for(operator)
    for path in ("/", "/queues/", "/search/?q=orders"):
        response = client.get(path)
        assert response.status_code == 200, path
        assert 'href="/queues/orders.~0Aboom/"' in response.content.decode(), path
    response = client.get("/queues/orders.~0Aboom/")
    assert response.status_code == 200
    assert response.context["queue"].name == "orders.\nboom"


@pytest.mark.django_db
def test_a_queue_named_billing_purge_links_to_itself_not_to_a_purge(client_for, operator):
    """``billing/purge`` links to its own page, not to the purge
    confirmation of ``billing``; ``../x`` links under /queues/."""
    _old_queue("billing")
    queues.queue_push(items=[queues.PushItem("billing/purge", "p", json_text({}))])
    queues.queue_push(items=[queues.PushItem("../x", "p", json_text({}))])
    client = client_for(operator)
    page = client.get("/queues/").content.decode()
    assert 'href="/queues/billing~2Fpurge/"' in page
    assert 'href="/queues/billing/purge/"' not in page
    assert 'href="/queues/..~2Fx/"' in page
    response = client.get("/queues/billing~2Fpurge/")
    assert response.resolver_match.url_name == "queue"
    assert response.context["queue"].name == "billing/purge"


@pytest.mark.django_db
def test_a_queue_with_a_newline_is_purged_by_typing_its_name_as_shown(client_for, operator):
    """A browser's text field drops line breaks, so the purge of
    ``orders.\\nboom`` is confirmed by typing ``orders.\\nboom`` as the page
    spells it (a backslash and an n); a wrong name purges nothing."""
    _old_queue("orders.\nboom")
    client = client_for(operator)
    path = "/queues/orders.~0Aboom/purge/"
    refused = client.post(path, {"confirm": "orders.boom", "reason": "test"})
    assert refused.status_code == 422
    assert "orders.\\nboom" in refused.content.decode()
    assert Queue.objects.get(name="orders.\nboom").partitions.get().messages.count() == 1
    done = client.post(path, {"confirm": "orders.\\nboom", "reason": "test"})
    assert done.status_code in (200, 303)
    assert Queue.objects.get(name="orders.\nboom").partitions.get().messages.count() == 0
