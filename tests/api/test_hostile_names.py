"""Hostile names at every name field of the API, on both databases.

Each field gets every value of ``HOSTILE``: no answer is a 500; a refusal
is a 400 (413 for a name over its byte budget, as the protocol says) in the
route's error envelope; a name that is accepted can be deleted through the
API. The values that break the rule of stored names (``domain.names``) are
refused everywhere; ``/``, ``..``, ``%2F`` and markup are names like any
other.

``HOSTILE`` (value name -> text) and ``REFUSED`` are the table the
dashboard's sweep reuses.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any
from urllib.parse import quote

import pytest
from django.test import Client
from django.utils import timezone

from queenadmin.api.routes import ROUTES
from queenadmin.domain import tokens
from queenadmin.domain.queues.options import AUTO_CREATE_OPTIONS
from queenadmin.models import ConsumerCursor, KVEntry, Partition, Queue, Timer, TraceNameSummary

pytestmark = pytest.mark.django_db

#: The hostile values, by name.
HOSTILE: dict[str, str] = {
    "newline": "hq\nboom",
    "tab": "hq\tboom",
    "nul": "hq\x00boom",
    "slash": "hq/boom",
    "dotdot": "..",
    "percent-2f": "hq%2Fboom",
    "513-bytes": "h" * 513,
    "rlm": "hq\u200fboom",
    "script": "<script>alert(1)</script>",
}
#: The values no name may hold (the length aside: each field has its budget).
REFUSED = frozenset({"newline", "tab", "nul", "rlm"})
#: The values every name field takes (a KV namespace aside: its pattern is
#: lowercase letters, digits, ``.``, ``_`` and ``-``).
ACCEPTED = frozenset({"slash", "dotdot", "percent-2f", "script"})


def segment(name: str) -> str:
    """``name`` as one path segment: every reserved character quoted, and a
    name of dots spelled ``%2E`` (a client would drop ``.``/``..`` segments)."""
    quoted = quote(name, safe="")
    return quoted.replace(".", "%2E") if set(name) == {"."} else quoted


@pytest.fixture
def client() -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {tokens.token_create(by=tokens.HOST, name='hostile', scope='admin')}")


def post(client: Client, path: str, body: Any) -> Any:
    return client.post(path, data=json.dumps(body), content_type="application/json")


def sweep(field: str, attempt: Callable[[str], Any], deleted: Callable[[str], bool]) -> None:
    """Send every hostile value to ``attempt``; check the answer's shape,
    and that each accepted name is gone after ``deleted`` removed it."""
    for label, value in HOSTILE.items():
        answer = attempt(value)
        where = f"{field}={label}: {answer.status_code} {answer.content[:200]!r}"
        assert answer.status_code < 500, where
        if answer.status_code >= 400:
            assert answer.status_code == 400 or (answer.status_code == 413 and label == "513-bytes"), where
            assert answer["Content-Type"].startswith("application/json"), where
            assert "error" in answer.json(), where
        else:
            assert label not in REFUSED, where
            assert deleted(value), where
        if label in REFUSED:
            assert answer.status_code == 400, where
        if label in ACCEPTED and field != "kv namespace":
            assert answer.status_code < 300, where


def test_queue_names(client):
    """Push to every hostile queue name: refused ones write nothing; the
    accepted ones are deleted through ``DELETE /resources/queues/{queue}``."""

    def attempt(name: str) -> Any:
        return post(client, "/api/v1/push", {"items": [{"queue": name, "payload": 1}]})

    def deleted(name: str) -> bool:
        answer = client.delete(f"/api/v1/resources/queues/{segment(name)}")
        return answer.status_code == 200 and answer.json()["deleted"] and not Queue.objects.filter(name=name).exists()

    sweep("queue", attempt, deleted)
    assert not Queue.objects.exists()


def test_configured_queue_names(client):
    """``POST /configure`` takes the same names as a push."""

    def attempt(name: str) -> Any:
        return post(client, "/api/v1/configure", {"queue": name})

    def deleted(name: str) -> bool:
        return client.delete(f"/api/v1/resources/queues/{segment(name)}").status_code == 200

    sweep("configure", attempt, deleted)
    assert not Queue.objects.exists()


def test_partition_names(client):
    """A partition goes with its queue: deleting the queue deletes it."""

    def attempt(name: str) -> Any:
        return post(client, "/api/v1/push", {"items": [{"queue": "hq-parts", "partition": name, "payload": 1}]})

    def deleted(name: str) -> bool:
        assert Partition.objects.filter(name=name).exists()
        return client.delete("/api/v1/resources/queues/hq-parts").status_code == 200

    sweep("partition", attempt, deleted)
    assert not Partition.objects.exists()


def test_consumer_group_names(client):
    """A group's position committed under every hostile name (its cursor is
    stored); the accepted groups are deleted through
    ``DELETE /consumer-groups/{group}``."""
    post(client, "/api/v1/push", {"items": [{"queue": "hq-groups", "payload": 1}]})

    def attempt(name: str) -> Any:
        position = {"queue": "hq-groups", "partition": "Default", "consumerGroup": name, "offset": 1}
        return post(client, "/api/v1/transaction", {"positions": [position]})

    def deleted(name: str) -> bool:
        assert ConsumerCursor.objects.filter(group=name).exists()
        answer = client.delete(f"/api/v1/consumer-groups/{segment(name)}")
        return answer.status_code == 200 and not ConsumerCursor.objects.filter(group=name).exists()

    sweep("consumerGroup", attempt, deleted)


def test_trace_names(client):
    """A trace filed under every hostile name; deleting its queue deletes
    the accepted ones, which ``/traces/by-name/{name}`` found before."""

    def attempt(name: str) -> Any:
        (pushed,) = post(client, "/api/v1/push", {"items": [{"queue": "hq-traces", "payload": 1}]}).json()
        pid = Partition.objects.get(queue__name="hq-traces").pk
        body = {"transactionId": pushed["transaction_id"], "partitionId": str(pid), "traceNames": [name], "data": {}}
        return post(client, "/api/v1/traces", body)

    def deleted(name: str) -> bool:
        found = client.get(f"/api/v1/traces/by-name/{segment(name)}").json()
        assert len(found["traces"]) == 1, found
        client.delete("/api/v1/resources/queues/hq-traces")
        return client.get(f"/api/v1/traces/by-name/{segment(name)}").json()["traces"] == []

    sweep("traceNames", attempt, deleted)
    assert not TraceNameSummary.objects.filter(name__startswith="hq").exists()


def test_kv_namespaces(client):
    """A namespace is ``^[a-z0-9][a-z0-9._-]{0,63}$``: every hostile one is refused."""

    def attempt(name: str) -> Any:
        return post(
            client, "/api/v1/kv", {"operations": [{"op": "put", "ns": name, "key": "k", "value": 1, "forever": True}]}
        )

    sweep("kv namespace", attempt, lambda name: False)
    assert not KVEntry.objects.filter(key="k").exists()


def test_kv_keys(client):
    """A put under every hostile key; the accepted keys are deleted through
    ``DELETE /kv/{ns}/{key}``."""

    def attempt(name: str) -> Any:
        return post(
            client, "/api/v1/kv", {"operations": [{"op": "put", "ns": "hq", "key": name, "value": 1, "forever": True}]}
        )

    def deleted(name: str) -> bool:
        answer = client.delete(f"/api/v1/kv/hq/{segment(name)}")
        return answer.status_code == 200 and not KVEntry.objects.filter(namespace="hq", key=name).exists()

    sweep("kv key", attempt, deleted)
    assert not KVEntry.objects.filter(namespace="hq").exists()


def test_lock_names(client):
    """An acquire under every hostile lock name; the accepted ones are released."""
    tokens_of: dict[str, int] = {}

    def attempt(name: str) -> Any:
        answer = post(client, "/api/v1/locks", {"operations": [{"op": "acquire", "name": name, "ttlSeconds": 30}]})
        if answer.status_code == 200:
            tokens_of[name] = answer.json()["results"][0]["token"]
        return answer

    def deleted(name: str) -> bool:
        release = {"op": "release", "name": name, "token": tokens_of[name]}
        answer = post(client, "/api/v1/locks", {"operations": [release]})
        return answer.status_code == 200 and answer.json()["results"][0]["released"]

    sweep("lock name", attempt, deleted)


def _schedule(client: Client, queue: str, key: str) -> Any:
    op = {
        "op": "schedule",
        "queue": queue,
        "timerKey": key,
        "delayMs": 3_600_000,
        "txn": "t",
        "payload": base64.b64encode(b"{}").decode(),
    }
    return post(client, "/api/v1/timers", [op])


def test_timer_keys(client):
    """A timer under every hostile key; the accepted ones are cancelled
    through ``DELETE /timers/{queue}/{key}``."""

    def deleted(key: str) -> bool:
        answer = client.delete(f"/api/v1/timers/hq-timers/{segment(key)}")
        return answer.json()["status"] == "cancelled" and not Timer.objects.filter(timer_key=key).exists()

    sweep("timerKey", lambda key: _schedule(client, "hq-timers", key), deleted)
    assert not Timer.objects.exists()


def test_timer_queues(client):
    """A timer into every hostile queue; the accepted ones are cancelled
    through ``POST /timers`` (a queue's ``/`` through the DELETE route
    needs the raw path: ``test_timer_queue_with_a_slash_is_cancelled_by_the_client``)."""

    def deleted(queue: str) -> bool:
        answer = post(client, "/api/v1/timers", [{"op": "cancel", "queue": queue, "timerKey": "k"}])
        return answer.json()["results"][0]["status"] == "cancelled" and not Timer.objects.exists()

    sweep("timer queue", lambda queue: _schedule(client, queue, "k"), deleted)


def test_ephemeral_queue_names(client):
    """A push to every hostile ephemeral queue; the accepted ones are
    deleted through ``DELETE /ephemeral/queue/{queue}``."""

    def attempt(name: str) -> Any:
        return post(client, "/api/v1/ephemeral/push", {"queue": name, "messages": [{"payload": 1}]})

    def deleted(name: str) -> bool:
        answer = client.delete(f"/api/v1/ephemeral/queue/{segment(name)}")
        return answer.status_code == 200 and answer.json()["queue"] == name and answer.json()["deleted"] >= 1

    sweep("ephemeral queue", attempt, deleted)


def test_stream_query_names(client):
    """A stream query registered under every hostile name: refused in the
    envelope, or registered (stream queries have no delete route)."""
    post(client, "/api/v1/configure", {"queue": "hq-source"})

    def attempt(name: str) -> Any:
        return post(client, "/streams/v1/queries", {"name": name, "source_queue": "hq-source", "config_hash": "h"})

    sweep("stream query name", attempt, lambda name: True)


# --------------------------------------------------------------------------
# Names stored before the rule


def _legacy_queue(name: str) -> Queue:
    """A queue as a database from before the rule may hold it."""
    now = timezone.now()
    queue = Queue.objects.create(name=name, options=dict(AUTO_CREATE_OPTIONS), created_at=now)
    Partition.objects.create(queue=queue, name="Default", created_at=now)
    return queue


@pytest.mark.parametrize("spelled", [quote, segment], ids=["slash-as-is", "slash-as-%2F"])
def test_a_legacy_queue_named_with_a_slash_and_a_newline_is_deleted(client, spelled):
    """``orders.a/\\nb`` (stored before the rule) is deleted through the API,
    its ``/`` sent as is (the client's ``quote``) or as ``%2F``: 200."""
    _legacy_queue("orders.a/\nb")
    answer = client.delete("/api/v1/resources/queues/" + spelled("orders.a/\nb"))
    assert (answer.status_code, answer.json()["deleted"]) == (200, True)
    assert not Queue.objects.exists()


def test_a_legacy_queue_named_with_a_newline_is_read_and_deleted(client):
    """``orders.\\nboom`` is still found by its detail and depth, then deleted."""
    _legacy_queue("orders.\nboom")
    path = "/api/v1/resources/queues/" + segment("orders.\nboom")
    assert client.get(path).status_code == 200
    assert client.get(path + "/depth").status_code == 200
    assert client.delete(path).status_code == 200
    assert not Queue.objects.exists()


def test_a_push_to_a_name_with_a_newline_is_refused(client):
    """The push that took the pages down is now a 400, and stores nothing."""
    answer = post(client, "/api/v1/push", {"items": [{"queue": "orders.\nboom", "payload": 1}]})
    assert (answer.status_code, answer.json()) == (
        400,
        {"error": "items[0].queue must not contain control characters", "code": "bad_request"},
    )
    assert not Queue.objects.exists()


def test_a_legacy_consumer_group_is_deleted_on_its_queue_and_everywhere(client):
    """Groups stored before the rule are deleted through both group deletes,
    one with a ``/`` in its name too."""
    queue = _legacy_queue("orders.legacy")
    partition = queue.partitions.get()
    ConsumerCursor.objects.create(partition=partition, group="g\nh")
    ConsumerCursor.objects.create(partition=partition, group="g/\u202eh")
    answer = client.delete("/api/v1/consumer-groups/" + segment("g\nh") + "/queues/orders.legacy")
    assert answer.status_code == 200
    answer = client.delete("/api/v1/consumer-groups/" + segment("g/\u202eh"))
    assert answer.status_code == 200
    assert not ConsumerCursor.objects.exists()


def test_a_legacy_timer_is_cancelled_through_its_route(client):
    """A timer stored before the rule (newline in its queue and key) is
    cancelled through ``DELETE /timers/{queue}/{key}``."""
    now = timezone.now()
    Timer.objects.create(
        queue="orders.t\n",
        timer_key="k/\nx",
        deliver_at=now,
        fire_at=now + timedelta(hours=1),
        txn="t",
        message_id="0190b6a2-3c4d-7e8f-9a0b-1c2d3e4f5a6b",
        payload=b"{}",
        payload_json="{}",
        created_at=now,
        updated_at=now,
    )
    answer = client.delete("/api/v1/timers/" + segment("orders.t\n") + "/" + quote("k/\nx"))
    assert (answer.status_code, answer.json()["status"]) == (200, "cancelled")
    assert not Timer.objects.exists()


@pytest.mark.live
async def test_timer_queue_with_a_slash_is_cancelled_by_the_client(queen, unique):
    """The official client sends a queue's ``/`` as ``%2F`` and the key's as
    ``/``: its cancel and peek reach the timer, not queue ``a``'s key ``b/k``."""
    queue = unique("hq") + "/b"
    await queen.timers.schedule(queue, "k/1", {"n": 1}, delay_ms=3_600_000)
    assert (await queen.timers.peek(queue, "k/1"))["found"] is True
    assert (await queen.timers.cancel(queue, "k/1"))["status"] == "cancelled"
    assert (await queen.timers.peek(queue, "k/1"))["found"] is False


# --------------------------------------------------------------------------
# NUL in read parameters (finding 6)

#: The reads that answered 500 on PostgreSQL for a NUL, and where it went.
NUL_READS = [
    ("/api/v1/messages?queue=a%00b", "queue must not contain NUL"),
    ("/api/v1/messages?partition=a%00b", "partition must not contain NUL"),
    ("/api/v1/messages?after=a%00b", "after must not contain NUL"),
    ("/api/v1/traces/by-name/a%00b", "name must not contain NUL"),
    ("/api/v1/traces/1/a%00b", "transactionId must not contain NUL"),
    ("/api/v1/messages/1/a%00b", "transactionId must not contain NUL"),
    ("/api/v1/resources/partitions?queue=a%00b", "queue must not contain NUL"),
]
NUL_TIMER_READS = [
    ("/api/v1/timers/a%00b", "queue must not contain NUL"),
    ("/api/v1/timers/q/a%00b", "timerKey must not contain NUL"),
]


def test_nul_in_a_read_parameter_answers_400(client):
    """A NUL in the query string or the path of a read is a 400 naming the
    parameter, in the route's family, on both databases (PostgreSQL
    answered 500: it refuses NUL in any text it is sent)."""
    for path, detail in NUL_READS:
        answer = client.get(path)
        assert (answer.status_code, answer.json()) == (400, {"error": detail, "code": "bad_request"}), path
    for path, detail in NUL_TIMER_READS:
        answer = client.get(path)
        body = {"error": "timers_bad_request", "reason": "timers_bad_request", "detail": detail}
        assert (answer.status_code, answer.json()) == (400, body), path
    answer = client.get("/api/v1/kv/hq/a%00b")
    assert answer.status_code == 400
    assert answer.json() == {"error": "kv_bad_request", "reason": "kv_bad_key", "detail": "key must not contain NUL"}


#: Query parameters the timer reads take that the document does not declare
#: (the routes read ``request.GET`` themselves): the reason the check of
#: ``api/envelope.py`` covers every parameter, not only the declared ones.
NUL_UNDECLARED_TIMER_READS = [
    ("GET", "/api/v1/timers/q?mode=count&prefix=a%00b", "prefix must not contain NUL"),
    ("GET", "/api/v1/timers/q?after=a%00b", "after must not contain NUL"),
    ("DELETE", "/api/v1/timers/q/k?txn=a%00b", "txn must not contain NUL"),
]


@pytest.mark.parametrize(("method", "path", "detail"), NUL_UNDECLARED_TIMER_READS)
def test_nul_in_a_query_parameter_a_route_reads_undeclared_answers_400(client, method, path, detail):
    """A NUL in a parameter the timer routes read but the document does not
    declare is a 400 in the timers' family, as in a declared one: the value
    would otherwise reach the database (a 500 on PostgreSQL)."""
    answer = client.generic(method, path)
    body = {"error": "timers_bad_request", "reason": "timers_bad_request", "detail": detail}
    assert (answer.status_code, answer.json()) == (400, body)


def test_nul_in_a_declared_and_an_undeclared_query_parameter_answers_the_same(client):
    """A declared parameter (``queue`` of ``GET /resources/partitions``) and
    one no route reads (``probe``) get the same 400 naming the parameter."""
    for name in ("queue", "probe"):
        answer = client.get(f"/api/v1/resources/partitions?{name}=a%00b")
        expected = {"error": f"{name} must not contain NUL", "code": "bad_request"}
        assert (answer.status_code, answer.json()) == (400, expected), name


def test_nul_in_any_parameter_of_any_route_answers_400(client):
    """Every route of the API (``routes.ROUTES``), with a NUL in each path
    parameter in turn and then in the query string: 400 in the JSON
    envelope before the route runs, so a new route cannot answer 500."""
    for route in ROUTES:
        method, template = route.split(" ", 1)
        base = template if template.startswith("/streams/") else "/api/v1" + template
        params = re.findall(r"\{[^}]+\}", base)
        paths = [re.sub(r"\{[^}]+\}", "x", base.replace(p, "a%00b", 1)) for p in params]
        paths.append(re.sub(r"\{[^}]+\}", "x", base) + "?probe=a%00b")
        for path in paths:
            answer = client.generic(method, path)
            assert answer.status_code == 400, (route, path, answer.status_code, answer.content[:200])
            assert "error" in answer.json(), (route, path)
