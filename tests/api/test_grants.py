"""Per-resource token grants (issue 28) against a live server.

A token limited to ``orders`` (``queue:orders.<run>*``, ``kv:orders.<run>*``,
``lock:orders.<run>*``, ``timer:orders.<run>*``, all ``admin``, so its scope
never refuses) cannot reach ``billing`` through any route: one row per route
of the API (the table fails when a route is added without a row), one case
per operation kind on the batch routes. A ``named`` or ``store-wide`` route
answers 403 in the auth envelope and writes nothing; a ``filtered`` one
answers without billing's rows.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from django.test import Client

from queenadmin.api import grants

pytestmark = pytest.mark.live


@dataclass(frozen=True)
class World:
    """What the admin token made: a billing and an orders side of each kind."""

    run: str
    billing: str
    orders: str
    billing_pid: str
    orders_pid: str
    billing_lease: str
    group: str
    #: The server's root URL: the streams routes live beside /api/v1.
    root: str = ""


@pytest.fixture(scope="module")
def world(live_server) -> Iterator[tuple[World, httpx.Client, httpx.Client]]:
    run = live_server.token[-6:].lower().replace("_", "x").replace("-", "x")
    orders, billing = f"orders.{run}", f"billing.{run}"
    admin = httpx.Client(
        base_url=f"{live_server.url}/api/v1", headers={"Authorization": f"Bearer {live_server.token}"}, timeout=30
    )
    grant_args = [arg for kind in ("queue", "kv", "lock", "timer") for arg in ("--grant", f"{kind}:{orders}*=admin")]
    out = live_server.manage("apitoken", "create", f"limited-{run}", "--scope", "admin", *grant_args)
    limited = httpx.Client(
        base_url=f"{live_server.url}/api/v1",
        headers={"Authorization": f"Bearer {out.strip().splitlines()[-1]}"},
        timeout=30,
    )
    group = f"g{run}"
    pids, leases = {}, {}
    for q in (orders, billing):
        assert (
            admin.post(
                "/configure", json={"queue": q, "namespace": f"ns{run}", "options": {"leaseTime": 3600}}
            ).status_code
            == 200
        )
        items = [{"queue": q, "partition": "p", "payload": {"n": i}, "transactionId": f"t{i}"} for i in range(3)]
        assert admin.post("/push", json={"items": items}).status_code == 201
        popped = admin.get(f"/pop/queue/{q}", params={"consumerGroup": group, "batch": 1, "wait": "false"}).json()
        pids[q], leases[q] = popped["partitionId"], popped["leaseId"]
        assert (
            admin.post(
                "/traces", json={"transactionId": "t0", "partitionId": pids[q], "data": {}, "traceNames": [f"tn{run}"]}
            )
        ).status_code == 201
        put = {"op": "put", "ns": q, "key": "k", "value": "secret", "forever": True}
        lock = {"op": "acquire", "name": f"{q}.lock", "ttlSeconds": 300, "owner": "me"}
        assert admin.post("/kv", json=[put]).status_code == 200
        assert admin.post("/locks", json=[lock]).json()["results"][0]["acquired"] is True
        timer = {**_schedule(q, "k"), "delayMs": 3_600_000}
        assert admin.post("/timers", json=[timer]).status_code == 200
    yield (
        World(run, billing, orders, pids[billing], pids[orders], leases[billing], group, live_server.url),
        limited,
        admin,
    )
    admin.close()
    limited.close()


def _schedule(queue: str, key: str) -> dict[str, Any]:
    payload = base64.b64encode(json.dumps({"a": 1}).encode()).decode()
    return {"op": "schedule", "queue": queue, "timerKey": key, "delayMs": 1000, "txn": "tx-1", "payload": payload}


def refused(answer: httpx.Response) -> None:
    assert answer.status_code == 403, answer.text
    body = answer.json()
    assert body["error"] == body["code"] == "forbidden", body
    assert "grant" in body["detail"], body


def hides(w: World) -> Callable[[httpx.Response], None]:
    def check(answer: httpx.Response) -> None:
        assert answer.status_code == 200, answer.text
        assert w.billing not in answer.text

    return check


Case = tuple[str, Callable[[World], tuple[str, str, dict[str, Any]]]]


def req(method: str, path: str, **kwargs: Any) -> Callable[[World], tuple[str, str, dict[str, Any]]]:
    """A request whose path and body name ``{b}`` (billing), ``{pid}``, ``{lease}``, ``{g}``."""

    def make(w: World) -> tuple[str, str, dict[str, Any]]:
        fill = {
            "b": w.billing,
            "o": w.orders,
            "pid": w.billing_pid,
            "opid": w.orders_pid,
            "lease": w.billing_lease,
            "g": w.group,
            "run": w.run,
            "root": w.root,
        }
        text = json.dumps(kwargs)
        for k, v in fill.items():
            text = text.replace("{" + k + "}", v)
        return method, path.format(**fill), json.loads(text)

    return make


def kvop(**op: Any) -> Callable[[World], tuple[str, str, dict[str, Any]]]:
    return req("POST", "/kv", json=[{"ns": "{b}", **op}])


def lockop(**op: Any) -> Callable[[World], tuple[str, str, dict[str, Any]]]:
    return req("POST", "/locks", json=[{"name": "{b}.lock", **op}])


def txn(**body: Any) -> Callable[[World], tuple[str, str, dict[str, Any]]]:
    return req("POST", "/transaction", json={"operations": [], "requiredLeases": [], **body})


ACK = {
    "transactionId": "t0",
    "partitionId": "{pid}",
    "status": "completed",
    "consumerGroup": "{g}",
    "leaseId": "{lease}",
}

#: Route -> its cases: (what the answer must be, the request). "refused" is a
#: 403 from the grants and billing unchanged; "hidden" a 200 without a trace
#: of billing where the admin token's answer shows it; "hidden-page" the same
#: on a list's first page (billing may be past it in a full run); "answers"
#: a 200 of a route whose answer names no resource.
TABLE: dict[str, list[tuple[str, Callable[[World], tuple[str, str, dict[str, Any]]]]]] = {
    "POST /kv": [
        ("refused", kvop(op="get", key="k")),
        ("refused", kvop(op="getMany", keys=["k"])),
        ("refused", kvop(op="getPrefix", prefix="k")),
        ("refused", kvop(op="check", key="k", expect=1)),
        ("refused", kvop(op="put", key="k", value=1, forever=True)),
        ("refused", kvop(op="putIfAbsent", key="n", value=1, forever=True)),
        ("refused", kvop(op="delete", key="k")),
        ("refused", kvop(op="incr", key="n", delta=1, forever=True)),
        # A lock's permit row through the KV routes is the lock.
        ("refused", req("POST", "/kv", json=[{"op": "get", "ns": "queen-locks", "key": "{b}.lock#0"}])),
    ],
    "GET /kv/{ns}/{path:key}": [("refused", req("GET", "/kv/{b}/k"))],
    "PUT /kv/{ns}/{path:key}": [("refused", req("PUT", "/kv/{b}/k", json={"value": 2, "forever": True}))],
    "DELETE /kv/{ns}/{path:key}": [("refused", req("DELETE", "/kv/{b}/k"))],
    "GET /resources/kv/namespaces": [("hidden", req("GET", "/resources/kv/namespaces"))],
    "GET /history/kv/{ns}/{path:key}": [("refused", req("GET", "/history/kv/{b}/k"))],
    "GET /history/locks/{path:name}": [("refused", req("GET", "/history/locks/{b}.lock"))],
    "POST /resources/kv/list": [
        ("refused", req("POST", "/resources/kv/list", json={"namespace": "{b}"})),
        ("hidden-page", req("POST", "/resources/kv/list", json={"namespace": "queen-locks"})),
        ("hidden", req("POST", "/resources/kv/list", json={"namespace": "queen-locks", "prefix": "{b}"})),
    ],
    "POST /locks": [
        ("refused", lockop(op="get")),
        ("refused", lockop(op="acquire", ttlSeconds=30)),
        ("refused", lockop(op="renew", token=1, ttlSeconds=30)),
        ("refused", lockop(op="release", token=1)),
    ],
    "POST /timers": [
        ("refused", req("POST", "/timers", json=[_schedule("{b}", "k2")])),
        ("refused", req("POST", "/timers", json=[{**_schedule("{b}", "k2"), "op": "reschedule"}])),
        ("refused", req("POST", "/timers", json=[{"op": "cancel", "queue": "{b}", "timerKey": "k"}])),
    ],
    "DELETE /timers/{queue}/{path:timer_key}": [("refused", req("DELETE", "/timers/{b}/k"))],
    "GET /timers/{queue}/{path:timer_key}": [("refused", req("GET", "/timers/{b}/k"))],
    "GET /timers/{queue}": [
        ("refused", req("GET", "/timers/{b}")),
        ("refused", req("GET", "/timers/{b}", params={"mode": "count"})),
    ],
    "POST /transaction": [
        ("refused", txn(operations=[{"type": "ack", **ACK}], requiredLeases=["{lease}"])),
        ("refused", txn(operations=[{"type": "push", "items": [{"queue": "{b}", "payload": 1}]}])),
        ("refused", txn(kv=[{"op": "put", "ns": "{b}", "key": "k", "value": 1, "forever": True}])),
        ("refused", txn(kv=[{"op": "check", "ns": "queen-locks", "key": "{b}.lock#0", "expect": 1}])),
        ("refused", txn(timers=[_schedule("{b}", "k3")])),
        ("refused", txn(positions=[{"queue": "{b}", "consumerGroup": "{g}", "partition": "p", "offset": 3}])),
    ],
    "POST /configure": [("refused", req("POST", "/configure", json={"queue": "{b}"}))],
    "POST /push": [("refused", req("POST", "/push", json={"items": [{"queue": "{b}", "payload": 1}]}))],
    "GET /pop/queue/{queue}": [("refused", req("GET", "/pop/queue/{b}", params={"wait": "false"}))],
    "GET /pop/queue/{queue}/partition/{partition}": [
        ("refused", req("GET", "/pop/queue/{b}/partition/p", params={"wait": "false"}))
    ],
    "GET /pop": [("refused", req("GET", "/pop", params={"namespace": "x", "wait": "false"}))],
    "POST /ack": [("refused", req("POST", "/ack", json=ACK))],
    "POST /ack/batch": [("refused", req("POST", "/ack/batch", json={"acknowledgments": [ACK]}))],
    "POST /lease/{lease_id}/extend": [("refused", req("POST", "/lease/{lease}/extend", json={"seconds": 30}))],
    "GET /resources/queues": [
        ("hidden", req("GET", "/resources/queues")),
        ("hidden", req("GET", "/resources/queues", params={"stats": "lanes"})),
    ],
    "GET /resources/queues/{queue}": [("refused", req("GET", "/resources/queues/{b}"))],
    "GET /resources/queues/{queue}/depth": [("refused", req("GET", "/resources/queues/{b}/depth"))],
    "DELETE /resources/queues/{queue}": [("refused", req("DELETE", "/resources/queues/{b}"))],
    "GET /resources/overview": [("refused", req("GET", "/resources/overview"))],
    "GET /dlq": [("refused", req("GET", "/dlq")), ("refused", req("GET", "/dlq", params={"queue": "{b}"}))],
    "GET /status": [
        ("hidden-page", req("GET", "/status")),
        ("hidden", req("GET", "/status", params={"queue": "{b}"})),
        ("hidden", req("GET", "/status", params={"namespace": "ns{run}"})),
    ],
    "GET /status/queues": [
        ("hidden-page", req("GET", "/status/queues")),
        ("hidden", req("GET", "/status/queues", params={"namespace": "ns{run}"})),
    ],
    "GET /status/queues/{name}": [("refused", req("GET", "/status/queues/{b}"))],
    # Counts per time bucket, no names.
    "GET /status/analytics": [("answers", req("GET", "/status/analytics", params={"queue": "{b}"}))],
    "POST /stats/refresh": [("refused", req("POST", "/stats/refresh"))],
    # Every replica's hostname and pid: the deployment, store-wide.
    "GET /analytics/system-metrics": [("refused", req("GET", "/analytics/system-metrics"))],
    "GET /analytics/worker-metrics": [("refused", req("GET", "/analytics/worker-metrics"))],
    "POST /fetch": [("refused", req("POST", "/fetch", json={"entries": [{"queue": "{b}", "partition": "p"}]}))],
    "POST /partitions/changed": [("refused", req("POST", "/partitions/changed", json={"entries": [{"queue": "{b}"}]}))],
    "GET /consumer-groups": [("hidden", req("GET", "/consumer-groups"))],
    "GET /consumer-groups/lagging": [("hidden", req("GET", "/consumer-groups/lagging", params={"minLagSeconds": 0}))],
    "GET /consumer-groups/{group}": [("hidden", req("GET", "/consumer-groups/{g}"))],
    "DELETE /consumer-groups/{group}": [("refused", req("DELETE", "/consumer-groups/{g}"))],
    "POST /consumer-groups/{group}/subscription": [
        (
            "refused",
            req("POST", "/consumer-groups/{g}/subscription", json={"subscriptionTimestamp": "2000-01-01T00:00:00Z"}),
        )
    ],
    "DELETE /consumer-groups/{group}/queues/{queue}": [("refused", req("DELETE", "/consumer-groups/{g}/queues/{b}"))],
    "POST /consumer-groups/{group}/queues/{queue}/seek": [
        ("refused", req("POST", "/consumer-groups/{g}/queues/{b}/seek", json={"toEnd": True}))
    ],
    "POST /resources/queues/{queue}/pause": [("refused", req("POST", "/resources/queues/{b}/pause"))],
    "POST /resources/queues/{queue}/resume": [("refused", req("POST", "/resources/queues/{b}/resume"))],
    "POST /consumer-groups/{group}/queues/{queue}/pause": [
        ("refused", req("POST", "/consumer-groups/{g}/queues/{b}/pause", json={"reason": "x"}))
    ],
    "POST /consumer-groups/{group}/queues/{queue}/resume": [
        ("refused", req("POST", "/consumer-groups/{g}/queues/{b}/resume"))
    ],
    "POST /traces": [
        ("refused", req("POST", "/traces", json={"transactionId": "t0", "partitionId": "{pid}", "data": {}}))
    ],
    "GET /traces/names": [("refused", req("GET", "/traces/names"))],
    "GET /traces/by-name/{name}": [("hidden", req("GET", "/traces/by-name/tn{run}"))],
    "GET /traces/{partition_id}/{transaction_id}": [("refused", req("GET", "/traces/{pid}/t0"))],
    "GET /resources/namespaces": [("refused", req("GET", "/resources/namespaces"))],
    "GET /resources/tasks": [("refused", req("GET", "/resources/tasks"))],
    "GET /resources/partitions": [
        ("hidden-page", req("GET", "/resources/partitions")),
        ("hidden", req("GET", "/resources/partitions", params={"queue": "{b}"})),
    ],
    "GET /messages": [
        ("hidden-page", req("GET", "/messages")),
        ("hidden", req("GET", "/messages", params={"queue": "{b}"})),
        ("hidden", req("GET", "/messages", params={"namespace": "ns{run}"})),
    ],
    "GET /messages/{partition_id}/{transaction_id}": [("refused", req("GET", "/messages/{pid}/t1"))],
    "DELETE /messages/{partition_id}/{transaction_id}": [("refused", req("DELETE", "/messages/{pid}/t1"))],
    "POST /messages/{partition_id}/{transaction_id}/retry": [("refused", req("POST", "/messages/{pid}/t1/retry"))],
    "POST /messages/{partition_id}/{transaction_id}/dlq": [
        ("refused", req("POST", "/messages/{pid}/t1/dlq", json={"consumerGroup": "{g}"}))
    ],
    # Into billing: refused by the destination whatever the dead letter.
    "POST /dlq/{id}/replay": [("refused", req("POST", "/dlq/999999999/replay", json={"queue": "{b}"}))],
    # A stream touches its source and its sink queue.
    "POST /streams/v1/queries": [
        (
            "refused",
            req(
                "POST", "{root}/streams/v1/queries", json={"name": "s{run}", "source_queue": "{b}", "config_hash": "h"}
            ),
        ),
        (
            "refused",
            req(
                "POST",
                "{root}/streams/v1/queries",
                json={"name": "s{run}", "source_queue": "{o}", "sink_queue": "{b}", "config_hash": "h"},
            ),
        ),
    ],
    "POST /streams/v1/state/get": [
        ("refused", req("POST", "{root}/streams/v1/state/get", json={"query_id": "q", "partition_id": "{pid}"}))
    ],
    "POST /streams/v1/cycle": [
        ("refused", req("POST", "{root}/streams/v1/cycle", json={"query_id": "q", "partition_id": "{pid}"})),
        (
            "refused",
            req(
                "POST",
                "{root}/streams/v1/cycle",
                json={
                    "query_id": "q",
                    "partition_id": "{opid}",
                    "push_items": [{"queue": "{b}", "partition": "p", "payload": {}}],
                },
            ),
        ),
    ],
    # Ephemeral queues are named by the same queue grants.
    "POST /ephemeral/configure": [
        ("refused", req("POST", "/ephemeral/configure", json={"queue": "{b}", "options": {}}))
    ],
    "POST /ephemeral/reset": [("refused", req("POST", "/ephemeral/reset", json={"queue": "{b}"}))],
    "DELETE /ephemeral/queue/{path:queue}": [("refused", req("DELETE", "/ephemeral/queue/{b}"))],
    "POST /ephemeral/push": [
        ("refused", req("POST", "/ephemeral/push", json={"queue": "{b}", "messages": [{"payload": 1}]}))
    ],
    "GET /ephemeral/pop": [("refused", req("GET", "/ephemeral/pop", params={"queue": "{b}"}))],
    "POST /ephemeral/ack": [
        ("refused", req("POST", "/ephemeral/ack", json={"queue": "{b}", "acks": [{"id": "e:1:p:1"}]}))
    ],
    "GET /ephemeral/queues": [("hidden-page", req("GET", "/ephemeral/queues"))],
    "GET /ephemeral/queues/{path:queue}/depth": [("refused", req("GET", "/ephemeral/queues/{b}/depth"))],
}

CASES = [(route, i, want, make) for route, cases in TABLE.items() for i, (want, make) in enumerate(cases)]


def _routes_of_the_api() -> set[str]:
    """Every operation the published OpenAPI document names, as the routers spell it."""
    document = Client().get("/api/v1/openapi.json").json()
    # The streams routes have a document of their own, with full paths.
    streams = Client().get("/streams/v1/openapi.json").json()
    return {
        f"{method.upper()} {path.removeprefix('/api/v1')}"
        for path, methods in [*document["paths"].items(), *streams["paths"].items()]
        for method in methods
    }


def _unconverted(route: str) -> str:
    return re.sub(r"\{path:(\w+)\}", r"{\1}", route)


@pytest.mark.django_db
def test_the_table_has_a_row_for_every_route_of_the_api():
    """A route added without a row here (or in grants.ROUTES) fails this test."""
    api_routes = _routes_of_the_api()
    assert {_unconverted(r) for r in TABLE} == api_routes
    assert {_unconverted(r) for r in grants.ROUTES} == api_routes


def _state(admin: httpx.Client, w: World) -> Any:
    """Everything of billing's a refused call could have changed."""
    queue = admin.get(f"/resources/queues/{w.billing}").json()
    return (
        admin.post("/kv", json=[{"op": "getPrefix", "ns": w.billing, "prefix": "k"}]).json(),
        admin.post("/locks", json=[{"op": "get", "name": f"{w.billing}.lock"}]).json(),
        admin.get(f"/timers/{w.billing}").json()["rows"],
        json.dumps(queue, sort_keys=True),
        # Less the lag in seconds, which moves with the clock.
        [
            {k: v for k, v in p.items() if k != "timeLagSeconds"}
            for p in admin.get(f"/consumer-groups/{w.group}").json()[w.billing]["partitions"]
        ],
        admin.get(f"/traces/{w.billing_pid}/t0").json(),
    )


@pytest.mark.parametrize(("route", "index", "want", "make"), CASES, ids=[f"{c[0]} #{c[1]}" for c in CASES])
def test_a_token_limited_to_orders_cannot_reach_billing(world, route, index, want, make):
    w, limited, admin = world
    method, path, kwargs = make(w)
    before = _state(admin, w) if want == "refused" else None
    answer = limited.request(method, path, **kwargs)
    if want == "refused":
        refused(answer)
        after = _state(admin, w)
        assert after == before, [(x, y) for x, y in zip(before, after, strict=True) if x != y]
    elif want == "hidden":
        hides(w)(answer)
        # The filter is what hid it: the admin token's answer shows billing.
        assert w.billing in admin.request(method, path, **kwargs).text
    elif want == "hidden-page":
        # The first page of a list over the whole store: in a full run
        # billing may be past it for the admin token too.
        hides(w)(answer)
    else:
        assert want == "answers"
        assert answer.status_code == 200, answer.text
        import sys

        print("ADMINSEES", route, index, w.billing in admin.request(method, path, **kwargs).text, file=sys.stderr)


def test_the_limited_token_reaches_its_own_resources(world):
    """The same routes answer for orders, and lists show orders."""
    w, limited, _ = world
    q = w.orders
    assert limited.get(f"/kv/{q}/k").json()["value"] == "secret"
    assert limited.post("/locks", json=[{"op": "get", "name": f"{q}.lock"}]).json()["results"][0]["held"] is True
    pushed = limited.post("/push", json={"items": [{"queue": q, "partition": "p", "payload": 9}]})
    assert pushed.status_code == 201, pushed.text
    assert limited.get(f"/timers/{q}").status_code == 200
    assert q in limited.get("/resources/queues").text
    assert q in limited.get("/status/queues").text
    assert q in limited.get("/resources/kv/namespaces").text
    assert q in limited.post("/resources/kv/list", json={"namespace": "queen-locks"}).text
    # The permits under a prefix its lock grant covers, through the KV batch.
    prefix = {"op": "getPrefix", "ns": "queen-locks", "prefix": f"{q}."}
    rows = limited.post("/kv", json=[prefix]).json()["results"][0]
    assert q in json.dumps(rows)
    refused(limited.post("/kv", json=[{**prefix, "prefix": "orders"}]))
    assert q in limited.get("/messages", params={"queue": q}).text
    assert q in limited.get(f"/traces/by-name/tn{w.run}").text
    assert q in limited.get(f"/consumer-groups/{w.group}").text


def test_a_transaction_with_one_foreign_operation_writes_nothing(world):
    """Orders' push, KV put and timer with one billing KV put: 403, none of it written."""
    w, limited, admin = world
    q = w.orders
    body = {
        "operations": [{"type": "push", "items": [{"queue": q, "partition": "txn", "payload": 1}]}],
        "requiredLeases": [],
        "kv": [
            {"op": "put", "ns": q, "key": "txn", "value": 1, "forever": True},
            {"op": "put", "ns": w.billing, "key": "txn", "value": 1, "forever": True},
        ],
        "timers": [_schedule(q, "txn")],
    }
    refused(limited.post("/transaction", json=body))
    assert admin.get(f"/kv/{q}/txn").json()["found"] is False
    assert admin.get(f"/kv/{w.billing}/txn").json()["found"] is False
    assert admin.get(f"/timers/{q}/txn").json()["found"] is False
    assert (
        admin.post("/fetch", json={"entries": [{"queue": q, "partition": "txn"}]}).json()["entries"][0]["records"] == []
    )
    # Without the foreign operation the same bundle commits.
    body["kv"] = body["kv"][:1]
    assert limited.post("/transaction", json=body).json()["success"] is True
    assert admin.get(f"/kv/{q}/txn").json()["found"] is True


@pytest.mark.django_db
def test_the_openapi_document_names_each_routes_rule_and_documents_its_403():
    document = Client().get("/api/v1/openapi.json").json()
    streams = Client().get("/streams/v1/openapi.json").json()
    ops = {
        f"{method.upper()} {path.removeprefix('/api/v1')}": op
        for path, methods in [*document["paths"].items(), *streams["paths"].items()]
        for method, op in methods.items()
    }
    for route, rule in grants.ROUTES.items():
        op = ops[_unconverted(route)]
        assert op["x-token-grants"] == rule
        if rule in grants.REFUSING:
            assert "403" in op["responses"], route
    # A read of a named key can now be refused; a filtered list cannot.
    get_key = ops["GET /kv/{ns}/{key}"]["responses"]["403"]
    assert get_key["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ForbiddenOut"}
    assert "no grant of the token covers a resource the call names" in get_key["description"]
    # A filtered list refuses no grant: its only 403 is the write-only level's (issue 40).
    assert ops["GET /resources/queues"]["responses"]["403"]["description"] == (
        "Forbidden: the token is of the write-only level (a JWT or ours), which reads nothing"
    )
    assert "queue:*" in ops["GET /resources/overview"]["responses"]["403"]["description"]


def test_a_timer_grant_alone_cannot_schedule_into_a_foreign_queue(live_server, world):
    """A fire is a push onto the queue of the timer's name: scheduling needs that queue's write too."""
    w, _, admin = world
    out = live_server.manage("apitoken", "create", f"timers-{w.run}", "--grant", f"timer:{w.billing}=write")
    headers = {"Authorization": f"Bearer {out.strip().splitlines()[-1]}"}
    with httpx.Client(base_url=f"{live_server.url}/api/v1", headers=headers, timeout=30) as timers_only:
        answer = timers_only.post("/timers", json=[_schedule(w.billing, "sneak")])
        refused(answer)
        assert f"write on queue '{w.billing}'" in answer.json()["detail"]
        assert admin.get(f"/timers/{w.billing}/sneak").json()["found"] is False
        # Cancelling fires nothing: the timer grant is enough.
        cancel = timers_only.post("/timers", json=[{"op": "cancel", "queue": w.billing, "timerKey": "sneak"}])
        assert cancel.status_code == 200, cancel.text
