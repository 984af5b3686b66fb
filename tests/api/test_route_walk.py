"""The route walk (issue 36): every route of ``routes.ROUTES`` with a token
granted one prefix, against resources outside it.

A whole-store token first stores billing's side of every kind: a queue
``billing.x`` with messages, a consumer group holding a lease, traces, a
dead letter, a KV key, a held lock, a timer, a stream query with state, an
ephemeral queue with a message, and a replica's process samples. Then each
route is called by a token granted only ``orders.*`` of each kind (write
scope, or admin scope for the admin routes, so the scope never refuses),
naming billing's resources. What the answer must be comes from the route's
row alone: ``named`` and ``store-wide`` answer 403 from the grants, the
others 200; every answer changes no row of the store, and its body shows
nothing stored of billing's that the request did not name itself (no
value, payload, owner, lease, hash, id, host or name).

The table here must have a case for every route and aim at every kind of
resource its row says it touches, so a route added without a case fails
the walk. Failures are gathered over the whole walk and reported together.
Through Django's test client. Pops are async views: their bearer check
and claim run on the database threads (``api/dbthreads.py``), which see
only committed rows, so the walk commits (``transaction=True``) and closes
those threads' connections at the end.
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

import pytest
from django.apps import apps
from django.db import connections, transaction
from django.test import Client

from queenadmin.api import dbthreads, routes
from queenadmin.conf import settings
from queenadmin.domain import clock, procmetrics, queues, tokens
from queenadmin.domain.audit import Who
from queenadmin.domain.procmetrics.store.base import SampleRow
from queenadmin.domain.queues import operator as queue_operator
from queenadmin.models import DeadLetter, TokenScope

Q, SINK, EPH, NS, PARTITION = "billing.x", "billing.sink", "billing.eph", "nsbilling", "pbilling"
GROUP, LOCK, TIMER_KEY, TRACE_NAME, QUERY, HASH = (
    "gbilling",
    "billing.lock",
    "timer-billing",
    "tn-billing",
    "billing-agg",
    "cfg-billing-secret",
)
KV_KEY, STATE_KEY, OWNER, HOST = "kbilling", "state-billing-key", "owner-billing", "host-billing-secret"
#: Values stored in billing's rows: an answer to the limited token shows none.
SECRETS = (
    "msg-billing-secret",
    "trace-billing-secret",
    "kv-billing-secret",
    "state-billing-secret",
    "eph-billing-secret",
    "dead-billing-secret",
    "dead-billing-payload",
    "dead-billing-tx",
    "tx-billing-timer",
)

#: ``filtered`` routes whose answers name no resource (counts per time
#: bucket): the whole-store token's shows nothing of billing's either.
NAMES_NOTHING = frozenset({"GET /status/analytics"})


@dataclass(frozen=True)
class World:
    """What the whole-store token stored of billing's (and one orders partition)."""

    pid: str
    opid: str
    lease: str
    query_id: str
    #: Every stored detail of billing's an answer must not show.
    stored: tuple[str, ...]
    #: The id of billing's dead letter.
    did: str = ""
    #: The id of billing's dead letter replayed already (its record).
    replayed: str = ""


Call = tuple[str, str, dict[str, Any] | None, Any]
#: A case: the kinds of resource it aims at, the call (given the world) and,
#: for a ``named`` route that lists where it is not named, ``filtered``.
Case = tuple[Any, ...]


def listing(case: Case) -> Case:
    """A case of a ``named`` route that names no resource of the kind it
    lists (``/resources/kv/list`` of ``queen-locks``: every lock): filtered."""
    return (*case, routes.FILTERED)


def fill(value: Any, w: World) -> Any:
    text = json.dumps(value)
    for name, real in (
        ("{pid}", w.pid),
        ("{opid}", w.opid),
        ("{lease}", w.lease),
        ("{qid}", w.query_id),
        ("{did}", w.did),
        ("{replayed}", w.replayed),
    ):
        text = text.replace(name, real)
    return json.loads(text)


def req(method: str, path: str, *, params: dict[str, Any] | None = None, body: Any = None) -> Callable[[World], Call]:
    return lambda w: (method, fill(path, w), fill(params, w), fill(body, w))


def schedule(queue: str, key: str) -> dict[str, Any]:
    payload = base64.b64encode(json.dumps({"a": 1}).encode()).decode()
    return {
        "op": "schedule",
        "queue": queue,
        "timerKey": key,
        "delayMs": 3_600_000,
        "txn": "tx-billing-timer",
        "payload": payload,
    }


ACK = {
    "transactionId": "txn-billing-0",
    "partitionId": "{pid}",
    "status": "completed",
    "consumerGroup": GROUP,
    "leaseId": "{lease}",
}
KV, LOCKK, QUEUE, TIMER = ("kv",), ("lock",), ("queue",), ("timer",)


def kvop(**op: Any) -> Case:
    return KV, req("POST", "/api/v1/kv", body=[{"ns": Q, **op}])


def txn(kinds: tuple[str, ...], **body: Any) -> Case:
    return kinds, req("POST", "/api/v1/transaction", body={"operations": [], "requiredLeases": [], **body})


def stream(path: str, **body: Any) -> Case:
    return QUEUE, req("POST", f"/streams/v1/{path}", body=body)


#: Route -> its cases. Paths are the API's (``/api/v1``, or the streams' own).
TABLE: dict[str, list[Case]] = {
    "POST /kv": [
        kvop(op="get", key=KV_KEY),
        kvop(op="getMany", keys=[KV_KEY]),
        kvop(op="getPrefix", prefix="k"),
        kvop(op="check", key=KV_KEY, expect=1),
        kvop(op="put", key=KV_KEY, value=1, forever=True),
        kvop(op="delete", key=KV_KEY),
        kvop(op="incr", key="n", delta=1, forever=True),
        (LOCKK, req("POST", "/api/v1/kv", body=[{"op": "get", "ns": "queen-locks", "key": f"{LOCK}#0"}])),
        (
            LOCKK,
            req(
                "POST",
                "/api/v1/kv",
                body=[{"op": "put", "ns": "queen-locks", "key": f"{LOCK}#0", "value": 1, "forever": True}],
            ),
        ),
        (LOCKK, req("POST", "/api/v1/kv", body=[{"op": "getPrefix", "ns": "queen-locks", "prefix": "billing"}])),
    ],
    "GET /kv/{ns}/{path:key}": [
        (KV, req("GET", f"/api/v1/kv/{Q}/{KV_KEY}")),
        (LOCKK, req("GET", f"/api/v1/kv/queen-locks/{LOCK}%230")),
    ],
    "PUT /kv/{ns}/{path:key}": [
        (KV, req("PUT", f"/api/v1/kv/{Q}/{KV_KEY}", body={"value": 2, "forever": True})),
        (LOCKK, req("PUT", f"/api/v1/kv/queen-locks/{LOCK}%230", body={"value": 2, "forever": True})),
    ],
    "DELETE /kv/{ns}/{path:key}": [
        (KV, req("DELETE", f"/api/v1/kv/{Q}/{KV_KEY}")),
        (LOCKK, req("DELETE", f"/api/v1/kv/queen-locks/{LOCK}%230")),
    ],
    "GET /resources/kv/namespaces": [(KV, req("GET", "/api/v1/resources/kv/namespaces"))],
    "GET /history/kv/{ns}/{path:key}": [(KV, req("GET", f"/api/v1/history/kv/{Q}/{KV_KEY}"))],
    "GET /history/locks/{path:name}": [(LOCKK, req("GET", f"/api/v1/history/locks/{LOCK}"))],
    "POST /resources/kv/list": [
        (KV, req("POST", "/api/v1/resources/kv/list", body={"namespace": Q})),
        listing((LOCKK, req("POST", "/api/v1/resources/kv/list", body={"namespace": "queen-locks"}))),
        listing(
            (LOCKK, req("POST", "/api/v1/resources/kv/list", body={"namespace": "queen-locks", "prefix": "billing"}))
        ),
    ],
    "POST /locks": [
        (LOCKK, req("POST", "/api/v1/locks", body=[{"op": "get", "name": LOCK}])),
        (LOCKK, req("POST", "/api/v1/locks", body=[{"op": "acquire", "name": LOCK, "ttlSeconds": 30}])),
        (LOCKK, req("POST", "/api/v1/locks", body=[{"op": "renew", "name": LOCK, "token": 1, "ttlSeconds": 30}])),
        (LOCKK, req("POST", "/api/v1/locks", body=[{"op": "release", "name": LOCK, "token": 1}])),
    ],
    "POST /timers": [
        (TIMER, req("POST", "/api/v1/timers", body=[schedule(Q, "k2")])),
        (TIMER, req("POST", "/api/v1/timers", body=[{"op": "cancel", "queue": Q, "timerKey": TIMER_KEY}])),
        # The timer's own queue is orders', the queue it fires into is not.
        (QUEUE, req("POST", "/api/v1/timers", body=[{**schedule("orders.t", "k2"), "queue": Q}])),
    ],
    "DELETE /timers/{queue}/{path:timer_key}": [(TIMER, req("DELETE", f"/api/v1/timers/{Q}/{TIMER_KEY}"))],
    "GET /timers/{queue}/{path:timer_key}": [(TIMER, req("GET", f"/api/v1/timers/{Q}/{TIMER_KEY}"))],
    "GET /timers/{queue}": [
        (TIMER, req("GET", f"/api/v1/timers/{Q}")),
        (TIMER, req("GET", f"/api/v1/timers/{Q}", params={"mode": "count"})),
    ],
    "POST /transaction": [
        txn(QUEUE, operations=[{"type": "ack", **ACK}], requiredLeases=["{lease}"]),
        txn(QUEUE, operations=[{"type": "push", "items": [{"queue": Q, "payload": 1}]}]),
        txn(KV, kv=[{"op": "put", "ns": Q, "key": KV_KEY, "value": 1, "forever": True}]),
        txn(LOCKK, kv=[{"op": "check", "ns": "queen-locks", "key": f"{LOCK}#0", "expect": 1}]),
        txn(TIMER, timers=[schedule(Q, "k3")]),
        txn(QUEUE, positions=[{"queue": Q, "consumerGroup": GROUP, "partition": PARTITION, "offset": 3}]),
    ],
    "POST /configure": [(QUEUE, req("POST", "/api/v1/configure", body={"queue": Q}))],
    "POST /push": [(QUEUE, req("POST", "/api/v1/push", body={"items": [{"queue": Q, "payload": 1}]}))],
    "GET /pop/queue/{queue}": [(QUEUE, req("GET", f"/api/v1/pop/queue/{Q}", params={"wait": "false"}))],
    "GET /pop/queue/{queue}/partition/{partition}": [
        (QUEUE, req("GET", f"/api/v1/pop/queue/{Q}/partition/{PARTITION}", params={"wait": "false"}))
    ],
    "GET /pop": [(QUEUE, req("GET", "/api/v1/pop", params={"namespace": NS, "wait": "false"}))],
    "POST /ack": [(QUEUE, req("POST", "/api/v1/ack", body=ACK))],
    "POST /ack/batch": [(QUEUE, req("POST", "/api/v1/ack/batch", body={"acknowledgments": [ACK]}))],
    "POST /lease/{lease_id}/extend": [(QUEUE, req("POST", "/api/v1/lease/{lease}/extend", body={"seconds": 30}))],
    "GET /resources/queues": [
        (QUEUE, req("GET", "/api/v1/resources/queues")),
        (QUEUE, req("GET", "/api/v1/resources/queues", params={"stats": "lanes"})),
    ],
    "GET /resources/queues/{path:queue}": [(QUEUE, req("GET", f"/api/v1/resources/queues/{Q}"))],
    "GET /resources/queues/{queue}/depth": [(QUEUE, req("GET", f"/api/v1/resources/queues/{Q}/depth"))],
    "DELETE /resources/queues/{path:queue}": [(QUEUE, req("DELETE", f"/api/v1/resources/queues/{Q}"))],
    "POST /resources/queues/{queue}/pause": [(QUEUE, req("POST", f"/api/v1/resources/queues/{Q}/pause"))],
    "POST /resources/queues/{queue}/resume": [(QUEUE, req("POST", f"/api/v1/resources/queues/{Q}/resume"))],
    "POST /consumer-groups/{group}/queues/{queue}/pause": [
        (QUEUE, req("POST", f"/api/v1/consumer-groups/{GROUP}/queues/{Q}/pause", body={"reason": "walk"}))
    ],
    "POST /consumer-groups/{group}/queues/{queue}/resume": [
        (QUEUE, req("POST", f"/api/v1/consumer-groups/{GROUP}/queues/{Q}/resume"))
    ],
    "GET /resources/overview": [(QUEUE, req("GET", "/api/v1/resources/overview"))],
    "GET /dlq": [(QUEUE, req("GET", "/api/v1/dlq")), (QUEUE, req("GET", "/api/v1/dlq", params={"queue": Q}))],
    "GET /status": [
        (QUEUE, req("GET", "/api/v1/status")),
        (QUEUE, req("GET", "/api/v1/status", params={"queue": Q})),
        (QUEUE, req("GET", "/api/v1/status", params={"namespace": NS})),
    ],
    "GET /status/queues": [
        (QUEUE, req("GET", "/api/v1/status/queues")),
        (QUEUE, req("GET", "/api/v1/status/queues", params={"namespace": NS})),
    ],
    "GET /status/queues/{name}": [(QUEUE, req("GET", f"/api/v1/status/queues/{Q}"))],
    "GET /status/analytics": [
        (QUEUE, req("GET", "/api/v1/status/analytics")),
        (QUEUE, req("GET", "/api/v1/status/analytics", params={"queue": Q})),
    ],
    "POST /stats/refresh": [(QUEUE, req("POST", "/api/v1/stats/refresh"))],
    # Every replica's hostname and pid: store-wide, as worker-metrics.
    "GET /analytics/system-metrics": [(QUEUE, req("GET", "/api/v1/analytics/system-metrics"))],
    "GET /analytics/worker-metrics": [(QUEUE, req("GET", "/api/v1/analytics/worker-metrics"))],
    "POST /fetch": [(QUEUE, req("POST", "/api/v1/fetch", body={"entries": [{"queue": Q, "partition": PARTITION}]}))],
    "POST /partitions/changed": [(QUEUE, req("POST", "/api/v1/partitions/changed", body={"entries": [{"queue": Q}]}))],
    "GET /consumer-groups": [(QUEUE, req("GET", "/api/v1/consumer-groups"))],
    "GET /consumer-groups/lagging": [
        (QUEUE, req("GET", "/api/v1/consumer-groups/lagging", params={"minLagSeconds": 0}))
    ],
    "GET /consumer-groups/{path:group}": [(QUEUE, req("GET", f"/api/v1/consumer-groups/{GROUP}"))],
    "DELETE /consumer-groups/{path:group}": [(QUEUE, req("DELETE", f"/api/v1/consumer-groups/{GROUP}"))],
    "POST /consumer-groups/{group}/subscription": [
        (
            QUEUE,
            req(
                "POST",
                f"/api/v1/consumer-groups/{GROUP}/subscription",
                body={"subscriptionTimestamp": "2000-01-01T00:00:00Z"},
            ),
        )
    ],
    "DELETE /consumer-groups/{group}/queues/{path:queue}": [
        (QUEUE, req("DELETE", f"/api/v1/consumer-groups/{GROUP}/queues/{Q}"))
    ],
    "POST /consumer-groups/{group}/queues/{queue}/seek": [
        (QUEUE, req("POST", f"/api/v1/consumer-groups/{GROUP}/queues/{Q}/seek", body={"toEnd": True}))
    ],
    "POST /traces": [
        (
            QUEUE,
            req("POST", "/api/v1/traces", body={"transactionId": "txn-billing-0", "partitionId": "{pid}", "data": {}}),
        )
    ],
    "GET /traces/names": [(QUEUE, req("GET", "/api/v1/traces/names"))],
    "GET /traces/by-name/{path:name}": [(QUEUE, req("GET", f"/api/v1/traces/by-name/{TRACE_NAME}"))],
    "GET /traces/{partition_id}/{transaction_id}": [(QUEUE, req("GET", "/api/v1/traces/{pid}/txn-billing-0"))],
    "GET /resources/namespaces": [(QUEUE, req("GET", "/api/v1/resources/namespaces"))],
    "GET /resources/tasks": [(QUEUE, req("GET", "/api/v1/resources/tasks"))],
    "GET /resources/partitions": [
        (QUEUE, req("GET", "/api/v1/resources/partitions")),
        (QUEUE, req("GET", "/api/v1/resources/partitions", params={"queue": Q})),
    ],
    "GET /messages": [
        (QUEUE, req("GET", "/api/v1/messages")),
        (QUEUE, req("GET", "/api/v1/messages", params={"queue": Q})),
        (QUEUE, req("GET", "/api/v1/messages", params={"namespace": NS})),
    ],
    "GET /messages/{partition_id}/{transaction_id}": [(QUEUE, req("GET", "/api/v1/messages/{pid}/txn-billing-1"))],
    "DELETE /messages/{partition_id}/{transaction_id}": [
        (QUEUE, req("DELETE", "/api/v1/messages/{pid}/txn-billing-1"))
    ],
    "POST /messages/{partition_id}/{transaction_id}/retry": [
        (QUEUE, req("POST", "/api/v1/messages/{pid}/txn-billing-1/retry"))
    ],
    "POST /messages/{partition_id}/{transaction_id}/dlq": [
        (QUEUE, req("POST", "/api/v1/messages/{pid}/txn-billing-1/dlq", body={"consumerGroup": GROUP}))
    ],
    # Billing's dead letter (its stored queue), into its own queue or
    # orders'; billing's replayed one (its record's queues); a dead letter
    # of no queue into billing (the destination).
    "POST /dlq/{id}/replay": [
        (QUEUE, req("POST", "/api/v1/dlq/{did}/replay")),
        (QUEUE, req("POST", "/api/v1/dlq/{did}/replay", body={"queue": "orders.s"})),
        (QUEUE, req("POST", "/api/v1/dlq/{replayed}/replay", body={"queue": "orders.s"})),
        (QUEUE, req("POST", "/api/v1/dlq/999999999/replay", body={"queue": Q, "partition": PARTITION})),
    ],
    # A stream touches the queues its body names and those stored with it.
    "POST /streams/v1/queries": [
        stream("queries", name="billing-new", source_queue=Q, config_hash="h"),
        stream("queries", name="orders-new", source_queue="orders.s", sink_queue=SINK, config_hash="h"),
        stream("queries", name=QUERY, source_queue="orders.s", sink_queue="orders.t", config_hash="h", reset=True),
        stream("queries", name=QUERY, source_queue="orders.s", config_hash="h"),
        stream("queries", name=QUERY, source_queue="orders.s", config_hash=HASH),
    ],
    "POST /streams/v1/state/get": [
        stream("state/get", query_id="{qid}", partition_id="{pid}"),
        stream("state/get", query_id="{qid}", partition_id="{opid}"),
    ],
    "POST /streams/v1/cycle": [
        stream("cycle", query_id="{qid}", partition_id="{pid}"),
        stream(
            "cycle", query_id="{qid}", partition_id="{opid}", state_ops=[{"type": "upsert", "key": "k", "value": 1}]
        ),
        stream("cycle", query_id="{qid}", partition_id="{opid}", push_items=[{"queue": Q, "payload": {}}]),
    ],
    # Ephemeral queues are named by the same queue grants.
    "POST /ephemeral/configure": [
        (QUEUE, req("POST", "/api/v1/ephemeral/configure", body={"queue": EPH, "options": {}}))
    ],
    "POST /ephemeral/reset": [(QUEUE, req("POST", "/api/v1/ephemeral/reset", body={"queue": EPH}))],
    "DELETE /ephemeral/queue/{path:queue}": [(QUEUE, req("DELETE", f"/api/v1/ephemeral/queue/{EPH}"))],
    "POST /ephemeral/push": [
        (QUEUE, req("POST", "/api/v1/ephemeral/push", body={"queue": EPH, "messages": [{"payload": 1}]}))
    ],
    "GET /ephemeral/pop": [(QUEUE, req("GET", "/api/v1/ephemeral/pop", params={"queue": EPH}))],
    "POST /ephemeral/ack": [
        (QUEUE, req("POST", "/api/v1/ephemeral/ack", body={"queue": EPH, "acks": [{"id": "e:1:p:1"}]}))
    ],
    "GET /ephemeral/queues": [(QUEUE, req("GET", "/api/v1/ephemeral/queues"))],
    "GET /ephemeral/queues/{path:queue}/depth": [(QUEUE, req("GET", f"/api/v1/ephemeral/queues/{EPH}/depth"))],
}


#: Paths beside the API that a token reaches, walked the same way: 403, or
#: a 200 filtered to the token's grants (``/metrics`` needs one or the other).
EITHER = "403 or filtered"
BESIDE: dict[str, Any] = {"GET /metrics": routes.Route(TokenScope.READ, EITHER, ("queue", "kv"))}
BESIDE_CASES: dict[str, list[Case]] = {"GET /metrics": [(("queue", "kv"), req("GET", "/metrics"))]}


def test_the_walk_has_a_case_for_every_route_aiming_at_all_it_touches():
    """A route added to routes.ROUTES without a case here fails; so does a
    case list that leaves out a kind of resource the route's row touches."""
    assert set(TABLE) == set(routes.ROUTES), {
        "without a case": sorted(set(routes.ROUTES) - set(TABLE)),
        "not a route": sorted(set(TABLE) - set(routes.ROUTES)),
    }
    for route, row in routes.ROUTES.items():
        aimed = {kind for case in TABLE[route] for kind in case[0]}
        assert aimed == set(row.touches), (route, aimed, row.touches)


def send(http: Client, method: str, path: str, params: dict[str, Any] | None = None, body: Any = None) -> Any:
    if params:
        path = f"{path}?{urlencode(params)}"
    data = "" if body is None else json.dumps(body)
    return http.generic(method, path, data, content_type="application/json")


def ok(answer: Any, *statuses: int) -> Any:
    assert answer.status_code in (statuses or (200,)), (answer.status_code, answer.content)
    return answer.json()


def store_billing(owner: Client) -> World:
    """Billing's side of every kind, through the whole-store token (pops through the domain)."""
    ok(send(owner, "POST", "/api/v1/configure", body={"queue": Q, "namespace": NS, "options": {"leaseTime": 3600}}))
    items = [
        {
            "queue": Q,
            "partition": PARTITION,
            "payload": {"secret": "msg-billing-secret"},
            "transactionId": f"txn-billing-{i}",
        }
        for i in range(4)
    ]
    ok(send(owner, "POST", "/api/v1/push", body={"items": items}), 201)
    claim = queues.queue_claim(request=queues.PopRequest(queue=Q, batch=1, group=GROUP, lease_seconds=3600))
    pid = str(claim.partition_id)
    trace = {"transactionId": "txn-billing-0", "partitionId": pid, "data": {"secret": "trace-billing-secret"}}
    ok(send(owner, "POST", "/api/v1/traces", body={**trace, "traceNames": [TRACE_NAME]}), 201)
    with transaction.atomic():
        for txn in ("dead-billing-tx", "dead-billing-tx-replayed"):
            queues.queue_dead_letter_in_txn(
                queue=Q,
                partition=PARTITION,
                group=GROUP,
                transaction_id=txn,
                message_id=queues.uuid7(),
                payload_json='{"secret": "dead-billing-payload"}',
                error="dead-billing-secret",
                retry_count=5,
                now=clock.now(),
            )
    replayed = DeadLetter.objects.get(transaction_id="dead-billing-tx-replayed").pk
    copy = queue_operator.queue_dlq_replay(dead_letter_id=replayed, who=Who("walk-owner", via="api"))
    ok(send(owner, "PUT", f"/api/v1/kv/{Q}/{KV_KEY}", body={"value": "kv-billing-secret", "forever": True}))
    lock = {"op": "acquire", "name": LOCK, "ttlSeconds": 3600, "owner": OWNER}
    acquired = ok(send(owner, "POST", "/api/v1/locks", body=[lock]))["results"][0]
    assert acquired["acquired"] is True
    ok(send(owner, "POST", "/api/v1/timers", body=[{**schedule(Q, TIMER_KEY), "txn": "tx-billing-timer"}]))
    register = {"name": QUERY, "source_queue": Q, "sink_queue": SINK, "config_hash": HASH}
    query_id = ok(send(owner, "POST", "/streams/v1/queries", body=register))["query_id"]
    cycle = {
        "query_id": query_id,
        "partition_id": pid,
        "state_ops": [{"type": "upsert", "key": STATE_KEY, "value": "state-billing-secret"}],
    }
    assert ok(send(owner, "POST", "/streams/v1/cycle", body=cycle))["success"] is True
    ok(send(owner, "POST", "/api/v1/ephemeral/configure", body={"queue": EPH, "options": {}}), 201)
    ok(
        send(
            owner,
            "POST",
            "/api/v1/ephemeral/push",
            body={"queue": EPH, "messages": [{"payload": "eph-billing-secret"}]},
        ),
        201,
    )
    now = clock.now()
    for i, seconds in enumerate((10, 5)):
        row = SampleRow(
            HOST, 6632, 31337, now - timedelta(seconds=seconds), 1.0 + i, 0.5, 1 << 20, 1 << 22, 4, 1, 1, 1, 3
        )
        procmetrics.procmetrics_record(now=row.at, row=row)
    # One orders partition, for the calls that pair it with billing's query.
    ok(send(owner, "POST", "/api/v1/push", body={"items": [{"queue": "orders.s", "payload": 1}]}), 201)
    opid = str(queues.queue_claim(request=queues.PopRequest(queue="orders.s", batch=1)).partition_id)
    stored = (
        Q,
        SINK,
        EPH,
        NS,
        PARTITION,
        GROUP,
        LOCK,
        TIMER_KEY,
        TRACE_NAME,
        QUERY,
        HASH,
        KV_KEY,
        STATE_KEY,
        OWNER,
        HOST,
        "31337",
        claim.lease_id,
        query_id,
        claim.messages[0].message_id,
        *SECRETS,
        *(f"txn-billing-{i}" for i in range(4)),
    )
    did = str(DeadLetter.objects.get(transaction_id="dead-billing-tx").pk)
    return World(pid, opid, claim.lease_id, query_id, (*stored, copy.pushed.message_id), did, str(replayed))


def snapshot() -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table of the store (tokens and audit log included), every column."""
    return {
        model.__name__: list(model.objects.order_by("pk").values_list())
        for model in apps.get_app_config("queenadmin").get_models()
    }


def limited(scope: TokenScope) -> Client:
    grants = [f"{kind}:orders.*={scope.value}" for kind in tokens.KINDS]
    token = tokens.token_create(by=tokens.HOST, name=f"walk-{scope.value}", scope=scope, grants=grants)
    return Client(HTTP_AUTHORIZATION=f"Bearer {token}")


@pytest.fixture
def db_threads_closed() -> Iterator[None]:
    """The database threads' connections close at the end (one job on each
    thread), so that the test database can be dropped."""
    yield
    threads = settings.POP_DB_THREADS
    meet = threading.Barrier(threads)

    def close() -> None:
        meet.wait(timeout=30)
        connections.close_all()

    async def on_every_thread() -> None:
        await asyncio.gather(*(dbthreads.run(close) for _ in range(threads)))

    # A loop of its own, never the thread's current one: asyncio.run would
    # set the current loop to None at its end, dropping the fresh loop
    # pytest-asyncio leaves there after an async test unclosed (a
    # ResourceWarning for its socket, raised in whichever test collects it).
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(on_every_thread())
    finally:
        loop.close()


@pytest.mark.django_db(transaction=True)
def test_every_route_with_a_one_prefix_token_reaches_nothing_outside_it(db_threads_closed):
    """Each route, called by a token granted orders.* against billing's
    resources: 403 or a filtered 200 as its row says, no row changed, and
    nothing stored of billing's in the answer that the call did not name."""
    owner = Client(HTTP_AUTHORIZATION=f"Bearer {tokens.token_create(by=tokens.HOST, name='walk-owner')}")
    w = store_billing(owner)
    tokens_by_scope = {TokenScope.WRITE: limited(TokenScope.WRITE), TokenScope.ADMIN: limited(TokenScope.ADMIN)}
    # The refusals are the grants', not a token that reaches nothing.
    mine = tokens_by_scope[TokenScope.WRITE]
    assert "orders.s" in ok(send(mine, "GET", "/api/v1/resources/queues/orders.s"))["name"]
    ok(send(mine, "PUT", "/api/v1/kv/orders.x/k", body={"value": 1, "forever": True}))
    problems: list[str] = []
    rows = [*routes.ROUTES.items(), *BESIDE.items()]
    for route, row in rows:
        http = tokens_by_scope[TokenScope.ADMIN if row.scope == TokenScope.ADMIN else TokenScope.WRITE]
        owner_saw = False
        for index, (_, make, *listed) in enumerate(TABLE.get(route) or BESIDE_CASES[route]):
            rule = listed[0] if listed else row.rule
            method, path, params, body = make(w)
            asked = f"{path} {json.dumps(params)} {json.dumps(body)}"
            before = snapshot()
            answer = send(http, method, path, params, body)
            text = answer.content.decode(errors="replace")
            where = f"{route} #{index}"
            if rule == EITHER:
                if answer.status_code not in (200, 403):
                    problems.append(f"{where}: {answer.status_code}, neither a 403 nor a filtered 200: {text[:300]}")
            elif rule in (routes.NAMED, routes.EVERY):
                refused = answer.status_code == 403 and "grant" in answer.json().get("detail", "")
                if not refused:
                    problems.append(f"{where}: {answer.status_code}, not the grants' 403: {text[:300]}")
            elif answer.status_code != 200:
                problems.append(f"{where}: {answer.status_code}, not a filtered 200: {text[:300]}")
            changed = [name for name, now in snapshot().items() if now != before[name]]
            if changed:
                problems.append(f"{where}: changed {changed}")
            shown = [detail for detail in w.stored if detail in text and detail not in asked]
            if shown:
                at = text.index(shown[0])
                problems.append(f"{where}: shows {shown}: ...{text[max(0, at - 150) : at + 150]}...")
            if rule == routes.FILTERED:
                # A read: the whole-store token's answer to it shows billing's.
                seen = send(owner, method, path, params, body).content.decode(errors="replace")
                owner_saw = owner_saw or any(detail in seen and detail not in asked for detail in w.stored)
        if row.rule == routes.FILTERED and not owner_saw and route not in NAMES_NOTHING:
            problems.append(f"{route}: no case reaches billing's rows: the walk filters nothing there")
    assert not problems, "\n".join(problems)


@pytest.mark.django_db
def test_a_refusal_found_through_a_partition_or_a_lease_names_no_queue():
    """A partition id is a small number anyone can count up: the 403 for
    one, or for a lease, says what the call named, never the queue behind it."""
    queues.queue_push(items=[queues.PushItem("billing.hidden", "p", '"x"', "t1")])
    claim = queues.queue_claim(request=queues.PopRequest(queue="billing.hidden", batch=1, group="g"))
    http = limited(TokenScope.ADMIN)
    ack = {
        "transactionId": "t1",
        "partitionId": str(claim.partition_id),
        "leaseId": claim.lease_id,
        "consumerGroup": "g",
    }
    for method, path, body in (
        ("GET", f"/api/v1/messages/{claim.partition_id}/t1", None),
        ("DELETE", f"/api/v1/messages/{claim.partition_id}/t1", None),
        ("POST", "/api/v1/ack", ack),
        ("POST", f"/api/v1/lease/{claim.lease_id}/extend", {"seconds": 30}),
    ):
        answer = send(http, method, path, None, body)
        assert answer.status_code == 403, (path, answer.content)
        assert "billing" not in answer.content.decode(), (path, answer.content)
