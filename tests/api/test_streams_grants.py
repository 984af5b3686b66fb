"""A stream query is reached through its stored source and sink queues (issue 36, finding 1).

The registry finds a query by name, and a worker names it by id; either
way the call touches the query that is stored, so the grants are checked
against its stored queues as well as the ones the body names. A token
granted ``queue:orders.*`` cannot reset, re-point, read or cycle billing's
query: 403 in the auth envelope, showing nothing of the stored query (no
config hash, no id, no queue), and nothing changes. Through Django's test
client, on either database.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from queenadmin.domain import queues, tokens
from queenadmin.models import StreamQuery, StreamState

pytestmark = pytest.mark.django_db

SOURCE, SINK = "billing.src", "billing.sink"
NAME, HASH = "billing-agg", "cfg-billing-secret"


def client(**grant: str) -> Client:
    grants = [f"{kind}={scope}" for kind, scope in grant.items()]
    token = tokens.token_create(by=tokens.HOST, name=f"streams-{len(grants)}-{'-'.join(grant)}", grants=grants)
    return Client(HTTP_AUTHORIZATION=f"Bearer {token}")


def claim(queue: str) -> queues.Claim:
    """A pop of one message for group ``g`` (pops are async views: the domain's, in-process)."""
    return queues.queue_claim(request=queues.PopRequest(queue=queue, batch=1, group="g"))


def call(http: Client, method: str, path: str, body: Any) -> Any:
    return http.generic(method, path, json.dumps(body), content_type="application/json")


@pytest.fixture
def billing() -> dict[str, Any]:
    """billing's query with state on its source partition, made by a whole-store token."""
    owner = Client(HTTP_AUTHORIZATION=f"Bearer {tokens.token_create(by=tokens.HOST, name='streams-owner')}")
    items = [{"queue": SOURCE, "partition": "p", "payload": {"n": i}} for i in range(3)]
    assert call(owner, "POST", "/api/v1/push", {"items": items}).status_code == 201
    answer = call(
        owner,
        "POST",
        "/streams/v1/queries",
        {"name": NAME, "source_queue": SOURCE, "sink_queue": SINK, "config_hash": HASH},
    )
    assert answer.status_code == 200, answer.content
    query_id = answer.json()["query_id"]
    popped = claim(SOURCE)
    cycle = {
        "query_id": query_id,
        "partition_id": str(popped.partition_id),
        "consumer_group": "g",
        "state_ops": [{"type": "upsert", "key": "total", "value": {"sum": 41}}],
        "push_items": [{"queue": SINK, "partition": "p", "payload": {"sum": 41}}],
        "ack": {"transactionId": popped.messages[0].transaction_id, "leaseId": popped.lease_id, "count": 1},
    }
    assert call(owner, "POST", "/streams/v1/cycle", cycle).json()["success"] is True
    return {"owner": owner, "query_id": query_id, "partition_id": str(popped.partition_id)}


def stored() -> list[tuple[Any, ...]]:
    """Every query and state row, as stored."""
    return [
        *StreamQuery.objects.order_by("name").values_list("name", "source_queue", "sink_queue", "config_hash"),
        *StreamState.objects.order_by("pk").values_list("query_id", "partition_id", "key", "value_json"),
    ]


def refused_showing_nothing(answer: Any, query_id: str) -> None:
    assert answer.status_code == 403, answer.content
    body = answer.json()
    assert body["error"] == body["code"] == "forbidden", body
    text = answer.content.decode()
    for detail in (SOURCE, SINK, HASH, query_id, "billing."):
        assert detail not in text, (detail, body)


def test_a_token_granted_orders_cannot_reset_another_services_query(billing):
    """A write token granted orders.* that registers billing's query name
    with reset and its own queues: 403, billing's state and queues stay."""
    attacker = client(**{"queue:orders.*": "write"})
    before = stored()
    body = {"name": NAME, "source_queue": "orders.src", "sink_queue": "orders.sink", "config_hash": "x", "reset": True}
    refused_showing_nothing(call(attacker, "POST", "/streams/v1/queries", body), billing["query_id"])
    assert stored() == before
    # billing's own query still reads its state.
    state = {"query_id": billing["query_id"], "partition_id": billing["partition_id"]}
    rows = call(billing["owner"], "POST", "/streams/v1/state/get", state).json()["rows"]
    assert [(r["key"], r["value"]) for r in rows] == [("total", {"sum": 41})]


def test_a_token_granted_orders_learns_no_hash_and_cannot_re_point_with_it(billing):
    """Without reset the answer shows no stored hash; the stored hash sent back
    (or the same queues) re-points nothing: 403 each time."""
    attacker = client(**{"queue:orders.*": "write"})
    before = stored()
    for body in (
        {"name": NAME, "source_queue": "orders.src", "config_hash": "x"},
        {"name": NAME, "source_queue": "orders.src", "sink_queue": "orders.sink", "config_hash": HASH},
        {"name": NAME, "source_queue": "orders.src", "config_hash": HASH, "reset": True},
    ):
        refused_showing_nothing(call(attacker, "POST", "/streams/v1/queries", body), billing["query_id"])
    assert stored() == before


def test_a_token_granted_the_source_only_cannot_re_point_the_sink(billing):
    """The stored sink is touched as much as the source: write on both is needed."""
    half = client(**{f"queue:{SOURCE}": "write", "queue:orders.*": "write"})
    before = stored()
    body = {"name": NAME, "source_queue": SOURCE, "sink_queue": "orders.sink", "config_hash": HASH}
    answer = call(half, "POST", "/streams/v1/queries", body)
    assert answer.status_code == 403, answer.content
    assert HASH not in answer.content.decode()
    assert stored() == before


def test_state_and_cycles_are_checked_against_the_stored_querys_queues(billing):
    """billing's query id with an orders partition: the state read and the
    cycle are refused, and no state row is written on orders' partition."""
    attacker = client(**{"queue:orders.*": "write"})
    assert call(attacker, "POST", "/api/v1/push", {"items": [{"queue": "orders.src", "payload": 1}]}).status_code == 201
    mine = str(claim("orders.src").partition_id)
    before = stored()
    state = {"query_id": billing["query_id"], "partition_id": mine}
    refused_showing_nothing(call(attacker, "POST", "/streams/v1/state/get", state), billing["query_id"])
    cycle = {**state, "consumer_group": "g", "state_ops": [{"type": "upsert", "key": "total", "value": {"sum": 0}}]}
    refused_showing_nothing(call(attacker, "POST", "/streams/v1/cycle", cycle), billing["query_id"])
    assert stored() == before


def test_the_owner_and_a_token_granted_both_queues_still_register_and_reset(billing):
    """A token whose grants cover the stored source and sink meets the query as before."""
    worker = client(**{"queue:billing.*": "write"})
    same = {"name": NAME, "source_queue": SOURCE, "sink_queue": SINK, "config_hash": HASH}
    answer = call(worker, "POST", "/streams/v1/queries", same)
    assert (answer.status_code, answer.json()["fresh"]) == (200, False), answer.content
    conflict = call(worker, "POST", "/streams/v1/queries", {**same, "config_hash": "new"})
    assert conflict.status_code == 409
    assert HASH in conflict.json()["error"]
    reset = call(worker, "POST", "/streams/v1/queries", {**same, "config_hash": "new", "reset": True})
    assert (reset.status_code, reset.json()["reset"]) == (200, True), reset.content
    assert not StreamState.objects.exists()
    state = {"query_id": billing["query_id"], "partition_id": billing["partition_id"]}
    assert call(worker, "POST", "/streams/v1/state/get", state).json()["rows"] == []
