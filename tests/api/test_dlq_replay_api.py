"""``POST /api/v1/dlq/{id}/replay``, Queen's DLQ replay: its answers (a
second replay is a duplicate of the first one's copy), each bad input's
refusal, its scope and grants (the dead letter's queue and the
destination), and its audit entry. In process, on both databases."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
import time_machine
from django.test import Client

from queenadmin.domain import tokens
from queenadmin.models import AuditEntry, DeadLetter, Message, Queue, TokenScope
from tests.dashboard_ops.conftest import ack, claim, configure, push

pytestmark = pytest.mark.django_db

GONE = {"success": False, "result": "gone", "error": "Message not found", "code": "gone"}


def client(scope: TokenScope = TokenScope.WRITE, grants: list[str] | None = None, name: str = "replayer") -> Client:
    secret = tokens.token_create(by=tokens.HOST, name=name, scope=scope, grants=grants or [])
    return Client(HTTP_AUTHORIZATION=f"Bearer {secret}")


def replay(http: Client, dead_id: int | str, body: Any = None, raw: str | None = None) -> Any:
    data = raw if raw is not None else ("" if body is None else json.dumps(body))
    return http.post(f"/api/v1/dlq/{dead_id}/replay", data, content_type="application/json")


def dead_letter(queue: str = "orders.a", group: str = "billing") -> DeadLetter:
    push(queue, 1, payload={"order": 7})
    ack(claim(queue, group=group), "dlq", "card declined 4711")
    return DeadLetter.objects.get(queue__name=queue)


def in_queue(queue: str, dead_id: int) -> int:
    return Message.objects.filter(partition__queue__name=queue, transaction_id=f"dlq:{dead_id}").count()


def test_a_replay_into_its_own_queue_answers_as_queen_does():
    dead = dead_letter()
    answer = replay(client(), dead.pk)
    assert answer.status_code == 200, answer.content
    body = answer.json()
    copy = Message.objects.get(transaction_id=f"dlq:{dead.pk}")
    assert body == {
        "success": True,
        "result": "moved",
        "queue": "orders.a",
        "partition": "Default",
        "consumerGroup": "billing",
        "dlqId": str(dead.pk),
        "originalTransactionId": dead.transaction_id,
        "replayedAs": {
            "index": 0,
            "message_id": copy.message_id,
            "transaction_id": f"dlq:{dead.pk}",
            "queueName": "orders.a",
            "status": "queued",
            "offset": 1,
        },
        "dlqRowRemoved": True,
    }
    assert not DeadLetter.objects.exists()


def test_into_another_queue_then_again_is_a_duplicate_and_leaves_one_message():
    """The second call answers 200 ``duplicate`` with the first one's copy
    (the same ``replayedAs`` but its status, as a push of that
    transactionId answers), ``dlqRowRemoved: false``: one message in the
    destination, and no audit entry for the call that did nothing."""
    dead = dead_letter()
    http = client()
    first = replay(http, dead.pk, {"queue": "orders.retry", "partition": "p2", "reason": "card fixed"})
    assert first.status_code == 200, first.content
    assert (first.json()["result"], first.json()["queue"], first.json()["partition"]) == ("moved", "orders.retry", "p2")
    again = replay(http, dead.pk, {"queue": "orders.retry", "partition": "p2"})
    assert again.status_code == 200, again.content
    expected = {
        **first.json(),
        "result": "duplicate",
        "replayedAs": {**first.json()["replayedAs"], "status": "duplicate"},
        "dlqRowRemoved": False,
    }
    assert again.json() == expected
    assert in_queue("orders.retry", dead.pk) == 1
    listed = http.get("/api/v1/dlq", {"queue": "orders.a"}).json()
    assert listed["total"] == 0
    assert AuditEntry.objects.count() == 1


def test_again_into_a_third_queue_is_the_duplicate_of_where_it_went():
    """A second call naming another destination answers where the copy
    already went; nothing is pushed to the queue it names."""
    dead = dead_letter()
    http = client()
    first = replay(http, dead.pk, {"queue": "orders.retry"}).json()
    again = replay(http, dead.pk, {"queue": "orders.third", "partition": "p3"})
    assert again.status_code == 200, again.content
    body = again.json()
    assert (body["result"], body["queue"], body["partition"]) == ("duplicate", "orders.retry", "Default")
    assert body["replayedAs"] == {**first["replayedAs"], "status": "duplicate"}
    assert in_queue("orders.retry", dead.pk) == 1
    assert in_queue("orders.third", dead.pk) == 0
    assert not Queue.objects.filter(name="orders.third").exists()
    # Its own queue: the same answer.
    assert replay(http, dead.pk).json() == body


def test_a_record_past_its_age_answers_gone(settings):
    settings.QUEENADMIN_DLQ_REPLAY_KEEP_SECONDS = 60
    dead = dead_letter()
    http = client()
    with time_machine.travel(datetime(2026, 12, 6, 12, 0, tzinfo=UTC), tick=False) as traveller:
        assert replay(http, dead.pk, {"queue": "orders.retry"}).json()["result"] == "moved"
        traveller.shift(61)
        answer = replay(http, dead.pk, {"queue": "orders.retry"})
    assert (answer.status_code, answer.json()) == (404, GONE)
    assert in_queue("orders.retry", dead.pk) == 1


def test_a_copy_already_there_is_a_duplicate_and_the_dead_letter_stays():
    dead = dead_letter()
    http = client()
    pushed = http.post(
        "/api/v1/push",
        {"items": [{"queue": "orders.retry", "payload": 1, "transactionId": f"dlq:{dead.pk}"}]},
        content_type="application/json",
    )
    assert pushed.status_code == 201
    answer = replay(http, dead.pk, {"queue": "orders.retry"})
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert (body["result"], body["dlqRowRemoved"], body["replayedAs"]["status"]) == ("duplicate", False, "duplicate")
    assert body["replayedAs"]["message_id"] == pushed.json()[0]["message_id"]
    assert in_queue("orders.retry", dead.pk) == 1
    assert DeadLetter.objects.filter(pk=dead.pk).exists()
    assert http.get("/api/v1/dlq", {"queue": "orders.a"}).json()["total"] == 1


@pytest.mark.parametrize("dead_id", ["424242", "0", "abc", "1e3", "0198f3aa-7b21-7c9d-8e14-5b7c9d0a1f22", "9" * 30])
def test_an_unknown_or_malformed_id_is_gone(dead_id):
    """Any id that names no dead letter, a uuid (Queen's ids) included: 404 gone."""
    dead_letter()
    answer = replay(client(), dead_id)
    assert (answer.status_code, answer.json()) == (404, GONE)
    assert DeadLetter.objects.count() == 1


#: Each bad body and its answer; nothing is replayed.
BAD_BODIES: list[tuple[str, int, str, str]] = [
    ("[]", 400, "the body must be a JSON object", "bad_request"),
    ('"orders"', 400, "the body must be a JSON object", "bad_request"),
    ("{", 400, "the request body is not valid JSON", "bad_request"),
    ('{"queue": ""}', 400, "queue must be a non-empty string", "bad_request"),
    ('{"queue": 5}', 400, "queue must be a non-empty string", "bad_request"),
    ('{"queue": null, "partition": ""}', 400, "partition must be a non-empty string", "bad_request"),
    ('{"partition": ["p"]}', 400, "partition must be a non-empty string", "bad_request"),
    ('{"queue": "a\\nb"}', 400, "queue must not contain control characters", "bad_request"),
    ('{"queue": "a\\u0000b"}', 400, "queue must not contain NUL", "bad_request"),
    ('{"reason": 5}', 400, "reason must be a string", "bad_request"),
    ('{"reason": "a\\u0000b"}', 400, "reason must not contain NUL", "bad_request"),
    (json.dumps({"queue": "q" * 600}), 413, "queue is over 511 bytes", "name_too_long"),
    (json.dumps({"partition": "p" * 600}), 413, "partition is over 511 bytes", "name_too_long"),
]


@pytest.mark.parametrize(("raw", "status", "error", "code"), BAD_BODIES)
def test_a_bad_body_is_refused_in_the_envelope(raw, status, error, code):
    dead = dead_letter()
    answer = replay(client(), dead.pk, raw=raw)
    assert answer.status_code == status, answer.content
    body = answer.json()
    assert set(body) == {"error", "code"}
    assert body["code"] == code
    assert body["error"] == error, body
    assert DeadLetter.objects.filter(pk=dead.pk).exists()
    assert not AuditEntry.objects.exists()


def test_no_body_and_null_replay_into_its_own_queue():
    for raw in ("", "null"):
        dead = dead_letter(f"orders.{len(raw)}")
        answer = replay(client(name=f"t{len(raw)}"), dead.pk, raw=raw)
        assert (answer.status_code, answer.json()["queue"]) == (200, f"orders.{len(raw)}")


def test_a_read_token_is_refused():
    dead = dead_letter()
    answer = replay(client(TokenScope.READ), dead.pk)
    assert (answer.status_code, answer.json()) == (
        403,
        {"error": "forbidden", "code": "forbidden", "detail": "this token's scope is read; the call needs write"},
    )
    assert DeadLetter.objects.exists()


def test_grants_cover_the_dead_letters_queue_and_the_destination():
    """A token granted orders.* replays an orders dead letter within orders,
    and is refused (403, nothing changed) into billing, and for billing's
    dead letter whatever the destination."""
    ours = dead_letter("orders.a")
    theirs = dead_letter("billing.a")
    http = client(grants=["queue:orders.*=write"])
    refusal = "no grant of this token gives write on"
    for dead_id, body in ((ours.pk, {"queue": "billing.x"}), (theirs.pk, None), (theirs.pk, {"queue": "orders.b"})):
        answer = replay(http, dead_id, body)
        assert answer.status_code == 403, answer.content
        assert answer.json()["detail"].startswith(refusal)
        # The refusal for a dead letter names no queue it found.
        assert "billing.a" not in answer.json()["detail"]
    assert DeadLetter.objects.count() == 2
    assert not Message.objects.filter(transaction_id__startswith="dlq:").exists()
    assert not AuditEntry.objects.exists()
    answer = replay(http, ours.pk, {"queue": "orders.b"})
    assert (answer.status_code, answer.json()["queue"]) == (200, "orders.b")


def test_a_duplicate_answer_needs_the_grants_its_replay_needed():
    """A replayed dead letter's record names where its copy went: a token
    limited to orders.* gets the duplicate of one that went within orders,
    403 for one an unlimited token sent to billing (the refusal names no
    queue), and 403 from a billing token for orders' dead letter. The
    destination the call names is checked as for a first replay."""
    within = dead_letter("orders.a")
    away = dead_letter("orders.b")
    replay(client(name="root"), within.pk, {"queue": "orders.retry"})
    replay(client(name="root2"), away.pk, {"queue": "billing.x"})
    orders = client(grants=["queue:orders.*=write"], name="orders")
    assert replay(orders, within.pk).json()["result"] == "duplicate"
    refused = replay(orders, away.pk)
    assert refused.status_code == 403, refused.content
    assert refused.json()["detail"] == (
        "no grant of this token gives write on the queue the dead letter named was replayed into"
    )
    billing = client(grants=["queue:billing.*=write"], name="billing")
    refused = replay(billing, away.pk)
    assert refused.status_code == 403, refused.content
    assert refused.json()["detail"] == "no grant of this token gives write on the queue of the dead letter named"
    named = replay(orders, within.pk, {"queue": "billing.y"})
    assert named.status_code == 403, named.content
    assert not Queue.objects.filter(name="billing.y").exists()
    assert Message.objects.filter(transaction_id__startswith="dlq:").count() == 2
    assert AuditEntry.objects.count() == 2


def test_the_replay_is_audited_with_the_token_and_the_reason():
    dead = dead_letter()
    replay(client(name="ci-redrive"), dead.pk, {"queue": "orders.retry", "reason": "card fixed"})
    entry = AuditEntry.objects.get()
    assert (entry.actor, entry.via, entry.action, entry.target, entry.reason) == (
        "ci-redrive",
        "api",
        "dlq.replay",
        "orders.a",
        "card fixed",
    )
    assert f"dead letter {dead.pk} of group billing" in entry.before
    assert "appended to orders.retry/Default" in entry.after


def test_a_full_destination_is_refused_409_and_nothing_moves():
    dead = dead_letter()
    configure("orders.full", maxSize=1)
    push("orders.full", 1)
    answer = replay(client(), dead.pk, {"queue": "orders.full"})
    assert (answer.status_code, answer.json()) == (
        409,
        {"error": "Queue 'orders.full' would exceed max capacity (1). Current: 1, Batch: 1", "code": "queue_full"},
    )
    assert DeadLetter.objects.filter(pk=dead.pk).exists()
    assert in_queue("orders.full", dead.pk) == 0
    assert not AuditEntry.objects.exists()
