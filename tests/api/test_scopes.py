"""Token scopes per route class, against a live server: read < write < admin.

A token below what a call needs answers 403 in the 401's envelope
(``{"error": "forbidden", "code": "forbidden", "detail"}``) and changes
nothing; one that covers it gets the route's usual answer. The table is
``queenadmin/api/scopes.py``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import httpx
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import Client, override_settings

from queenadmin.api import scopes

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def as_scope(live_server) -> Iterator[dict[str, httpx.Client]]:
    """An HTTP client per scope; the read and write tokens made with ``apitoken create --scope``."""
    secrets = {"admin": live_server.token}
    for scope in ("read", "write"):
        out = live_server.manage("apitoken", "create", f"scoped-{scope}-{live_server.token[-6:]}", "--scope", scope)
        secrets[scope] = out.strip().splitlines()[-1]
    clients = {
        scope: httpx.Client(
            base_url=f"{live_server.url}/api/v1", headers={"Authorization": f"Bearer {secret}"}, timeout=30
        )
        for scope, secret in secrets.items()
    }
    try:
        yield clients
    finally:
        for client in clients.values():
            client.close()


def refused(answer: httpx.Response, have: str, need: str) -> None:
    assert answer.status_code == 403, answer.text
    assert answer.headers["content-type"] == "application/json"
    assert answer.json() == {
        "error": "forbidden",
        "code": "forbidden",
        "detail": f"this token's scope is {have}; the call needs {need}",
    }


def ok(answer: httpx.Response, status: int = 200) -> httpx.Response:
    assert answer.status_code == status, answer.text
    return answer


# -- KV ------------------------------------------------------------------------------


def test_kv_reads_need_read_and_writes_need_write(as_scope, unique):
    """A read token reads (get, getMany, getPrefix, check) and may not put, incr or delete."""
    read, write = as_scope["read"], as_scope["write"]
    ns = unique("scopes")
    put = {"op": "put", "ns": ns, "key": "k", "value": 1, "forever": True}
    refused(read.post("/kv", json={"operations": [put]}), "read", "write")
    refused(read.post("/kv", json=[{"op": "get", "ns": ns, "key": "k"}, put]), "read", "write")
    refused(read.post("/kv", json=[{"op": "incr", "ns": ns, "key": "n", "delta": 1, "forever": True}]), "read", "write")
    refused(read.put(f"/kv/{ns}/k", json={"value": 1, "forever": True}), "read", "write")
    refused(read.request("DELETE", f"/kv/{ns}/k"), "read", "write")
    # Nothing was written.
    assert ok(read.get(f"/kv/{ns}/k")).json()["found"] is False

    version = ok(write.post("/kv", json=[put])).json()["results"][0]["version"]
    reads = [
        {"op": "get", "ns": ns, "key": "k"},
        {"op": "getMany", "ns": ns, "keys": ["k", "missing"]},
        {"op": "getPrefix", "ns": ns, "prefix": "k"},
        {"op": "check", "ns": ns, "key": "k", "expect": version},
    ]
    results = ok(read.post("/kv", json=reads)).json()["results"]
    assert [r["op"] for r in results] == ["get", "getMany", "getPrefix", "check"]
    assert results[0]["value"] == 1
    assert results[3]["applied"] is True
    assert ok(read.get(f"/kv/{ns}/k")).json()["value"] == 1
    assert ok(read.post("/resources/kv/list", json={"namespace": ns})).json()["rows"][0]["key"] == "k"
    ok(read.get("/resources/kv/namespaces"))
    ok(write.put(f"/kv/{ns}/k", json={"value": 2, "forever": True}))
    assert ok(write.request("DELETE", f"/kv/{ns}/k")).json()["applied"] is True


# -- locks ---------------------------------------------------------------------------


def test_lock_get_needs_read_and_acquire_renew_release_need_write(as_scope, unique):
    read, write = as_scope["read"], as_scope["write"]
    name = unique("lock")
    acquire = {"op": "acquire", "name": name, "ttlSeconds": 30}
    refused(read.post("/locks", json=[acquire]), "read", "write")
    refused(read.post("/locks", json=[{"op": "get", "name": "other"}, acquire]), "read", "write")
    held = ok(write.post("/locks", json=[acquire])).json()["results"][0]
    assert held["acquired"] is True
    got = ok(read.post("/locks", json=[{"op": "get", "name": name}])).json()["results"][0]
    assert got["op"] == "get"
    for op in (
        {"op": "renew", "name": name, "token": held["token"], "ttlSeconds": 30},
        {"op": "release", "name": name, "token": held["token"]},
    ):
        refused(read.post("/locks", json=[op]), "read", "write")
        ok(write.post("/locks", json=[op]))


# -- timers and transactions --------------------------------------------------------


def test_timers_read_with_read_and_schedule_or_cancel_with_write(as_scope, unique):
    read, write = as_scope["read"], as_scope["write"]
    queue = unique("timers")
    payload = base64.b64encode(json.dumps({"a": 1}).encode()).decode()
    schedule = {"op": "schedule", "queue": queue, "timerKey": "k", "delayMs": 60_000, "txn": "t1", "payload": payload}
    refused(read.post("/timers", json=[schedule]), "read", "write")
    assert ok(read.get(f"/timers/{queue}", params={"mode": "count"})).json() == {"count": 0}
    ok(write.post("/timers", json=[schedule]))
    ok(read.get(f"/timers/{queue}/k"))
    assert len(ok(read.get(f"/timers/{queue}")).json()["rows"]) == 1
    refused(read.request("DELETE", f"/timers/{queue}/k"), "read", "write")
    ok(write.request("DELETE", f"/timers/{queue}/k"))


def test_a_transaction_needs_write(as_scope, unique):
    ns = unique("txn")
    body = {"operations": [], "kv": [{"op": "put", "ns": ns, "key": "k", "value": 1, "forever": True}]}
    refused(as_scope["read"].post("/transaction", json=body), "read", "write")
    assert ok(as_scope["read"].get(f"/kv/{ns}/k")).json()["found"] is False
    assert ok(as_scope["write"].post("/transaction", json=body)).json()["success"] is True


# -- the message log -----------------------------------------------------------------


def test_push_pop_ack_need_write_and_reads_need_read(as_scope, unique):
    """Pops (async views, checked on the event loop) refuse a read token like the rest."""
    read, write = as_scope["read"], as_scope["write"]
    q = unique("scoped-q")
    refused(read.post("/configure", json={"queue": q}), "read", "write")
    refused(read.post("/push", json={"items": [{"queue": q, "payload": 1}]}), "read", "write")
    ok(write.post("/push", json={"items": [{"queue": q, "payload": i} for i in range(3)]}), 201)
    for path in (f"/pop/queue/{q}", f"/pop/queue/{q}/partition/Default", "/pop"):
        params = {"namespace": q} if path == "/pop" else {}
        refused(read.get(path, params=params), "read", "write")
    popped = ok(write.get(f"/pop/queue/{q}", params={"batch": 1})).json()
    message = popped["messages"][0]
    ack = {
        "transactionId": message["transactionId"],
        "partitionId": message["partitionId"],
        "leaseId": message["leaseId"],
        "status": "completed",
    }
    refused(read.post(f"/lease/{message['leaseId']}/extend", json={"seconds": 30}), "read", "write")
    refused(read.post("/ack", json=ack), "read", "write")
    refused(read.post("/ack/batch", json={"acknowledgments": [ack]}), "read", "write")
    assert ok(write.post("/ack", json=ack)).json()[0]["success"] is True
    for path in ("/resources/queues", f"/resources/queues/{q}", f"/resources/queues/{q}/depth", "/dlq", "/messages"):
        ok(read.get(path))
    ok(read.post("/fetch", json={"entries": [{"queue": q, "partition": "Default", "offset": 0}]}))


def test_resource_deletes_need_admin(as_scope, unique):
    """A write token may not delete a queue, a consumer group or a message; an admin token may."""
    write, admin = as_scope["write"], as_scope["admin"]
    q = unique("doomed")
    ok(write.post("/push", json={"items": [{"queue": q, "payload": i} for i in range(2)]}), 201)
    popped = ok(write.get(f"/pop/queue/{q}", params={"batch": 1, "consumerGroup": "g1"})).json()
    message = popped["messages"][0]
    one = f"/messages/{message['partitionId']}/{message['transactionId']}"
    for path in (one, "/consumer-groups/g1", f"/consumer-groups/g1/queues/{q}", f"/resources/queues/{q}"):
        refused(write.request("DELETE", path), "write", "admin")
        refused(as_scope["read"].request("DELETE", path), "read", "admin")
    assert ok(write.get(one)).json()["transactionId"] == message["transactionId"]
    ok(admin.request("DELETE", one))
    ok(admin.request("DELETE", f"/consumer-groups/g1/queues/{q}"))
    assert ok(admin.request("DELETE", f"/resources/queues/{q}")).json()["deleted"] is True


def test_status_reads_need_read_and_a_refresh_needs_write(as_scope):
    read = as_scope["read"]
    for path in ("/status", "/status/queues", "/consumer-groups", "/resources/overview", "/traces/names"):
        ok(read.get(path))
    refused(read.post("/stats/refresh"), "read", "write")
    ok(as_scope["write"].post("/stats/refresh"))
    # /metrics (outside /api/v1) takes a token of any scope.
    metrics = str(read.base_url).rstrip("/").removesuffix("/api/v1") + "/metrics"
    assert httpx.get(metrics, headers=read.headers).status_code == 200


def test_no_token_is_still_401_before_any_scope(live_server):
    """Missing or unknown tokens answer 401, never 403, whatever the route needs."""
    for headers in ({}, {"Authorization": "Bearer qa_unknown"}):
        answer = httpx.delete(f"{live_server.url}/api/v1/resources/queues/x", headers=headers)
        assert answer.status_code == 401
        assert answer.json()["code"] == "unauthorized"


# -- in process: the table itself and the open mode ---------------------------------


@pytest.mark.django_db
@override_settings(QUEENADMIN_OPEN_API=True)
def test_open_mode_serves_every_scope_without_a_token():
    client = Client()
    assert client.delete("/api/v1/resources/queues/never-made").status_code == 200
    put = [{"op": "put", "ns": "open", "key": "k", "value": 1, "forever": True}]
    assert client.post("/api/v1/kv", put, content_type="application/json").status_code == 200


def test_a_route_without_a_scope_row_is_refused_at_start():
    """A new route cannot go out with the API's default: declaring it names it."""
    router = scopes.ScopedRouter()
    with pytest.raises(ImproperlyConfigured, match=r"GET /nowhere has no scope"):

        @router.get("/nowhere")
        def nowhere(request):
            return {}


def test_a_scope_row_without_a_route_is_refused_at_start():
    router = scopes.ScopedRouter()

    @router.get("/status")
    def status(request):
        return {}

    with pytest.raises(ImproperlyConfigured, match=r"scopes for routes that do not exist: DELETE /consumer-groups"):
        scopes.check([router])


def test_the_openapi_document_names_each_operations_scope_and_its_403():
    document = Client().get("/api/v1/openapi.json").json()
    ops = {
        f"{method.upper()} {path.removeprefix('/api/v1')}": op
        for path, methods in document["paths"].items()
        for method, op in methods.items()
    }
    assert ops["GET /resources/queues"]["x-token-scope"] == "read"
    # A read route refuses only Queen's write-only level, a JWT's or our token's (issue 40).
    assert ops["GET /resources/queues"]["responses"]["403"]["description"] == (
        "Forbidden: the token is of the write-only level (a JWT or ours), which reads nothing"
    )
    assert ops["DELETE /resources/queues/{queue}"]["x-token-scope"] == "admin"
    forbidden = {"$ref": "#/components/schemas/ForbiddenOut"}
    assert ops["DELETE /resources/queues/{queue}"]["responses"]["403"]["content"]["application/json"]["schema"] == (
        forbidden
    )
    assert ops["POST /kv"]["x-token-scope"] == scopes.BY_OPERATION
    # The timer horizon's own 403 stays, beside the scope's.
    timers = ops["POST /timers"]["responses"]["403"]["content"]["application/json"]["schema"]
    assert timers == {"anyOf": [{"$ref": "#/components/schemas/TimersHorizonOut"}, forbidden]}
