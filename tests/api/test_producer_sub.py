"""``producerSub``: a push stamps the caller's identity, and every read shows it.

The identity is a JWT's ``sub`` or our API token's name; a ``producerSub``
in the push body is ignored, and without an identity (open mode) it stays
null. Plain, batch, binary and transactional pushes, a timer's fire and a
stream's sink all stamp it; pops (JSON and framed), message reads and the
DLQ show it.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta
from typing import Any

import jwt as pyjwt
import pytest
from django.test import Client, override_settings
from queen.http.pop_frames import decode_pop_frames, is_pop_frames
from queen.http.push_binary import PushBatch, encode_push_binary

from queenadmin.domain import clock, timers, tokens

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("short_connections")]

SECRET = "producer-sub-tests-secret-of-at-least-thirty-two-bytes"
HS = {"QUEENADMIN_JWT_ENABLED": True, "QUEENADMIN_JWT_SECRET": SECRET}


def jwt_for(sub: str | None, role: str = "read-write") -> str:
    now = int(time.time())
    claims: dict[str, Any] = {"role": role, "iat": now, "exp": now + 600}
    if sub is not None:
        claims["sub"] = sub
    return pyjwt.encode(claims, SECRET, algorithm="HS256")


def client_of(bearer: str | None) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {bearer}") if bearer else Client()


def push(client: Client, queue: str, n: int = 1, **extra: Any) -> Any:
    items = [{"queue": queue, "partition": "p", "payload": {"n": i}, **extra} for i in range(n)]
    answer = client.post("/api/v1/push", data=json.dumps({"items": items}), content_type="application/json")
    assert answer.status_code == 201, answer.content
    return answer.json()


def pop(client: Client, queue: str, **params: str) -> list[dict[str, Any]]:
    query = "&".join(f"{k}={v}" for k, v in {"wait": "false", "batch": "50", **params}.items())
    answer = client.get(f"/api/v1/pop/queue/{queue}?{query}")
    assert answer.status_code in (200, 204), answer.content
    return answer.json()["messages"] if answer.status_code == 200 else []


def test_our_token_stamps_its_name_and_a_body_value_is_ignored():
    client = client_of(tokens.token_create(by=tokens.HOST, name="billing-service"))
    push(client, "ps-ours", producerSub="attacker")
    push(client, "ps-ours", n=3)
    messages = pop(client, "ps-ours")
    assert [m["producerSub"] for m in messages] == ["billing-service"] * 4


@override_settings(**HS)
def test_a_jwt_stamps_its_sub_in_plain_and_batch_pushes():
    writer = client_of(jwt_for("alice"))
    push(writer, "ps-jwt", producerSub="mallory")
    push(writer, "ps-jwt", n=5)
    messages = pop(writer, "ps-jwt")
    assert [m["producerSub"] for m in messages] == ["alice"] * 6
    # A JWT without sub: no identity to stamp.
    push(client_of(jwt_for(None)), "ps-jwt-nosub")
    assert [m["producerSub"] for m in pop(writer, "ps-jwt-nosub")] == [None]


@override_settings(**HS)
def test_write_only_pushes_and_a_reader_of_the_queue_sees_who():
    push(client_of(jwt_for("pusher", role="write-only")), "ps-wo")
    assert [m["producerSub"] for m in pop(client_of(jwt_for("consumer")), "ps-wo")] == ["pusher"]


@override_settings(QUEENADMIN_OPEN_API=True)
def test_without_an_identity_producer_sub_stays_null():
    """Open mode names nobody (Queen without JWT): a body value is ignored too."""
    push(Client(), "ps-open", producerSub="attacker-no-jwt")
    assert [m["producerSub"] for m in pop(Client(), "ps-open")] == [None]


@override_settings(QUEENADMIN_FRAMED_POP=True)
def test_a_binary_push_and_a_framed_pop_carry_it():
    client = client_of(tokens.token_create(by=tokens.HOST, name="framed-producer"))
    body = encode_push_binary([PushBatch("ps-bin", "p", [b'{"n":1}', b'{"n":2}'], None)])
    answer = client.post("/api/v1/push", data=body, content_type="application/x-queen-push")
    assert answer.status_code == 201, answer.content
    framed = client.get("/api/v1/pop/queue/ps-bin?wait=false&batch=10&frames=true&autoAck=true")
    assert framed.status_code == 200
    assert is_pop_frames(framed.content)
    assert [m["producerSub"] for m in decode_pop_frames(framed.content)["messages"]] == ["framed-producer"] * 2
    # Without a producer, no producer field in the frame.
    with override_settings(QUEENADMIN_OPEN_API=True, QUEENADMIN_FRAMED_POP=True):
        push(Client(), "ps-bin-open")
        anonymous = Client().get("/api/v1/pop/queue/ps-bin-open?wait=false&frames=true&autoAck=true")
    assert [m["producerSub"] for m in decode_pop_frames(anonymous.content)["messages"]] == [None]


def test_a_transaction_stamps_its_pushes():
    client = client_of(tokens.token_create(by=tokens.HOST, name="txn-producer"))
    body = {"operations": [{"type": "push", "items": [{"queue": "ps-txn", "partition": "p", "payload": {"a": 1}}]}]}
    answer = client.post("/api/v1/transaction", data=json.dumps(body), content_type="application/json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["success"] is True, answer.content
    assert [m["producerSub"] for m in pop(client, "ps-txn")] == ["txn-producer"]


def test_a_timer_fires_with_the_identity_of_whoever_scheduled_it():
    client = client_of(tokens.token_create(by=tokens.HOST, name="scheduler"))
    op = {"op": "schedule", "queue": "ps-timer", "timerKey": "k", "txn": "t", "delayMs": 1000, "payload": "e30="}
    answer = client.post("/api/v1/timers", data=json.dumps({"operations": [op]}), content_type="application/json")
    assert answer.status_code == 200, answer.content
    timers.timers_fire_due(now=clock.now() + timedelta(seconds=5))
    assert [m["producerSub"] for m in pop(client, "ps-timer")] == ["scheduler"]


def test_message_reads_and_the_dlq_show_it():
    client = client_of(tokens.token_create(by=tokens.HOST, name="reader-writer", scope="admin"))
    pushed = push(client, "ps-reads")[0]
    listed = client.get("/api/v1/messages?queue=ps-reads").json()
    assert [m["producerSub"] for m in listed["messages"]] == ["reader-writer"]
    partition_id = listed["messages"][0]["partitionId"]
    one = client.get(f"/api/v1/messages/{partition_id}/{pushed['transaction_id']}").json()
    assert one["producerSub"] == "reader-writer"
    moved = client.post(
        f"/api/v1/messages/{partition_id}/{pushed['transaction_id']}/dlq", data="{}", content_type="application/json"
    )
    assert moved.status_code == 200, moved.content
    dead = client.get("/api/v1/dlq?queue=ps-reads").json()["messages"]
    assert [d["producerSub"] for d in dead] == ["reader-writer"]
    # A retry keeps who pushed the message, not who retried it.
    other = client_of(tokens.token_create(by=tokens.HOST, name="operator-script", scope="admin"))
    retried = other.post(
        f"/api/v1/messages/{partition_id}/{pushed['transaction_id']}/retry", data="{}", content_type="application/json"
    )
    assert retried.status_code == 200, retried.content
    assert [m["producerSub"] for m in pop(client, "ps-reads")] == ["reader-writer"]
