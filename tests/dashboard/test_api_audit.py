"""API actions in the audit trail: the operator-type routes (deletes, seeks,
configures, dead-letter moves, group resets) leave an entry naming the
token (``jwt:<sub>`` for a JWT), shown on ``/audit/`` beside the
dashboard's own entries with its source; a refused call, or one that
changed nothing, leaves none (docs/security.md, "Audit trail")."""

from __future__ import annotations

import json
import time
from typing import Any

import jwt as pyjwt
import pytest
from django.db import transaction
from django.test import Client, override_settings

from queenadmin.domain import clock, queues, tokens
from queenadmin.domain.audit import Who
from queenadmin.models import AuditEntry, Message, Partition
from queenadmin.plumbing.db import json_text

pytestmark = pytest.mark.django_db

SECRET = "api-audit-tests-secret-of-at-least-thirty-two-bytes"
HS = {"QUEENADMIN_JWT_ENABLED": True, "QUEENADMIN_JWT_SECRET": SECRET}


def api(name: str, scope: str = "admin", grants: tuple[str, ...] = ()) -> Client:
    token = tokens.token_create(by=tokens.HOST, name=name, scope=scope, grants=grants)
    return Client(HTTP_AUTHORIZATION=f"Bearer {token}")


def post(client: Client, path: str, body: Any = None) -> Any:
    data = "" if body is None else json.dumps(body)
    return client.post(f"/api/v1{path}", data=data, content_type="application/json")


def push(queue: str, n: int = 1, partition: str = queues.DEFAULT_PARTITION) -> None:
    queues.queue_push(items=[queues.PushItem(queue, partition, json_text({"i": i})) for i in range(n)])


def claim(queue: str, **kw: Any) -> queues.Claim:
    return queues.queue_claim(request=queues.PopRequest(queue=queue, **kw))


def entries() -> list[tuple[str, str, str, str]]:
    return list(AuditEntry.objects.order_by("id").values_list("actor", "via", "action", "target"))


def test_a_queue_delete_through_a_token_shows_on_the_audit_page_with_its_name(client_for, operator):
    push("aud-orders", n=3)
    with transaction.atomic():
        Who("olga", "by hand").record_in_txn(now=clock.now(), action="timer.cancel", target="aud-orders/k")
    answer = api("ops-cleaner").delete("/api/v1/resources/queues/aud-orders")
    assert answer.status_code == 200, answer.content
    entry = AuditEntry.objects.get(via="api")
    assert (entry.actor, entry.action, entry.kind, entry.target) == (
        "ops-cleaner",
        "queue.delete",
        "queue",
        "aud-orders",
    )
    assert entry.before == "1 partitions, up to 3 messages, 0 consumer groups, 0 dead letters"
    client = client_for(operator)
    page = client.get("/audit/").content.decode()
    row = page.split(f'data-entry="{entry.pk}"')[1].split("</tr>")[0]
    assert "ops-cleaner" in row
    assert "queue.delete" in row
    assert "<td data-via>" in row
    assert ">api</a>" in row
    assert "olga" in page
    only_api = client.get("/audit/?via=api").content.decode()
    assert "ops-cleaner" in only_api
    assert "olga" not in only_api
    assert "ops-cleaner" not in client.get("/audit/?via=dashboard").content.decode()


def test_a_seek_and_a_configure_are_audited_once_per_change():
    client = api("deploy-bot")
    configure = {"queue": "aud-jobs", "options": {"leaseTime": 30}}
    assert post(client, "/configure", configure).status_code == 200
    # Clients configure at every start: the same settings again change nothing.
    assert post(client, "/configure", configure).status_code == 200
    assert post(client, "/configure", {"queue": "aud-jobs", "options": {"leaseTime": 90}}).status_code == 200
    made, changed = AuditEntry.objects.filter(action="queue.configure").order_by("id")
    assert (made.actor, made.via, made.target) == ("deploy-bot", "api", "aud-jobs")
    assert made.before == "(no queue: this configure made it)"
    assert '"leaseTime": 30' in made.after
    assert '"leaseTime": 30' in changed.before
    assert '"leaseTime": 90' in changed.after
    push("aud-jobs", n=4)
    claim("aud-jobs", group="billing", batch=1)
    answer = post(client, "/consumer-groups/billing/queues/aud-jobs/seek", {"toEnd": True})
    assert answer.status_code == 200, answer.content
    seek = AuditEntry.objects.get(action="queue.group_seek")
    assert (seek.actor, seek.via, seek.kind, seek.target) == ("deploy-bot", "api", "queue", "aud-jobs/billing")
    assert seek.after == "to the end, 1 partitions"
    assert AuditEntry.objects.count() == 3


@override_settings(**HS)
def test_a_jwt_names_its_sub():
    now = int(time.time())
    bearer = pyjwt.encode({"sub": "deployer", "role": "admin", "iat": now, "exp": now + 600}, SECRET, "HS256")
    push("aud-jwt")
    answer = Client(HTTP_AUTHORIZATION=f"Bearer {bearer}").delete("/api/v1/resources/queues/aud-jwt")
    assert answer.status_code == 200, answer.content
    assert entries() == [("jwt:deployer", "api", "queue.delete", "aud-jwt")]


def test_dead_letter_moves_message_deletes_and_group_actions_are_audited():
    client = api("console")
    push("aud-dlq", n=2)
    pid = Partition.objects.get(queue__name="aud-dlq").pk
    txids = list(Message.objects.filter(partition_id=pid).order_by("offset").values_list("transaction_id", flat=True))
    assert post(client, f"/messages/{pid}/{txids[0]}/dlq", {"error": "poison"}).status_code == 200
    assert post(client, f"/messages/{pid}/{txids[0]}/retry").status_code == 200
    assert client.delete(f"/api/v1/messages/{pid}/{txids[1]}").status_code == 200
    push("aud-groups", n=2, partition="p1")
    push("aud-groups", n=2, partition="p2")
    claim("aud-groups", partition="p1", group="late", batch=1)
    answer = post(client, "/consumer-groups/late/subscription", {"subscriptionTimestamp": clock.now().isoformat()})
    assert answer.status_code == 200, answer.content
    assert client.delete("/api/v1/consumer-groups/late/queues/aud-groups?deleteMetadata=false").status_code == 200
    assert client.delete("/api/v1/consumer-groups/late").status_code == 200
    assert [e[2:] for e in entries()] == [
        ("dlq.move", "aud-dlq"),
        ("dlq.retry", "aud-dlq"),
        ("queue.message_delete", "aud-dlq"),
        ("queue.group_resubscribe", "aud-groups/late"),
        ("queue.group_reset", "aud-groups/late"),
        ("queue.group_delete", "aud-groups/late"),
    ]
    assert {e[:2] for e in entries()} == {("console", "api")}


def test_ephemeral_configure_reset_and_delete_are_audited():
    client = api("presence-admin")
    declared = {"queue": "aud-typing", "options": {"maxLength": 100}}
    assert post(client, "/ephemeral/configure", declared).status_code == 201
    assert post(client, "/ephemeral/configure", declared).status_code == 201
    pushed = {"queue": "aud-typing", "partition": "room", "messages": [{"payload": {"u": 1}}]}
    assert post(client, "/ephemeral/push", pushed).status_code == 201
    assert post(client, "/ephemeral/reset", {"queue": "aud-typing"}).status_code == 200
    assert client.delete("/api/v1/ephemeral/queue/aud-typing").status_code == 200
    # A reset or delete of what is not there changes nothing.
    assert post(client, "/ephemeral/reset", {"queue": "aud-typing"}).status_code == 200
    assert client.delete("/api/v1/ephemeral/queue/aud-typing").status_code == 200
    assert [e[2:] for e in entries()] == [
        ("ephemeral.configure", "aud-typing"),
        ("ephemeral.reset", "aud-typing"),
        ("ephemeral.delete", "aud-typing"),
    ]
    assert AuditEntry.objects.get(action="ephemeral.reset").before == "1 messages"


def test_a_refused_call_or_one_that_changed_nothing_leaves_no_entry():
    push("aud-kept", n=2)
    claim("aud-kept", group="g", batch=1)
    pid = Partition.objects.get(queue__name="aud-kept").pk
    reader = api("reader", scope="read")
    elsewhere = api("other-team", grants=("queue:other.*=admin",))
    admin = api("admin-bot")
    refused = [
        (reader.delete("/api/v1/resources/queues/aud-kept"), 403),
        (elsewhere.delete("/api/v1/resources/queues/aud-kept"), 403),
        (post(reader, "/consumer-groups/g/queues/aud-kept/seek", {"toEnd": True}), 403),
        (post(elsewhere, "/configure", {"queue": "aud-kept", "options": {"leaseTime": 5}}), 403),
        (reader.delete(f"/api/v1/messages/{pid}/anything"), 403),
        (post(admin, f"/messages/{pid}/nope/retry"), 409),
        (post(admin, "/messages/999999/nope/retry"), 404),
        (post(admin, f"/messages/{pid}/nope/dlq"), 404),
        (Client().delete("/api/v1/resources/queues/aud-kept"), 401),
    ]
    assert [answer.status_code for answer, _ in refused] == [wanted for _, wanted in refused]
    # Answered, but nothing changed: a missing queue, an unknown group.
    assert admin.delete("/api/v1/resources/queues/aud-missing").status_code == 200
    assert post(admin, "/consumer-groups/nobody/queues/aud-kept/seek", {"toEnd": True}).status_code == 200
    assert admin.delete("/api/v1/consumer-groups/nobody/queues/aud-kept").status_code == 200
    assert admin.delete(f"/api/v1/messages/{pid}/nope").status_code == 200
    assert not AuditEntry.objects.exists()
