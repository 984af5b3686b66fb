"""Issue 13's bad inputs against a live ``serve``: each gets a clear 4xx in
the protocol's error shape, the same on SQLite and PostgreSQL, never a 500.
"""

from __future__ import annotations

import json
import socket
import time
from typing import Any

import httpx
import pytest

from queenadmin.api.http import MAX_JSON_DEPTH

pytestmark = pytest.mark.live

LEASE_MAX = 315360000


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def kv_put_body(value_text: str, key: str = "deep") -> str:
    return f'{{"operations":[{{"op":"put","ns":"hard","key":"{key}","forever":true,"value":{value_text}}}]}}'


@pytest.fixture(scope="module")
def api(live_server) -> httpx.Client:
    headers = {"Authorization": f"Bearer {live_server.token}", "Content-Type": "application/json"}
    with httpx.Client(base_url=live_server.url, headers=headers, timeout=30) as client:
        assert client.post("/api/v1/configure", json={"queue": "hard-q"}).status_code == 200
        yield client


def engine(detail: str) -> dict[str, str]:
    return {"error": detail, "code": "bad_request"}


def kv_error(reason: str, detail: str) -> dict[str, str]:
    return {"error": "kv_bad_request", "reason": reason, "detail": detail}


TOO_DEEP = f"the request body nests deeper than {MAX_JSON_DEPTH} levels"
TOO_LARGE = "the request body has a number too large to represent"

# (method, path, body, status, answer)
CASES: list[tuple[str, str, str | None, int, Any]] = [
    # Deep JSON on every body route.
    ("POST", "/api/v1/kv", nested(5000), 400, kv_error("kv_bad_body", TOO_DEEP)),
    ("POST", "/api/v1/kv", kv_put_body(nested(945)), 400, kv_error("kv_bad_body", TOO_DEEP)),
    ("PUT", "/api/v1/kv/hard/k", f'{{"value":{nested(945)},"forever":true}}', 400, kv_error("kv_bad_body", TOO_DEEP)),
    ("POST", "/api/v1/resources/kv/list", nested(5000), 400, kv_error("kv_bad_body", TOO_DEEP)),
    (
        "POST",
        "/api/v1/locks",
        nested(5000),
        400,
        {"error": "locks_bad_request", "reason": "locks_bad_body", "detail": TOO_DEEP},
    ),
    (
        "POST",
        "/api/v1/timers",
        nested(5000),
        400,
        {"error": "timers_bad_request", "reason": "timers_bad_body", "detail": TOO_DEEP},
    ),
    ("POST", "/api/v1/transaction", nested(5000), 400, engine(TOO_DEEP)),
    ("POST", "/api/v1/push", nested(5000), 400, engine(TOO_DEEP)),
    ("POST", "/api/v1/configure", nested(5000), 400, engine(TOO_DEEP)),
    ("POST", "/api/v1/ack", nested(5000), 400, engine(TOO_DEEP)),
    ("POST", "/api/v1/ack/batch", nested(5000), 400, engine(TOO_DEEP)),
    ("POST", "/api/v1/lease/x/extend", nested(5000), 400, engine(TOO_DEEP)),
    # Numbers that overflow to infinity.
    (
        "POST",
        "/api/v1/kv",
        '{"operations":[{"op":"getPrefix","ns":"hard","prefix":"a","limit":1e400}]}',
        400,
        kv_error("kv_bad_body", TOO_LARGE),
    ),
    ("POST", "/api/v1/resources/kv/list", '{"namespace":"hard","limit":1e400}', 400, kv_error("kv_bad_body", TOO_LARGE)),
    ("POST", "/api/v1/push", '{"items":[{"queue":"hard-q","payload":-1e400}]}', 400, engine(TOO_LARGE)),
    # Times out of range.
    (
        "GET",
        "/api/v1/pop/queue/hard-q?leaseSeconds=999999999999&wait=false",
        None,
        400,
        engine(f"leaseSeconds must be at most {LEASE_MAX}"),
    ),
    (
        "POST",
        "/api/v1/lease/x/extend",
        json.dumps({"seconds": 2**70}),
        400,
        engine(f"seconds must be at most {LEASE_MAX}"),
    ),
    ("GET", "/api/v1/dlq?offset=1e20", None, 400, engine("offset must be an integer")),
    ("GET", "/api/v1/dlq?offset=100000000000000000000", None, 400, engine(f"offset must be at most {2**63 - 1}")),
    (
        "GET",
        "/api/v1/pop/queue/hard-q?subscriptionFrom=0001-01-01T00:00%2B14:00&consumerGroup=g&wait=false",
        None,
        400,
        engine("subscriptionFrom is out of range"),
    ),
    ("GET", "/api/v1/dlq?from=0001-01-01T00:00%2B14:00", None, 400, engine("from is out of range")),
    # NUL characters: PostgreSQL cannot store them, so both refuse them.
    (
        "POST",
        "/api/v1/push",
        json.dumps({"items": [{"queue": "hard-q", "transactionId": "a\x00b", "payload": 1}]}),
        400,
        engine("items[0].transactionId must not contain NUL"),
    ),
    (
        "POST",
        "/api/v1/ack",
        json.dumps({"transactionId": "a\x00", "partitionId": "1", "status": "completed"}),
        400,
        engine("transactionId must not contain NUL"),
    ),
    (
        "POST",
        "/api/v1/ack/batch",
        json.dumps({"acknowledgments": [{"transactionId": "t", "partitionId": "1\x00"}]}),
        400,
        engine("partitionId must not contain NUL"),
    ),
    (
        "POST",
        "/api/v1/configure",
        json.dumps({"queue": "hard-n", "namespace": "a\x00"}),
        400,
        engine("namespace must not contain NUL"),
    ),
    ("POST", "/api/v1/configure", json.dumps({"queue": "hard-t", "task": "a\x00"}), 400, engine("task must not contain NUL")),
    ("GET", "/api/v1/pop?namespace=a%00&wait=false", None, 400, engine("namespace must not contain NUL")),
    ("GET", "/api/v1/pop?task=a%00&wait=false", None, 400, engine("task must not contain NUL")),
    ("GET", "/api/v1/dlq?queue=a%00", None, 400, engine("queue must not contain NUL")),
    ("GET", "/api/v1/dlq?consumerGroup=a%00", None, 400, engine("consumerGroup must not contain NUL")),
    ("GET", "/api/v1/resources/queues/a%00", None, 400, engine("queue must not contain NUL")),
    ("GET", "/api/v1/resources/queues/a%00/depth", None, 400, engine("queue must not contain NUL")),
    ("DELETE", "/api/v1/resources/queues/a%00", None, 400, engine("queue must not contain NUL")),
    ("POST", "/api/v1/lease/a%00/extend", None, 400, engine("leaseId must not contain NUL")),
    (
        "POST",
        "/api/v1/resources/kv/list",
        json.dumps({"namespace": "hard", "prefix": "a\x00"}),
        400,
        kv_error("kv_bad_key", "prefix and after must not contain NUL"),
    ),
    (
        "POST",
        "/api/v1/resources/kv/list",
        json.dumps({"namespace": "hard", "after": "a\x00"}),
        400,
        kv_error("kv_bad_key", "prefix and after must not contain NUL"),
    ),
    (
        "POST",
        "/api/v1/kv",
        json.dumps({"operations": [{"op": "getPrefix", "ns": "hard", "prefix": "a", "after": "a\x00"}]}),
        400,
        kv_error("kv_bad_key", "after must not contain NUL"),
    ),
    # Wrong methods and too many fields: the JSON envelope, not HTML.
    ("PATCH", "/api/v1/kv", "{}", 405, {"error": "this method is not allowed on this route", "code": "method_not_allowed"}),
    ("GET", "/api/v1/push", None, 405, {"error": "this method is not allowed on this route", "code": "method_not_allowed"}),
    (
        "GET",
        "/api/v1/dlq?" + "&".join(f"f{i}=1" for i in range(1200)),
        None,
        400,
        engine("the query string has too many fields"),
    ),
    (
        "GET",
        "/api/v1/pop/queue/hard-q?" + "&".join(f"f{i}=1" for i in range(1200)),
        None,
        400,
        engine("the query string has too many fields"),
    ),
    ("GET", "/api/v1/no-such-route", None, 404, {"error": "not found", "code": "no_such_route", "path": "/api/v1/no-such-route"}),
    # Invalid UTF-8 in a path: U+FFFD would make two keys one row.
    ("PUT", "/api/v1/kv/hard/%ff%fe", '{"value":1,"forever":true}', 400, kv_error("kv_bad_key", "the path is not valid UTF-8")),
    ("GET", "/api/v1/kv/hard/%c3", None, 400, kv_error("kv_bad_key", "the path is not valid UTF-8")),
    ("GET", "/api/v1/resources/queues/%ff", None, 400, engine("the path is not valid UTF-8")),
    # An op that is no string (schemathesis found this one).
    (
        "POST",
        "/api/v1/timers",
        json.dumps({"operations": [{"op": {"a": 1}}]}),
        400,
        {"error": "timers_bad_request", "reason": "timers_bad_op", "detail": "op 0: op must be schedule, reschedule or cancel"},
    ),
    (
        "POST",
        "/api/v1/transaction",
        json.dumps({"timers": [{"op": [1]}]}),
        400,
        {"error": "timers_bad_request", "reason": "timers_bad_op", "detail": "op 0: op must be schedule, reschedule or cancel"},
    ),
    (
        "POST",
        "/api/v1/timers",
        json.dumps({"operations": [{"op": "cancel", "queue": "hard-q", "timerKey": "a\x00"}]}),
        400,
        {"error": "timers_bad_request", "reason": "timers_bad_request", "detail": "op 0: timerKey must not contain NUL"},
    ),
    (
        "POST",
        "/api/v1/timers",
        json.dumps(
            {"operations": [{"op": "schedule", "queue": "hard-q", "timerKey": "t", "delayMs": 1, "txn": "x\x00", "payload": ""}]}
        ),
        400,
        {"error": "timers_bad_request", "reason": "timers_bad_request", "detail": "op 0: txn must not contain NUL"},
    ),
    # incr beyond its exact range.
    (
        "POST",
        "/api/v1/kv",
        json.dumps({"operations": [{"op": "incr", "ns": "hard", "key": "n", "delta": 10**100, "forever": True}]}),
        400,
        kv_error("kv_bad_request", "delta is beyond what incr computes exactly (magnitude below 1e100, at most 100 decimal places)"),
    ),
    # Schemathesis --checks all: a field of the wrong type that is falsy (false,
    # {}, 0) was read as missing.
    (
        "POST",
        "/api/v1/resources/kv/list",
        json.dumps({"namespace": "hard", "after": {}}),
        400,
        kv_error("kv_bad_request", "prefix and after must be strings"),
    ),
    (
        "POST",
        "/api/v1/resources/kv/list",
        json.dumps({"namespace": "hard", "prefix": False}),
        400,
        kv_error("kv_bad_request", "prefix and after must be strings"),
    ),
    (
        "POST",
        "/api/v1/traces",
        json.dumps({"transactionId": "t", "partitionId": "1", "data": {}, "eventType": False}),
        400,
        engine("eventType must be a string"),
    ),
    # A cursor must be ASCII digits: "²" is a digit to str.isdigit, not to int().
    (
        "POST",
        "/api/v1/partitions/changed",
        '{"entries":[{"queue":"hard-q","after":"\u00b2"}]}',
        400,
        engine("entries[0].after must be a cursor this route answered"),
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "answer"), CASES, ids=[f"{c[0]} {c[1][:60]}" for c in CASES]
)
def test_bad_input_gets_a_clear_refusal(api, method, path, body, status, answer):
    response = api.request(method, path, content=None if body is None else body.encode())
    assert (response.status_code, response.json()) == (status, answer)
    assert response.headers["content-type"] == "application/json"


def test_a_time_offset_past_sixteen_hours_is_read_in_utc(api):
    """Python reads offsets up to 23:59, PostgreSQL refuses one past 15:59:
    the time is turned to UTC before it reaches the database. (Bounded by
    ``to``: the session's server holds other tests' dead letters from now.)"""
    window = {"from": "2026-01-01T00:00:00-21:55", "to": "2026-01-02T00:00:00Z"}
    response = api.get("/api/v1/dlq", params=window)
    assert response.status_code == 200, response.text
    assert response.json()["total"] == 0


def test_a_wrong_method_keeps_the_allow_header(api):
    response = api.request("PATCH", "/api/v1/kv")
    assert response.headers["allow"] == "POST"


def test_two_keys_differing_only_in_invalid_bytes_write_nothing(api):
    for raw in ("%ff", "%fe"):
        assert api.put(f"/api/v1/kv/hard/x{raw}", json={"value": raw, "forever": True}).status_code == 400
    listed = api.post("/api/v1/resources/kv/list", json={"namespace": "hard", "prefix": "x"}).json()
    assert listed["rows"] == []


def test_a_value_at_the_depth_limit_stays_readable_everywhere(api):
    """A value as deep as a body allows is stored, and every read that
    embeds it (get, getMany, getPrefix, a putIfAbsent loser, a required
    check, the console list) still answers 200."""
    depth = MAX_JSON_DEPTH - 3  # {"operations":[{"value": ...}]}
    stored = api.post("/api/v1/kv", content=kv_put_body(nested(depth), key="edge").encode())
    assert stored.status_code == 200, stored.text
    assert api.post("/api/v1/kv", content=kv_put_body(nested(depth + 1), key="edge2").encode()).status_code == 400
    reads = [
        {"op": "get", "ns": "hard", "key": "edge"},
        {"op": "getMany", "ns": "hard", "keys": ["edge", "nope"]},
        {"op": "getPrefix", "ns": "hard", "prefix": "ed"},
        {"op": "putIfAbsent", "ns": "hard", "key": "edge", "value": 1, "forever": True},
    ]
    for op in reads:
        response = api.post("/api/v1/kv", json={"operations": [op]})
        assert response.status_code == 200, (op, response.text[:200])
    version = stored.json()["results"][0]["version"]
    guarded = api.post(
        "/api/v1/kv",
        json={
            "operations": [
                {
                    "op": "put",
                    "ns": "hard",
                    "key": "edge",
                    "value": 2,
                    "forever": True,
                    "expect": version + 1,
                    "required": True,
                }
            ]
        },
    )
    assert guarded.status_code == 200
    assert guarded.json()["reason"] == "kv_precondition"
    listed = api.post("/api/v1/resources/kv/list", json={"namespace": "hard", "prefix": "edge"})
    assert listed.status_code == 200
    assert [row["key"] for row in listed.json()["rows"]] == ["edge"]


def test_a_chunked_body_is_read(api):
    def chunks():
        yield b'{"operations":[{"op":"put","ns":"hard","key":"chunked",'
        yield b'"value":{"sent":"in two chunks"},"forever":true}]}'

    response = api.post("/api/v1/kv", content=chunks())
    assert response.status_code == 200, response.text
    assert response.json()["results"][0]["value"] == {"sent": "in two chunks"}


def test_a_chunked_body_over_the_limit_is_refused(live_server):
    """A chunked body cannot slip past the size limit: 1 MiB off the API."""

    def chunks():
        for _ in range(20):
            yield b"x" * 65536

    response = httpx.post(f"{live_server.url}/admin/login/", content=chunks(), timeout=30)
    assert (response.status_code, response.text) == (413, "payload too large\n")


def test_bearer_with_two_spaces_is_refused_on_every_route(live_server):
    headers = {"Authorization": f"Bearer  {live_server.token}"}
    for path in ("/api/v1/pop/queue/hard-q?wait=false", "/api/v1/resources/queues"):
        response = httpx.get(f"{live_server.url}{path}", headers=headers, timeout=30)
        assert response.status_code == 401, path
    for path in ("/api/v1/pop/queue/hard-q?wait=false", "/api/v1/resources/queues"):
        response = httpx.get(f"{live_server.url}{path}", headers={"Authorization": f"bearer {live_server.token}"})
        assert response.status_code in (200, 204), path


@pytest.mark.parametrize(
    "path",
    [
        "/static/%2e%2e/%2e%2e/etc/passwd",
        "/static/..%2f..%2fetc/passwd",
        "/static/queenadmin/%2e%2e%2f%2e%2e%2fsettings.py",
    ],
)
def test_a_static_path_with_an_encoded_dot_dot_is_a_bad_request(live_server, path):
    response = httpx.get(f"{live_server.url}{path}", timeout=30)
    assert response.status_code == 400
    assert "root:" not in response.text


def test_a_websocket_to_an_unknown_path_closes_with_one_log_line(live_server):
    port = int(live_server.url.rsplit(":", 1)[1])
    before = live_server.log().count("\n")
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(
                b"GET /ws/nowhere/ HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                b"Origin: http://127.0.0.1\r\n\r\n"
            )
            answer = sock.recv(200)
        assert answer.startswith(b"HTTP/1.1 403"), answer
    deadline = time.monotonic() + 10
    while live_server.log().count("no such route") < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    new_lines = live_server.log().splitlines()[before:]
    # One line each (serve's log format adds time, level and logger).
    assert len(new_lines) == 3, new_lines
    assert all(line.endswith("websocket /ws/nowhere/: no such route, closed") for line in new_lines), new_lines


def test_an_api_path_with_a_newline_reaches_its_route(api):
    """A newline in a ``{path:}`` parameter reaches the route (a name stored
    before the rule of names can be read and deleted), which refuses it as
    a name to store: 400 ``kv_bad_key``, no longer the catch-all 404."""
    response = api.put("/api/v1/kv/hard/a%0Ab", json={"value": 1, "forever": True})
    assert (response.status_code, response.json()) == (
        400,
        {"error": "kv_bad_request", "reason": "kv_bad_key", "detail": "key must not contain control characters"},
    )
    assert api.delete("/api/v1/kv/hard/a%0Ab").status_code == 200
