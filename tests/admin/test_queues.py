"""Queues, partitions, groups, messages and dead letters in the admin:
read-only lists with the board's columns, DLQ replay and purge, options."""

from __future__ import annotations

import json

import pytest

from queenadmin.models import AuditEntry, DeadLetter, Message, Queue
from tests.admin.conftest import action, groups_of
from tests.dashboard_ops.conftest import claim, configure, dead_letter, push

pytestmark = pytest.mark.django_db

ADMIN = "/admin/queenadmin/"


@pytest.fixture
def log() -> None:
    configure("orders", leaseTime=30)
    push("orders", 5, payload={"big": "x" * 500})
    claim("orders", batch=2)
    claim("orders", batch=1, group="billing")
    dead_letter("orders", 3, partition="p1")
    configure("mail")
    dead_letter("mail", 2)


def test_read_only_lists_with_board_columns(operator, log):
    page = operator.get(f"{ADMIN}queue/").content.decode()
    assert "orders" in page
    # orders holds 8 messages (3 of them dead-lettered by queue mode); its
    # slowest group, billing, has done none. In flight is every lease: 1 by
    # billing and 2 by queue mode.
    assert '<td class="field-depth">8</td>' in page
    assert '<td class="field-in_flight">3</td>' in page
    assert '<td class="field-dead_letters">3</td>' in page
    assert "oldest claimable" in page.lower()
    assert "field-depth" in page
    orders = Queue.objects.get(name="orders")
    detail = operator.get(f"{ADMIN}queue/{orders.pk}/change/").content.decode()
    assert "options_text" in detail
    assert '<div class="readonly">8</div>' in detail
    part = orders.partitions.get(name="p1")
    assert operator.get(f"{ADMIN}partition/{part.pk}/change/").status_code == 200
    groups = operator.get(f"{ADMIN}consumergroup/").content.decode()
    assert "billing" in groups
    assert "field-lag" in groups
    for model in ("partition", "message", "deadletter", "consumergroup", "queue"):
        listed = operator.get(f"{ADMIN}{model}/")
        assert listed.status_code == 200, model
        assert f"{ADMIN}{model}/add/" not in listed.content.decode()


def test_messages_list_cuts_payloads_filters_and_searches(operator, log):
    page = operator.get(f"{ADMIN}message/").content.decode()
    assert "x" * 200 not in page
    mid = Message.objects.filter(partition__queue__name="mail").values_list("message_id", flat=True).first()
    found = operator.get(f"{ADMIN}message/", {"q": mid}).content.decode()
    assert found.count("field-offset") == 1
    mail = operator.get(f"{ADMIN}message/", {"queue": "mail"}).content.decode()
    assert mail.count("field-offset") == Message.objects.filter(partition__queue__name="mail").count()


def test_no_one_changes_the_log_by_hand(operator, log):
    msg = Message.objects.first()
    assert msg is not None
    assert operator.post(f"{ADMIN}message/{msg.pk}/change/", {"payload": "{}"}).status_code == 403
    assert operator.post(f"{ADMIN}message/{msg.pk}/delete/", {"post": "yes"}).status_code == 403
    dead = DeadLetter.objects.first()
    assert dead is not None
    assert operator.post(f"{ADMIN}deadletter/{dead.pk}/delete/", {"post": "yes"}).status_code == 403


def test_replay_dead_letters(operator, log, published, committing):
    ids = list(DeadLetter.objects.filter(queue__name="orders").values_list("pk", flat=True)[:2])
    before = Message.objects.filter(partition__queue__name="orders").count()
    with committing():
        done = operator.post(f"{ADMIN}deadletter/", action("replay", ids, reason="bug fixed"), follow=True)
    note = "Replayed 2 dead letters, for the group that failed each only (transactionId dlq:&lt;id&gt;)."
    assert note in done.content.decode()
    assert Message.objects.filter(partition__queue__name="orders").count() == before + 2
    assert DeadLetter.objects.filter(queue__name="orders").count() == 1
    entry = AuditEntry.objects.get(action="dlq.replay")
    assert (entry.via, entry.reason, entry.actor) == ("admin", "bug fixed", "otto")
    assert {"queues", "audit"} <= groups_of(published)


def test_purge_a_dlq_needs_the_typed_name(operator, log):
    orders = Queue.objects.get(name="orders")
    wrong = operator.post(f"{ADMIN}queue/", action("purge_dlq", [orders.pk], reason="junk", confirm_name="order"))
    assert "type &#x27;orders&#x27; exactly" in wrong.content.decode()
    assert DeadLetter.objects.filter(queue=orders).count() == 3
    done = operator.post(
        f"{ADMIN}queue/", action("purge_dlq", [orders.pk], reason="junk", confirm_name="orders"), follow=True
    )
    assert "Purged 3 dead letters of orders." in done.content.decode()
    assert not DeadLetter.objects.filter(queue=orders).exists()
    assert DeadLetter.objects.filter(queue__name="mail").count() == 2
    assert AuditEntry.objects.get(action="dlq.purge").via == "admin"


def test_a_purge_of_several_queues_is_refused_and_deletes_nothing(operator, log):
    both = list(Queue.objects.filter(name__in=["orders", "mail"]).values_list("pk", flat=True))
    assert len(both) == 2
    messages_before = Message.objects.count()
    dlq = operator.post(f"{ADMIN}queue/", action("purge_dlq", both, reason="x", confirm_name="orders"), follow=True)
    assert "Select exactly one queue to purge its DLQ." in dlq.content.decode()
    log_ = operator.post(f"{ADMIN}queue/", action("purge_queue", both, reason="x", confirm_name="orders"), follow=True)
    assert "Select exactly one queue to purge its messages." in log_.content.decode()
    assert DeadLetter.objects.count() == 5
    assert Message.objects.count() == messages_before
    assert not AuditEntry.objects.exists()


def test_purge_selected_dead_letters_of_one_queue(operator, log):
    ids = list(DeadLetter.objects.values_list("pk", flat=True))
    mixed = operator.post(f"{ADMIN}deadletter/", action("purge", ids, reason="x", confirm_name="mail"), follow=True)
    assert "Select dead letters of one queue" in mixed.content.decode()
    mail = list(DeadLetter.objects.filter(queue__name="mail").values_list("pk", flat=True))
    done = operator.post(f"{ADMIN}deadletter/", action("purge", mail, reason="x", confirm_name="mail"), follow=True)
    assert "Purged 2 dead letters." in done.content.decode()
    assert DeadLetter.objects.count() == 3


def _configure_form(queue: Queue, **changes: object) -> dict[str, str]:
    return {"options_text": json.dumps({**queue.options, **changes}), "reason": "slow consumers", "_save": "Save"}


def test_change_queue_options_as_configure(operator, log, published, committing):
    orders = Queue.objects.get(name="orders")
    with committing():
        response = operator.post(f"{ADMIN}queue/{orders.pk}/change/", _configure_form(orders, leaseTime=120))
    assert response.status_code == 302
    orders.refresh_from_db()
    assert orders.options["leaseTime"] == 120
    entry = AuditEntry.objects.get(action="queue.configure")
    assert json.loads(entry.before)["leaseTime"] == 30
    assert json.loads(entry.after)["leaseTime"] == 120
    assert (entry.via, entry.reason) == ("admin", "slow consumers")
    assert "queues" in groups_of(published)


def test_bad_options_are_form_errors(operator, log):
    orders = Queue.objects.get(name="orders")
    for bad in ({"leaseTime": -1}, {"leaseTime": "x"}, {"nope": 1}):
        form = _configure_form(orders, **bad)
        response = operator.post(f"{ADMIN}queue/{orders.pk}/change/", form)
        assert response.status_code == 200, bad
        assert "errorlist" in response.content.decode()
    assert not AuditEntry.objects.exists()


def test_viewer_may_not_act_on_queues(viewer, log):
    orders = Queue.objects.get(name="orders")
    assert viewer.get(f"{ADMIN}queue/").status_code == 200
    assert viewer.post(f"{ADMIN}queue/{orders.pk}/change/", _configure_form(orders, leaseTime=5)).status_code == 403
    ids = list(DeadLetter.objects.values_list("pk", flat=True))
    assert viewer.post(f"{ADMIN}deadletter/", action("replay", ids, reason="x")).status_code == 403
    assert (
        viewer.post(f"{ADMIN}deadletter/", action("purge", ids, reason="x", confirm_name="orders")).status_code == 403
    )
    purge = action("purge_dlq", [orders.pk], reason="x", confirm_name="orders")
    assert viewer.post(f"{ADMIN}queue/", purge).status_code == 403
    assert DeadLetter.objects.count() == 5
    assert not AuditEntry.objects.exists()


def test_lists_count_no_further_than_the_cap(operator, log, monkeypatch):
    """Past the cap the list says "more than", and no query counts every row."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from queenadmin.admin import domain_admin

    monkeypatch.setattr(domain_admin, "COUNT_CAP", 4)
    with CaptureQueriesContext(connection) as captured:
        page = operator.get(f"{ADMIN}message/").content.decode()
    assert "more than 4 messages (not counted further)" in page
    counts = [q["sql"] for q in captured.captured_queries if "COUNT(" in q["sql"].upper()]
    assert counts
    assert all("LIMIT 5" in sql for sql in counts), counts
    few = operator.get(f"{ADMIN}message/", {"queue": "mail"}).content.decode()
    assert "2 messages" in few


def test_filters_and_searches_of_the_other_lists(operator, log):
    """Partitions and groups filter by queue; dead letters filter by queue
    and group and search an exact message id or transactionId."""
    parts = operator.get(f"{ADMIN}partition/", {"queue": "mail"}).content.decode()
    assert parts.count("field-last_offset") == 1
    groups = operator.get(f"{ADMIN}consumergroup/", {"queue": "mail"}).content.decode()
    assert "billing" not in groups
    assert "billing" in operator.get(f"{ADMIN}consumergroup/", {"queue": "orders"}).content.decode()
    mail = operator.get(f"{ADMIN}deadletter/", {"queue": "mail"}).content.decode()
    assert mail.count('class="action-select"') == 2
    dead = DeadLetter.objects.filter(queue__name="orders").first()
    assert dead is not None
    for term in (dead.message_id, dead.transaction_id):
        found = operator.get(f"{ADMIN}deadletter/", {"q": term}).content.decode()
        assert found.count('class="action-select"') == 1, term
    assert (
        operator.get(f"{ADMIN}deadletter/", {"q": dead.message_id[:8]}).content.decode().count('class="action-select"')
        == 0
    )
    by_group = operator.get(f"{ADMIN}deadletter/", {"group": "__QUEUE_MODE__"}).content.decode()
    assert by_group.count('class="action-select"') == 5
