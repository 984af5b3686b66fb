"""/api/v1/kv and friends over HTTP (Django's test client): exact answers."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.test import Client, override_settings

from queenadmin.domain import kv, tokens
from queenadmin.models import KVEntry

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 10, 8, 10, 0, 0, 123000, tzinfo=UTC)


@pytest.fixture
def client() -> Client:
    token = tokens.token_create(by=tokens.HOST, name="api-tests")
    return Client(HTTP_AUTHORIZATION=f"Bearer {token}")


def post(client: Client, body: Any, path: str = "/api/v1/kv") -> Any:
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    return client.post(path, data=data, content_type="application/json")


def kv_ops(client: Client, *ops: dict[str, Any]) -> Any:
    return post(client, {"operations": list(ops)})


# -- happy paths, exact bodies ----------------------------------------------


def test_put_get_and_miss_exact_bodies(client):
    with time_machine.travel(T0, tick=False):
        response = kv_ops(
            client,
            {"op": "put", "ns": "carts", "key": "c-1", "value": {"items": 3}, "ttlSeconds": 60},
            {"op": "get", "ns": "carts", "key": "nope"},
        )
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    body = response.json()
    version = body["results"][0]["version"]
    assert body == {
        "results": [
            {"index": 0, "op": "put", "applied": True, "key": "c-1", "value": {"items": 3}, "version": version},
            {"index": 1, "op": "get", "found": False, "key": "nope"},
        ]
    }
    with time_machine.travel(T0, tick=False):
        found = kv_ops(client, {"op": "get", "ns": "carts", "key": "c-1"}).json()
    assert found == {
        "results": [
            {
                "index": 0,
                "op": "get",
                "found": True,
                "key": "c-1",
                "value": {"items": 3},
                "version": version,
                "expiresAt": "2026-10-08T10:01:00.123+00:00",
                "updatedAt": "2026-10-08T10:00:00.123+00:00",
            }
        ]
    }


def test_bare_array_body_and_empty_operations(client):
    assert post(client, []).json() == {"results": []}
    assert post(client, {"operations": []}).json() == {"results": []}
    response = post(client, [{"op": "get", "ns": "t", "key": "k"}])
    assert response.json() == {"results": [{"index": 0, "op": "get", "found": False, "key": "k"}]}


def test_refused_writes_carry_the_current_state(client):
    first = kv_ops(client, {"op": "putIfAbsent", "ns": "t", "key": "k", "value": "w", "forever": True}).json()
    version = first["results"][0]["version"]
    body = kv_ops(client, {"op": "putIfAbsent", "ns": "t", "key": "k", "value": "l", "forever": True}).json()
    assert body == {
        "results": [
            {
                "index": 0,
                "op": "putIfAbsent",
                "applied": False,
                "reason": "exists",
                "key": "k",
                "value": "w",
                "version": version,
            }
        ]
    }


def test_check_held_has_no_value_key(client):
    version = kv_ops(client, {"op": "put", "ns": "t", "key": "k", "value": 1, "forever": True}).json()["results"][0][
        "version"
    ]
    body = kv_ops(client, {"op": "check", "ns": "t", "key": "k", "expect": version}).json()
    assert body == {"results": [{"index": 0, "op": "check", "applied": True, "key": "k", "version": version}]}


def test_get_many_and_get_prefix_bodies(client):
    with time_machine.travel(T0, tick=False):
        kv_ops(
            client,
            {"op": "put", "ns": "t", "key": "a/1", "value": 1, "forever": True},
            {"op": "put", "ns": "t", "key": "a/2", "value": 2, "forever": True},
        )
        body = kv_ops(
            client,
            {"op": "getMany", "ns": "t", "keys": ["a/2", "x"]},
            {"op": "getPrefix", "ns": "t", "prefix": "a/", "limit": 1, "keysOnly": True},
        ).json()
    many, page = body["results"]
    assert many == {
        "index": 0,
        "op": "getMany",
        "rows": [
            {
                "key": "a/2",
                "value": 2,
                "version": many["rows"][0]["version"],
                "expiresAt": None,
                "updatedAt": "2026-10-08T10:00:00.123+00:00",
            }
        ],
        "missing": ["x"],
        "truncated": False,
    }
    assert page == {
        "index": 1,
        "op": "getPrefix",
        "rows": [
            {
                "key": "a/1",
                "version": page["rows"][0]["version"],
                "expiresAt": None,
                "updatedAt": "2026-10-08T10:00:00.123+00:00",
            }
        ],
        "truncated": True,
        "nextAfter": "a/1",
    }


def test_required_failure_answers_the_precondition_body_and_writes_nothing(client):
    kv_ops(client, {"op": "put", "ns": "t", "key": "g", "value": {"owner": "a"}, "forever": True})
    version = KVEntry.objects.get(key="g").version
    response = kv_ops(
        client,
        {"op": "put", "ns": "t", "key": "new", "value": 1, "forever": True},
        {"op": "put", "ns": "t", "key": "g", "value": 2, "forever": True, "expect": version + 7, "required": True},
    )
    assert response.status_code == 200
    assert response.json() == {
        "ok": False,
        "reason": "kv_precondition",
        "failedIndex": 1,
        "kvReason": "version",
        "version": version,
        "value": {"owner": "a"},
    }
    assert not KVEntry.objects.filter(key="new").exists()
    assert KVEntry.objects.get(key="g").version == version


# -- bad input: status, exact body, nothing written ---------------------------

BAD_CALLS = [
    ("not json", "kv_bad_body", 400),
    ("NaN", "kv_bad_body", 400),
    ('{"operations": 3}', "kv_bad_body", 400),
    ('{"ops": []}', "kv_bad_body", 400),
    ('"a string"', "kv_bad_body", 400),
    ("", "kv_bad_body", 400),
    ([5], "kv_bad_request", 400),
    ([{"op": "frobnicate", "ns": "t", "key": "k"}], "kv_unknown_op", 400),
    ([{"op": "get", "ns": "t", "key": "k", "tenantId": "x"}], "kv_tenant_not_an_input", 400),
    ([{"op": "get", "ns": "BAD", "key": "k"}], "kv_bad_namespace", 400),
    ([{"op": "get", "ns": "t", "key": ""}], "kv_bad_key", 400),
    ([{"op": "put", "ns": "t", "key": "k", "value": 1}], "kv_expiry_not_specified", 400),
    ([{"op": "put", "ns": "t", "key": "k", "value": 1, "ttlSeconds": 0}], "kv_bad_ttl", 400),
    ([{"op": "put", "ns": "t", "key": "k", "value": 1, "forever": True, "expect": -2}], "kv_bad_expect", 400),
    ([{"op": "getPrefix", "ns": "t", "prefix": ""}], "kv_prefix_required", 400),
    ([{"op": "get", "ns": "t", "key": f"k{i}"} for i in range(257)], "kv_too_many_ops", 400),
    ([{"op": "getMany", "ns": "t", "keys": [f"k{i}" for i in range(1025)]}], "kv_too_many_keys", 400),
    (
        [
            {"op": "put", "ns": "t", "key": "k", "value": 1, "forever": True},
            {"op": "delete", "ns": "t", "key": "k"},
        ],
        "kv_duplicate_key_in_call",
        400,
    ),
    ([{"op": "get", "ns": "t", "key": "k" * 513}], "kv_key_too_large", 413),
    ([{"op": "put", "ns": "t", "key": "k", "value": "v" * 70000, "forever": True}], "kv_value_too_large", 413),
]


@pytest.mark.parametrize(("body", "reason", "status"), BAD_CALLS)
def test_bad_calls_answer_their_reason_and_write_nothing(client, body, reason, status):
    # A valid write rides along, to prove the call is refused whole.
    if isinstance(body, list):
        body = [*body, {"op": "put", "ns": "t", "key": "rider", "value": 1, "forever": True}]
    response = post(client, body)
    assert response.status_code == status
    payload = response.json()
    assert payload["error"] == ("payload_too_large" if status == 413 else "kv_bad_request")
    assert payload["reason"] == reason
    assert isinstance(payload["detail"], str)
    assert payload["detail"]
    assert set(payload) == {"error", "reason", "detail"}
    assert KVEntry.objects.count() == 0


#: An ``incr`` the stored value refuses (the request is valid): what the key
#: holds, the ``incr`` and the refusal's detail. 409 (a conflict with the
#: key's current state), the KV envelope with reason ``kv_bad_request``.
BEYOND = "is beyond what incr computes exactly (magnitude below 1e100, at most 100 decimal places)"
STATE_REFUSALS = [
    (10**100 - 1, 1, f"the result {BEYOND}"),
    (10**20, 0.5, "the result has more significant digits than a fractional number keeps (17)"),
    (10**100, 1, f"the stored value {BEYOND}"),
]


@pytest.mark.parametrize(("stored", "delta", "detail"), STATE_REFUSALS, ids=["past-1e100", "17-digits", "stored-1e100"])
def test_an_incr_the_stored_value_refuses_answers_409_and_writes_nothing(client, stored, delta, detail):
    kv_ops(client, {"op": "put", "ns": "t", "key": "n", "value": stored, "forever": True})
    version = KVEntry.objects.get(key="n").version
    response = kv_ops(
        client,
        {"op": "put", "ns": "t", "key": "rider", "value": 1, "forever": True},
        {"op": "incr", "ns": "t", "key": "n", "delta": delta, "forever": True},
    )
    assert response.status_code == 409
    assert response.json() == {"error": "kv_bad_request", "reason": "kv_bad_request", "detail": detail}
    assert not KVEntry.objects.filter(key="rider").exists()
    assert (KVEntry.objects.get(key="n").version, kv.kv_get(namespace="t", key="n").value) == (version, stored)


# -- path routes --------------------------------------------------------------


def test_path_routes_round_trip_keys_with_slashes(client):
    response = client.put(
        "/api/v1/kv/app/a/b%2Fc", data=json.dumps({"value": [1], "forever": True}), content_type="application/json"
    )
    assert response.status_code == 200
    body = response.json()
    assert (body["op"], body["applied"], body["key"]) == ("put", True, "a/b/c")
    got = client.get("/api/v1/kv/app/a/b/c")
    assert got.status_code == 200
    assert got["ETag"] == f'"{body["version"]}"'
    assert got.json()["value"] == [1]
    gone = client.delete("/api/v1/kv/app/a/b/c")
    assert gone.json()["applied"] is True
    miss = client.get("/api/v1/kv/app/a/b/c")
    assert miss.json() == {"index": 0, "op": "get", "found": False, "key": "a/b/c"}
    assert "ETag" not in miss


def test_path_routes_refuse_query_strings_and_fields_in_body(client):
    response = client.get("/api/v1/kv/app/k?x=1")
    assert response.status_code == 400
    assert response.json()["reason"] == "kv_no_query_string"
    response = client.put(
        "/api/v1/kv/app/k",
        data=json.dumps({"key": "other", "value": 1, "forever": True}),
        content_type="application/json",
    )
    assert (response.status_code, response.json()["reason"]) == (400, "kv_field_in_path")
    response = client.put("/api/v1/kv/app/k", data="[1]", content_type="application/json")
    assert (response.status_code, response.json()["reason"]) == (400, "kv_bad_body")
    response = client.put("/api/v1/kv/app/k", data=json.dumps({"value": 1}), content_type="application/json")
    assert (response.status_code, response.json()["reason"]) == (400, "kv_expiry_not_specified")
    assert KVEntry.objects.count() == 0


def test_path_delete_with_expect_and_empty_or_null_body(client):
    v = client.put("/api/v1/kv/app/k", data=json.dumps({"value": 1, "forever": True}), content_type="application/json")
    version = v.json()["version"]
    stale = client.delete("/api/v1/kv/app/k", data=json.dumps({"expect": version + 1}), content_type="application/json")
    assert (stale.json()["applied"], stale.json()["reason"]) == (False, "version")
    null_body = client.delete("/api/v1/kv/app/k", data="null", content_type="application/json")
    assert null_body.json()["applied"] is True


# -- console routes ----------------------------------------------------------


def test_namespaces_and_console_list(client):
    with time_machine.travel(T0, tick=False):
        kv_ops(
            client,
            {"op": "put", "ns": "n1", "key": "a", "value": "x", "ttlSeconds": 1},
            {"op": "put", "ns": "n1", "key": "b", "value": "y", "forever": True},
            {"op": "put", "ns": "n2", "key": "c", "value": 1, "forever": True},
        )
    with time_machine.travel(T0 + timedelta(seconds=5), tick=False):
        assert client.get("/api/v1/resources/kv/namespaces").json() == {
            "namespaces": [{"namespace": "n1", "keys": 2}, {"namespace": "n2", "keys": 1}]
        }
        live = post(client, {"namespace": "n1"}, "/api/v1/resources/kv/list").json()
        assert [r["key"] for r in live["rows"]] == ["b"]
        assert live["rows"][0]["updatedAt"] == "2026-10-08T10:00:00.123000Z"
        assert (live["truncated"], live["nextAfter"]) == (False, None)
        everything = post(client, {"namespace": "n1", "includeExpired": True, "limit": 1}, "/api/v1/resources/kv/list")
        body = everything.json()
        assert body["rows"] == [
            {
                "key": "a",
                "value": "x",
                "version": body["rows"][0]["version"],
                "expiresAt": "2026-10-08T10:00:01.123000Z",
                "updatedAt": "2026-10-08T10:00:00.123000Z",
                "expired": True,
            }
        ]
        assert (body["truncated"], body["nextAfter"], body["bytes"]) == (True, "a", len("a") + len('"x"'))
    bad = post(client, {"namespace": "NOPE"}, "/api/v1/resources/kv/list")
    assert (bad.status_code, bad.json()["reason"]) == (400, "kv_bad_namespace")


# -- the envelope around every route -----------------------------------------


def test_missing_wrong_and_revoked_tokens_get_401():
    anonymous = Client()
    for headers in ({}, {"HTTP_AUTHORIZATION": "Bearer nope"}, {"HTTP_AUTHORIZATION": "Basic abc"}):
        response = anonymous.post("/api/v1/kv", data="[]", content_type="application/json", **headers)
        assert response.status_code == 401
        assert response.json() == {
            "error": "unauthorized",
            "code": "unauthorized",
            "detail": "A valid bearer token is required.",
        }
    token = tokens.token_create(by=tokens.HOST, name="short-lived")
    ok = anonymous.post("/api/v1/kv", data="[]", content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert ok.status_code == 200
    tokens.token_revoke(name="short-lived")
    revoked = anonymous.post(
        "/api/v1/kv", data="[]", content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )
    assert revoked.status_code == 401


@override_settings(QUEENADMIN_OPEN_API=True)
def test_the_open_api_setting_serves_without_a_token():
    assert Client().post("/api/v1/kv", data="[]", content_type="application/json").status_code == 200


def test_unknown_api_routes_are_no_such_route(client):
    for path in ("/api/v1/nope", "/api/v2/kv", "/api"):
        response = client.get(path)
        assert response.status_code == 404
        assert response.json() == {"code": "no_such_route", "error": "not found", "path": path}


def test_health_needs_no_token():
    response = Client().get("/health")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})


@override_settings(QUEENADMIN_MAX_BODY_BYTES=1000)
def test_oversize_bodies_are_413_plain_text(client):
    response = post(client, [{"op": "put", "ns": "t", "key": "k", "value": "x" * 2000, "forever": True}])
    assert response.status_code == 413
    assert response["Content-Type"].startswith("text/plain")
    assert KVEntry.objects.count() == 0


def test_openapi_lists_every_kv_route_with_schemas(client):
    schema = Client().get("/api/v1/openapi.json").json()
    paths = schema["paths"]
    for path in (
        "/api/v1/kv",
        "/api/v1/kv/{ns}/{key}",
        "/api/v1/resources/kv/namespaces",
        "/api/v1/resources/kv/list",
    ):
        assert path in paths, sorted(paths)
    body = paths["/api/v1/kv"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body["oneOf"][0] == {"$ref": "#/components/schemas/KVCallIn"}
    assert "KVOpIn" in schema["components"]["schemas"]
    assert Client().get("/api/v1/docs").status_code == 200


def test_a_lone_surrogate_is_refused_and_a_surrogate_pair_is_text(client):
    lone = '{"operations":[{"op":"put","ns":"t","key":"\\ud800","value":1,"forever":true}]}'
    response = post(client, lone)
    assert response.status_code == 400
    assert response.json()["reason"] == "kv_bad_body"
    in_value = '{"operations":[{"op":"put","ns":"t","key":"k","value":"x\\uDFFF","forever":true}]}'
    assert post(client, in_value).status_code == 400
    assert KVEntry.objects.count() == 0
    pair = '{"operations":[{"op":"put","ns":"t","key":"\\ud83d\\ude00","value":1,"forever":true}]}'
    assert post(client, pair).json()["results"][0]["key"] == "\U0001f600"


@pytest.fixture
def fresh_buckets():
    from queenadmin.api import ratelimit

    ratelimit.reset()
    yield
    ratelimit.reset()


@override_settings(QUEENADMIN_KV_WRITE_RATE=1, QUEENADMIN_KV_WRITE_BURST=2)
def test_write_rate_answers_429_rate_limited_with_retry_after(client, fresh_buckets):
    write = {"op": "put", "ns": "t", "key": "k", "value": 1, "forever": True}
    assert kv_ops(client, write).status_code == 200
    assert kv_ops(client, write).status_code == 200
    refused = kv_ops(client, {**write, "key": "third"})
    assert refused.status_code == 429
    assert refused["Retry-After"] == "1"
    assert refused.json() == {
        "error": "rate_limited",
        "reason": "rate_limited",
        "detail": "Too many calls; retry after the time given.",
    }
    assert not KVEntry.objects.filter(key="third").exists()
    # Reads have their own budget (off here), and so does every other token.
    assert kv_ops(client, {"op": "get", "ns": "t", "key": "k"}).status_code == 200
    other = Client(HTTP_AUTHORIZATION=f"Bearer {tokens.token_create(by=tokens.HOST, name='other')}")
    assert kv_ops(other, {**write, "key": "fourth"}).status_code == 200


@override_settings(QUEENADMIN_KV_READ_RATE=1, QUEENADMIN_KV_READ_BURST=1)
def test_read_rate_covers_path_and_console_reads(client, fresh_buckets):
    assert client.get("/api/v1/kv/t/k").status_code == 200
    assert client.get("/api/v1/kv/t/k").status_code == 429
    assert client.get("/api/v1/resources/kv/namespaces").status_code == 429


def test_no_rate_limit_by_default(client, fresh_buckets):
    for _ in range(50):
        assert kv_ops(client, {"op": "put", "ns": "t", "key": "k", "value": 1, "forever": True}).status_code == 200
