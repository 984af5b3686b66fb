"""GET /api/v1/history/kv/{ns}/{key}: a key's versions, exact answers and refusals."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.test import Client, override_settings

from queenadmin.domain import tokens

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 10, 8, 10, 0, 0, 123000, tzinfo=UTC)


def _client(name: str, **kwargs: Any) -> Client:
    token = tokens.token_create(by=tokens.HOST, name=name, **kwargs)
    return Client(HTTP_AUTHORIZATION=f"Bearer {token}")


@pytest.fixture
def client() -> Client:
    return _client("history-writer")


def kv_ops(client: Client, *ops: dict[str, Any]) -> Any:
    answer = client.post("/api/v1/kv", data=json.dumps(list(ops)), content_type="application/json")
    assert answer.status_code == 200, answer.content
    return answer.json()["results"]


def history(client: Client, ns: str, key: str, query: str = "") -> Any:
    return client.get(f"/api/v1/history/kv/{ns}/{key}{query}")


def test_put_put_delete_put_is_four_versions_newest_first(client):
    """put, put (a lone statement each), delete, put come back as four
    versions, newest first, the delete as ``value: null``, each with its
    time and who wrote it."""
    answers = []
    for i, op in enumerate(
        [
            {"op": "put", "ns": "carts", "key": "c/1", "value": {"n": 1}, "forever": True},
            {"op": "put", "ns": "carts", "key": "c/1", "value": {"n": 2}, "forever": True},
            {"op": "delete", "ns": "carts", "key": "c/1"},
            {"op": "put", "ns": "carts", "key": "c/1", "value": "back", "forever": True},
        ]
    ):
        with time_machine.travel(T0 + timedelta(seconds=i), tick=False):
            answers.append(kv_ops(client, op)[0])
    with time_machine.travel(T0 + timedelta(seconds=9), tick=False):
        answer = history(client, "carts", "c/1")
    assert answer.status_code == 200
    body = answer.json()
    versions = [v["version"] for v in body["versions"]]
    assert versions == sorted(versions, reverse=True)
    assert len(set(versions)) == 4
    # A put's history version is the version it answered; a delete has its own,
    # above the version it removed and below the next put.
    assert versions[0] == answers[3]["version"]
    assert versions[2] == answers[1]["version"]
    assert versions[3] == answers[0]["version"]
    assert answers[2]["version"] < versions[1] < versions[0]
    assert body == {
        "versions": [
            {
                "version": versions[0],
                "op": "put",
                "value": "back",
                "at": "2026-10-08T10:00:03.123+00:00",
                "by": "history-writer",
            },
            {
                "version": versions[1],
                "op": "delete",
                "value": None,
                "at": "2026-10-08T10:00:02.123+00:00",
                "by": "history-writer",
            },
            {
                "version": versions[2],
                "op": "put",
                "value": {"n": 2},
                "at": "2026-10-08T10:00:01.123+00:00",
                "by": "history-writer",
            },
            {
                "version": versions[3],
                "op": "put",
                "value": {"n": 1},
                "at": "2026-10-08T10:00:00.123+00:00",
                "by": "history-writer",
            },
        ],
        "nextBefore": None,
    }


def test_incr_and_batch_writes_are_kept(client):
    """An incr and the writes of a multi-op call (the planned transaction, and
    a call of puts only) are versions too."""
    kv_ops(client, {"op": "incr", "ns": "hits", "key": "n", "delta": 2, "forever": True})
    kv_ops(
        client,
        {"op": "incr", "ns": "hits", "key": "n", "delta": 3, "forever": True},
        {"op": "get", "ns": "hits", "key": "n"},
    )
    kv_ops(
        client,
        {"op": "put", "ns": "hits", "key": "a", "value": 1, "forever": True},
        {"op": "put", "ns": "hits", "key": "b", "value": 2, "forever": True},
    )
    kv_ops(client, {"op": "delete", "ns": "hits", "key": "a", "expect": 0}, {"op": "delete", "ns": "hits", "key": "b"})
    body = history(client, "hits", "n").json()
    assert [(v["op"], v["value"]) for v in body["versions"]] == [("incr", 5), ("incr", 2)]
    assert [(v["op"], v["value"]) for v in history(client, "hits", "a").json()["versions"]] == [("put", 1)]
    assert [(v["op"], v["value"]) for v in history(client, "hits", "b").json()["versions"]] == [
        ("delete", None),
        ("put", 2),
    ]


def test_pages_continue_below_next_before(client):
    """``limit`` cuts a page; ``nextBefore`` continues it; the pages together
    are every version once, in strictly decreasing order."""
    for i in range(5):
        kv_ops(client, {"op": "put", "ns": "pg", "key": "k", "value": i, "forever": True})
    first = history(client, "pg", "k", "?limit=2").json()
    assert [v["value"] for v in first["versions"]] == [4, 3]
    second = history(client, "pg", "k", f"?limit=2&before={first['nextBefore']}").json()
    third = history(client, "pg", "k", f"?limit=2&before={second['nextBefore']}").json()
    assert [v["value"] for v in second["versions"] + third["versions"]] == [2, 1, 0]
    assert third["nextBefore"] is None
    assert history(client, "pg", "never-written").json() == {"versions": [], "nextBefore": None}


@override_settings(QUEENADMIN_KV_HISTORY_VALUE_BYTES=16)
def test_a_large_value_is_kept_as_its_digest(client):
    """A value over ``KV_HISTORY_VALUE_BYTES`` comes back as null with its sha256 and size."""
    import hashlib

    kv_ops(client, {"op": "put", "ns": "big", "key": "k", "value": "x" * 40, "forever": True})
    (version,) = history(client, "big", "k").json()["versions"]
    text = json.dumps("x" * 40)
    assert version["value"] is None
    assert version["digest"] == hashlib.sha256(text.encode()).hexdigest()
    assert version["size"] == len(text)


@override_settings(QUEENADMIN_KV_HISTORY_EXCLUDE="hot, counters")
def test_an_excluded_namespace_keeps_no_history(client):
    kv_ops(client, {"op": "incr", "ns": "counters", "key": "n", "delta": 1, "forever": True})
    kv_ops(client, {"op": "put", "ns": "warm", "key": "n", "value": 1, "forever": True})
    assert history(client, "counters", "n").json()["versions"] == []
    assert len(history(client, "warm", "n").json()["versions"]) == 1


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/api/v1/history/kv/carts/k?limit=0", "kv_bad_limit"),
        ("/api/v1/history/kv/carts/k?limit=1001", "kv_bad_limit"),
        ("/api/v1/history/kv/carts/k?limit=x", "kv_bad_limit"),
        ("/api/v1/history/kv/carts/k?before=-1", "kv_bad_cursor"),
        ("/api/v1/history/kv/carts/k?before=", "kv_bad_cursor"),
        # One above the largest bigint (a 19-digit number) and a longer one.
        ("/api/v1/history/kv/carts/k?before=9223372036854775808", "kv_bad_cursor"),
        ("/api/v1/history/kv/carts/k?before=8081129987569334586469077949087744", "kv_bad_cursor"),
        ("/api/v1/history/kv/carts/k?after=3", "kv_bad_query"),
        ("/api/v1/history/kv/Carts/k", "kv_bad_namespace"),
        ("/api/v1/history/kv/queen-locks/job%230", "kv_locks_namespace"),
    ],
)
def test_bad_input_is_400_with_its_reason(client, path, reason):
    answer = client.get(path)
    assert answer.status_code == 400, answer.content
    body = answer.json()
    assert body["reason"] == reason, body


def test_the_largest_cursor_the_document_allows_is_answered(client):
    """``before`` up to the largest bigint, the document's ``maximum``, reads
    a page; one above it is refused (the cases above)."""
    kv_ops(client, {"op": "put", "ns": "top", "key": "k", "value": 1, "forever": True})
    page = history(client, "top", "k", "?before=9223372036854775807").json()
    assert [v["value"] for v in page["versions"]] == [1]
    assert client.get("/api/v1/history/locks/jobs?before=9223372036854775807").json()["events"] == []
    document = client.get("/api/v1/openapi.json").json()
    for path in ("/api/v1/history/kv/{ns}/{key}", "/api/v1/history/locks/{name}"):
        (before,) = [p for p in document["paths"][path]["get"]["parameters"] if p["name"] == "before"]
        assert before["schema"]["maximum"] == 2**63 - 1


def test_a_key_over_its_size_is_413_as_on_the_key_routes(client):
    answer = client.get("/api/v1/history/kv/carts/" + "k" * 600)
    assert answer.status_code == 413, answer.content
    assert answer.json()["reason"] == "kv_key_too_large"


def test_scope_and_grants():
    """Read scope suffices; a token granted another namespace gets 403 and
    nothing of the key; no token gets 401."""
    writer = _client("w")
    kv_ops(writer, {"op": "put", "ns": "billing", "key": "k", "value": "billing-secret", "forever": True})
    reader = _client("r", scope="read")
    assert history(reader, "billing", "k").status_code == 200
    other = _client("o", scope="read", grants=["kv:orders*=read"])
    refused = history(other, "billing", "k")
    assert refused.status_code == 403
    assert refused.json()["code"] == "forbidden"
    assert b"billing-secret" not in refused.content
    assert Client().get("/api/v1/history/kv/billing/k").status_code == 401


# -- a lock's life ----------------------------------------------------------------------


def locks_call(client: Client, *ops: dict[str, Any]) -> Any:
    answer = client.post("/api/v1/locks", data=json.dumps(list(ops)), content_type="application/json")
    assert answer.status_code == 200, answer.content
    return answer.json()["results"]


def test_a_lock_life_over_the_api_names_fingerprints_never_owners(client):
    """acquire, renew, release come back newest first with fingerprints and
    the holder's label; the owner string is nowhere in the answer."""
    from queenadmin.domain.masking import mask_token

    owner = "raw-owner-string-4f1c"
    with time_machine.travel(T0, tick=False):
        (got,) = locks_call(client, {"op": "acquire", "name": "jobs.nightly", "ttlSeconds": 60, "owner": owner})
    with time_machine.travel(T0 + timedelta(seconds=1), tick=False):
        (renewed,) = locks_call(
            client, {"op": "renew", "name": "jobs.nightly", "token": got["token"], "ttlSeconds": 60, "owner": owner}
        )
    with time_machine.travel(T0 + timedelta(seconds=3), tick=False):
        locks_call(client, {"op": "release", "name": "jobs.nightly", "token": renewed["token"]})
        answer = client.get("/api/v1/history/locks/jobs.nightly")
    assert answer.status_code == 200
    assert owner.encode() not in answer.content
    assert f'"token":{got["token"]}'.encode() not in answer.content
    assert answer.json() == {
        "events": [
            {
                "event": "released",
                "at": "2026-10-08T10:00:03.123+00:00",
                "slot": 0,
                "token": mask_token(renewed["token"]),
                "holder": "history-writer",
                "heldMs": 3000,
            },
            {
                "event": "renewed",
                "at": "2026-10-08T10:00:01.123+00:00",
                "slot": 0,
                "token": mask_token(renewed["token"]),
                "holder": "history-writer",
                "marginMs": 59000,
                "expiresAt": "2026-10-08T10:01:01.123+00:00",
            },
            {
                "event": "acquired",
                "at": "2026-10-08T10:00:00.123+00:00",
                "slot": 0,
                "token": mask_token(got["token"]),
                "holder": "history-writer",
                "waitedMs": 0,
                "expiresAt": "2026-10-08T10:01:00.123+00:00",
            },
        ],
        "nextBefore": None,
    }
    # The permit's rows never show as a key's history.
    assert client.get("/api/v1/history/kv/queen-locks/jobs.nightly%230").status_code == 400


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/api/v1/history/locks/jobs?limit=0", "locks_bad_limit"),
        ("/api/v1/history/locks/jobs?before=x", "locks_bad_cursor"),
        ("/api/v1/history/locks/jobs?before=9223372036854775808", "locks_bad_cursor"),
        ("/api/v1/history/locks/jobs?owner=me", "locks_bad_query"),
    ],
)
def test_bad_lock_history_input_is_400_with_its_reason(client, path, reason):
    answer = client.get(path)
    assert answer.status_code == 400, answer.content
    assert answer.json()["reason"] == reason


def test_lock_history_scope_and_grants():
    writer = _client("w2")
    locks_call(writer, {"op": "acquire", "name": "billing.run", "ttlSeconds": 60, "owner": "o"})
    assert _client("r2", scope="read").get("/api/v1/history/locks/billing.run").status_code == 200
    other = _client("o2", scope="read", grants=["lock:orders*=read"])
    refused = other.get("/api/v1/history/locks/billing.run")
    assert refused.status_code == 403
    assert refused.json()["code"] == "forbidden"
    assert Client().get("/api/v1/history/locks/billing.run").status_code == 401


def test_lock_operations_are_counted_on_metrics(client):
    """``queenadmin_lock_operations_total{op,outcome}`` rises with each call."""
    from queenadmin.metrics import process_metrics

    counter = process_metrics().lock_ops
    before = counter.labels("acquire", "acquired")._value.get()
    held = counter.labels("acquire", "held")._value.get()
    locks_call(client, {"op": "acquire", "name": "metered", "ttlSeconds": 60, "owner": "a"})
    locks_call(client, {"op": "acquire", "name": "metered", "ttlSeconds": 60, "owner": "b"})
    assert counter.labels("acquire", "acquired")._value.get() == before + 1
    assert counter.labels("acquire", "held")._value.get() == held + 1
