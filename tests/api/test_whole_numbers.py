"""A body's integer field takes a whole float (``2.0``, ``1e3``) as its int.

JSON Schema's ``integer`` (2020-12, which the published OpenAPI 3.1
document uses) counts ``2.0``, and Python clients that compute ``30 / 1``
send ``30.0``; the parsers read such a number as the int it is
(``api.wire.common.json_int``), before any bound, so the domain never sees
a float. A fraction, a bool or a string is refused as before, with the same
status and reason; so is a whole float beyond a field's bounds, and one
beyond what the database stores answers what that integer answers. Query
strings are text: ``?batch=2.0`` stays refused. Why: docs/design.md.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
import time_machine
from django.test import Client

from queenadmin.api.wire import queues as wire
from queenadmin.api.wire.common import json_int
from queenadmin.domain import queues, tokens
from queenadmin.errors import InvalidArgument

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 10, 8, 10, 0, 0, 123000, tzinfo=UTC)


@pytest.fixture
def client() -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {tokens.token_create(by=tokens.HOST, name='whole-numbers')}")


def send(client: Client, path: str, body: Any, method: str = "post") -> Any:
    data = body if isinstance(body, str) else json.dumps(body)
    return getattr(client, method)(path, data=data, content_type="application/json")


def ok(client: Client, path: str, body: Any, method: str = "post") -> Any:
    response = send(client, path, body, method)
    assert response.status_code in (200, 201), response.content
    return response.json()


def kv(client: Client, *ops: dict[str, Any]) -> list[dict[str, Any]]:
    return ok(client, "/api/v1/kv", {"operations": list(ops)})["results"]


def locks(client: Client, *ops: dict[str, Any]) -> list[dict[str, Any]]:
    return ok(client, "/api/v1/locks", {"operations": list(ops)})["results"]


def test_json_int_reads_ints_and_whole_floats_only():
    assert [json_int(v) for v in (0, 7, -3, 2.0, -0.0, 1e3, 2**70)] == [0, 7, -3, 2, 0, 1000, 2**70]
    assert all(type(json_int(v)) is int for v in (2.0, 1e3, 1e300))
    assert json_int(1e300) == int(1e300) != 10**300  # the float's exact value: bounds judge that
    for refused in (1.5, -0.5, 1e-300, True, False, None, "2", [2], {}, float("nan"), float("inf")):
        assert json_int(refused) is None, refused


# -- accepted: read as the int ------------------------------------------------


def test_kv_ttl_and_expect_spelt_as_whole_floats(client):
    with time_machine.travel(T0, tick=False):
        put = kv(client, {"op": "put", "ns": "w", "key": "k", "value": 1, "ttlSeconds": 30.0})[0]
        assert put["applied"] is True
        got = kv(client, {"op": "get", "ns": "w", "key": "k"})[0]
        assert got["expiresAt"] == "2026-10-08T10:00:30.123+00:00"
        version = float(put["version"])  # versions come from a sequence: 1.0 on a fresh database
        stale = kv(client, {"op": "put", "ns": "w", "key": "k", "value": 2, "forever": True, "expect": version + 1})
        assert (stale[0]["applied"], stale[0]["reason"]) == (False, "version")
        again = kv(client, {"op": "put", "ns": "w", "key": "k", "value": 2, "ttlSeconds": 6e1, "expect": version})[0]
        assert again["applied"] is True
        assert kv(client, {"op": "check", "ns": "w", "key": "k", "expect": float(again["version"])})[0]["applied"]
        fresh = kv(client, {"op": "putIfAbsent", "ns": "w", "key": "new", "value": 1, "forever": True, "expect": 0.0})
        assert fresh[0]["applied"] is True
        path_put = ok(client, "/api/v1/kv/w/p", {"value": 1, "ttlSeconds": 1e3}, "put")
        assert path_put["applied"] is True
        assert kv(client, {"op": "get", "ns": "w", "key": "p"})[0]["expiresAt"] == "2026-10-08T10:16:40.123+00:00"
        deleted = ok(client, "/api/v1/kv/w/p", {"expect": float(path_put["version"])}, "delete")
        assert deleted["applied"] is True


def test_locks_read_whole_floats_as_ints(client):
    first, second = locks(
        client,
        {"op": "acquire", "name": "sem", "ttlSeconds": 30.0, "limit": 2.0},
        {"op": "acquire", "name": "mutex", "ttlSeconds": 3e1},
    )
    assert (first["acquired"], second["acquired"]) == (True, True)
    assert (type(first["token"]), type(first["slot"])) == (int, int)
    # A semaphore of 2: one more permit, then none.
    assert locks(client, {"op": "acquire", "name": "sem", "ttlSeconds": 30, "limit": 2.0})[0]["acquired"] is True
    assert locks(client, {"op": "acquire", "name": "sem", "ttlSeconds": 30, "limit": 2})[0]["acquired"] is False
    token, slot = float(first["token"]), float(first["slot"])
    renewed = locks(client, {"op": "renew", "name": "sem", "token": token, "slot": slot, "ttlSeconds": 60.0})[0]
    assert (renewed["renewed"], renewed["slot"]) == (True, first["slot"])
    released = locks(client, {"op": "release", "name": "mutex", "token": float(second["token"])})[0]
    assert released["released"] is True


def test_queue_options_and_lease_extend_read_whole_floats_as_ints(client):
    answer = ok(client, "/api/v1/configure", {"queue": "wq", "options": {"leaseTime": 30.0, "priority": -3.0}})
    options = answer["options"]
    assert (options["leaseTime"], options["priority"]) == (30, -3)
    assert (type(options["leaseTime"]), type(options["priority"])) == (int, int)
    # Flat options too, and the queue reads back as stored.
    ok(client, "/api/v1/configure", {"queue": "wq", "retryLimit": 5.0})
    stored = client.get("/api/v1/resources/queues/wq").json()["options"]
    assert (stored["leaseTime"], stored["retryLimit"], stored["priority"]) == (30, 5, -3)
    extend = ok(client, "/api/v1/lease/00000000-0000-0000-0000-000000000000/extend", {"seconds": 2.0})
    assert (extend["success"], extend["renewed"]) == (False, 0)


def test_a_transaction_reads_whole_floats_as_ints(client):
    ok(client, "/api/v1/push", {"items": [{"queue": "tq", "payload": i} for i in range(3)]})
    answer = ok(
        client,
        "/api/v1/transaction",
        {
            "kv": [{"op": "put", "ns": "state", "key": "s", "value": 1, "ttlSeconds": 60.0}],
            "positions": [{"queue": "tq", "consumerGroup": "g", "offset": 2.0}],
        },
    )
    assert answer["success"] is True, answer
    claim = queues.queue_claim(request=queues.PopRequest(queue="tq", batch=10, group="g"))
    assert [m.offset for m in claim.messages] == [2]


def test_ephemeral_options_read_whole_floats_as_ints(client):
    options = {"ttlSeconds": 60.0, "maxLength": 1e3, "windowBuffer": {"ms": 5.0, "count": 2.0}}
    answer = ok(client, "/api/v1/ephemeral/configure", {"queue": "eq", "options": options})
    assert answer["options"] == {"ttlSeconds": 60, "maxLength": 1000, "windowBuffer": {"ms": 5, "count": 2}}
    assert list(answer["options"]) == ["ttlSeconds", "maxLength", "windowBuffer"]  # the order sent
    assert type(answer["options"]["ttlSeconds"]) is int
    assert type(answer["options"]["windowBuffer"]["count"]) is int


def test_fetch_and_changed_read_whole_floats_as_ints(client):
    ok(client, "/api/v1/push", {"items": [{"queue": "fq", "payload": i} for i in range(3)]})
    entry = {"queue": "fq", "partition": "Default", "offset": 1.0}
    fetched = ok(client, "/api/v1/fetch", {"entries": [entry], "maxBytes": 1e6})["entries"][0]
    assert [r["offset"] for r in fetched["records"]] == [1, 2]
    changed = ok(client, "/api/v1/partitions/changed", {"entries": [{"queue": "fq", "limit": 5.0}]})
    assert len(changed["entries"][0]["partitions"]) == 1


# -- refused as before: a fraction, a bool, a string --------------------------

NOT_INTEGERS = [1.5, True, "2"]
KV_BAD = {"error": "kv_bad_request"}
LOCKS_BAD = {"error": "locks_bad_request"}

REFUSALS = [
    (
        "/api/v1/kv",
        lambda v: {"operations": [{"op": "put", "ns": "w", "key": "k", "value": 1, "ttlSeconds": v}]},
        {**KV_BAD, "reason": "kv_bad_ttl"},
    ),
    (
        "/api/v1/kv",
        lambda v: {"operations": [{"op": "check", "ns": "w", "key": "k", "expect": v}]},
        {**KV_BAD, "reason": "kv_bad_expect"},
    ),
    (
        "/api/v1/locks",
        lambda v: {"operations": [{"op": "acquire", "name": "x", "ttlSeconds": v}]},
        {**LOCKS_BAD, "reason": "locks_bad_ttl"},
    ),
    (
        "/api/v1/locks",
        lambda v: {"operations": [{"op": "release", "name": "x", "token": v}]},
        {**LOCKS_BAD, "reason": "locks_bad_token"},
    ),
    (
        "/api/v1/locks",
        lambda v: {"operations": [{"op": "acquire", "name": "x", "ttlSeconds": 30, "limit": v}]},
        {**LOCKS_BAD, "reason": "locks_bad_limit"},
    ),
    (
        "/api/v1/locks",
        lambda v: {"operations": [{"op": "release", "name": "x", "token": 1, "slot": v}]},
        {**LOCKS_BAD, "reason": "locks_bad_slot"},
    ),
    (
        "/api/v1/configure",
        lambda v: {"queue": "wq", "options": {"leaseTime": v}},
        {"error": "option leaseTime must be an integer", "code": "bad_request"},
    ),
    (
        "/api/v1/lease/00000000-0000-0000-0000-000000000000/extend",
        lambda v: {"seconds": v},
        {"error": "seconds must be an integer of at least 1", "code": "bad_request"},
    ),
    (
        "/api/v1/transaction",
        lambda v: {"kv": [{"op": "put", "ns": "state", "key": "s", "value": 1, "ttlSeconds": v}]},
        {**KV_BAD, "reason": "kv_bad_ttl"},
    ),
    (
        "/api/v1/fetch",
        lambda v: {"entries": [{"queue": "fq", "partition": "Default", "offset": v}]},
        {"error": "entries[0].offset must be an integer of at least 0", "code": "bad_request"},
    ),
    (
        "/api/v1/ephemeral/configure",
        lambda v: {"queue": "eq", "options": {"maxLength": v}},
        {"error": "options.maxLength: Input should be a valid integer", "code": "ephemeral_bad_request"},
    ),
    (
        "/streams/v1/cycle",
        lambda v: {
            "query_id": "00000000-0000-0000-0000-000000000000",
            "partition_id": 1,
            "ack": {"transactionId": "t", "leaseId": "l", "count": v},
        },
        {"error": "ack.count must be a whole number", "code": "bad_request"},
    ),
]


@pytest.mark.parametrize("value", NOT_INTEGERS, ids=repr)
@pytest.mark.parametrize(("path", "body", "answer"), REFUSALS, ids=[f"{p}-{i}" for i, (p, _, _) in enumerate(REFUSALS)])
def test_a_fraction_a_bool_or_a_string_is_still_refused(client, path, body, answer, value):
    response = send(client, path, body(value))
    assert response.status_code == 400, response.content
    assert {k: response.json().get(k) for k in answer} == answer


def test_a_refused_position_offset_rolls_the_transaction_back(client):
    ok(client, "/api/v1/push", {"items": [{"queue": "tq", "payload": 1}]})
    for value in NOT_INTEGERS:
        answer = ok(client, "/api/v1/transaction", {"positions": [{"queue": "tq", "offset": value}]})
        assert (answer["success"], answer["reason"]) == (False, "bad_request")
        assert "positions[0].offset is the next offset to read (0 or more) or null" in answer["error"]


def test_query_string_integers_stay_text():
    """A pop's ``batch`` is text: ``2.0`` is no integer there (no JSON number involved)."""
    with pytest.raises(InvalidArgument, match=r"^batch must be an integer$"):
        wire.parse_pop_queue({"batch": "2.0"}, "q")


# -- large whole floats: bounds apply to the int ------------------------------


@pytest.mark.parametrize(
    ("path", "body", "answer"),
    [
        (
            "/api/v1/kv",
            lambda v: {"operations": [{"op": "put", "ns": "w", "key": "k", "value": 1, "ttlSeconds": v}]},
            "kv_bad_ttl",
        ),
        (
            "/api/v1/locks",
            lambda v: {"operations": [{"op": "acquire", "name": "x", "ttlSeconds": 30, "limit": v}]},
            "locks_bad_limit",
        ),
        ("/api/v1/locks", lambda v: {"operations": [{"op": "acquire", "name": "x", "ttlSeconds": v}]}, "locks_bad_ttl"),
    ],
)
@pytest.mark.parametrize("value", [1e300, 1.8e19, 3153600001.0])
def test_a_whole_float_past_a_bound_is_refused_with_its_reason(client, path, body, answer, value):
    response = send(client, path, body(value))
    assert (response.status_code, response.json()["reason"]) == (400, answer)


def _masked(response: Any) -> tuple[int, Any]:
    body = response.json()
    if isinstance(body, dict):
        body = {k: v for k, v in body.items() if k not in ("transactionId", "safeTime", "updatedAt")}
    return response.status_code, body


#: Fields with no upper bound (or only the database's), beyond a bigint:
#: the whole float answers what its int answers, never a 5xx.
UNBOUNDED = [
    ("/api/v1/kv", '{"operations":[{"op":"put","ns":"w","key":"k","value":2,"forever":true,"expect":%s}]}', "post"),
    ("/api/v1/kv", '{"operations":[{"op":"check","ns":"w","key":"k","expect":%s}]}', "post"),
    ("/api/v1/kv/w/k", '{"expect":%s}', "delete"),
    ("/api/v1/locks", '{"operations":[{"op":"release","name":"held","token":%s}]}', "post"),
    ("/api/v1/locks", '{"operations":[{"op":"renew","name":"held","token":%s,"ttlSeconds":30}]}', "post"),
    ("/api/v1/configure", '{"queue":"wq","options":{"leaseTime":%s}}', "post"),
    ("/api/v1/configure", '{"queue":"wq","options":{"minPopWaitTime":%s}}', "post"),
    ("/api/v1/lease/00000000-0000-0000-0000-000000000000/extend", '{"seconds":%s}', "post"),
    ("/api/v1/transaction", '{"positions":[{"queue":"wq","consumerGroup":"g","offset":%s}]}', "post"),
    ("/api/v1/fetch", '{"entries":[{"queue":"wq","partition":"Default","offset":%s}]}', "post"),
    ("/api/v1/fetch", '{"entries":[{"queue":"wq","partition":"Default","offset":0}],"maxBytes":%s}', "post"),
    ("/api/v1/partitions/changed", '{"entries":[{"queue":"wq","limit":%s}]}', "post"),
    ("/api/v1/ack", '{"transactionId":"t","partitionId":%s}', "post"),
]


@pytest.mark.parametrize("spelt", ["1e300", "9.3e18", "1.8446744073709552e19"])
def test_a_whole_float_beyond_a_bigint_answers_what_its_int_answers(client, spelt):
    ok(client, "/api/v1/push", {"items": [{"queue": "wq", "payload": 1}]})
    kv(client, {"op": "put", "ns": "w", "key": "k", "value": 1, "forever": True})
    locks(client, {"op": "acquire", "name": "held", "ttlSeconds": 30})
    as_int = str(int(float(spelt)))
    for path, body, method in UNBOUNDED:
        by_float = send(client, path, body % spelt, method)
        by_int = send(client, path, body % as_int, method)
        assert by_float.status_code < 500, (path, by_float.content)
        assert _masked(by_float) == _masked(by_int), (path, body)
