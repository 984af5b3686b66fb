"""Message-log routes over real HTTP: exact answers, 204s, arrays, refusals.

Every refusal is checked for its status, its engine envelope and that
nothing was written (read back through the resource routes).
"""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Any

import httpx
import pytest

from queenadmin.api.wire.queues import _payload_text as stored_text
from tests.conftest import requires_postgres, run_server

pytestmark = pytest.mark.live

UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
ISO_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


@pytest.fixture
def http(live_server):
    with httpx.Client(
        base_url=f"{live_server.url}/api/v1",
        headers={"Authorization": f"Bearer {live_server.token}"},
        timeout=70,
    ) as client:
        yield client


def push(http, queue: str, *payloads: Any, partition: str | None = None, txn: str | None = None) -> list[dict]:
    items = []
    for i, payload in enumerate(payloads):
        item: dict[str, Any] = {"queue": queue, "payload": payload}
        if partition:
            item["partition"] = partition
        if txn:
            item["transactionId"] = f"{txn}-{i}"
        items.append(item)
    answer = http.post("/push", json={"items": items})
    assert answer.status_code == 201
    return answer.json()


def depth(http, queue: str, **params: str) -> dict:
    return http.get(f"/resources/queues/{queue}/depth", params=params).json()


def assert_nothing_written(http, queue: str) -> None:
    assert http.get(f"/resources/queues/{queue}").status_code == 404


# -- configure -------------------------------------------------------------------


def test_configure_answers_the_full_option_set(http, unique):
    q = unique("cfg")
    answer = http.post("/configure", json={"queue": q, "namespace": None, "task": None, "options": {"leaseTime": 30}})
    assert answer.status_code == 200
    body = answer.json()
    assert set(body) == {"configured", "queueId", "partitionId", "queue", "namespace", "task", "storage", "options"}
    assert body["configured"] is True
    assert body["queueId"].isdigit()
    assert (body["partitionId"], body["queue"], body["namespace"], body["task"]) == (None, q, None, None)
    assert body["storage"] == "segments"
    assert body["options"]["leaseTime"] == 30
    assert body["options"]["retryLimit"] == 3
    assert body["options"]["dedupWindowSeconds"] == 3600
    assert "maxQueueSize" in body["options"]
    flat = http.post("/configure", json={"queue": q, "retryLimit": 7, "mode": "merge"}).json()
    assert (flat["options"]["leaseTime"], flat["options"]["retryLimit"]) == (30, 7)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "queue must be a non-empty string"),
        ({"queue": 5}, "queue must be a non-empty string"),
        ({"queue": "Q", "options": []}, "options must be an object"),
        ({"queue": "Q", "options": {"leaseTime": "5"}}, "option leaseTime must be an integer"),
        ({"queue": "Q", "options": {"encryptionEnabled": "yes"}}, "option encryptionEnabled must be a boolean"),
        ({"queue": "Q", "mode": "sideways"}, "mode must be merge or replace"),
        ({"queue": "Q", "namespace": 3}, "namespace must be a string or null"),
    ],
)
def test_configure_refusals(http, unique, body, message):
    q = unique("cfgbad")
    if body.get("queue") == "Q":
        body = {**body, "queue": q}
    answer = http.post("/configure", json=body)
    assert answer.status_code == 400
    assert answer.json() == {"error": message, "code": "bad_request"}
    assert_nothing_written(http, q)


def test_configure_needs_a_json_object(http):
    answer = http.post("/configure", content=b"[1]", headers={"Content-Type": "application/json"})
    assert (answer.status_code, answer.json()) == (
        400,
        {"error": "the body must be a JSON object", "code": "bad_request"},
    )
    answer = http.post("/configure", content=b"{", headers={"Content-Type": "application/json"})
    assert answer.json() == {"error": "the request body is not valid JSON", "code": "bad_request"}


# -- push ----------------------------------------------------------------------------


def test_push_answers_201_with_mixed_case_keys_and_dedup(http, unique):
    q = unique("push")
    answer = http.post(
        "/push",
        json={
            "items": [
                {"queue": q, "payload": {"a": 1}, "transactionId": "tx-1"},
                {"queue": q, "payload": None},
                {"queue": q, "payload": "again", "transactionId": "tx-1"},
            ]
        },
    )
    assert answer.status_code == 201
    assert answer.headers["content-type"] == "application/json"
    first, second, third = answer.json()
    assert list(first) == ["index", "message_id", "transaction_id", "queueName", "status", "offset"]
    assert first == {
        "index": 0, "message_id": first["message_id"], "transaction_id": "tx-1",
        "queueName": q, "status": "queued", "offset": 0,
    }  # fmt: skip
    assert UUID.match(first["message_id"])
    assert (second["status"], second["offset"], second["transaction_id"]) == ("queued", 1, second["message_id"])
    assert third == {**first, "index": 2, "status": "duplicate"}
    (later,) = http.post("/push", json={"items": [{"queue": q, "payload": 1, "transactionId": "tx-1"}]}).json()
    assert (later["status"], later["message_id"], later["offset"]) == ("duplicate", first["message_id"], 0)
    assert depth(http, q)["pending"] == 2


def test_push_of_no_items_is_an_empty_array(http):
    answer = http.post("/push", json={"items": []})
    assert (answer.status_code, answer.json()) == (201, [])


@pytest.mark.parametrize(
    ("items", "status", "message", "code"),
    [
        (None, 400, "items is required", "bad_request"),
        ("x", 400, "items must be an array", "bad_request"),
        ([{"payload": 1}], 400, "items[1].queue must be a non-empty string", "bad_request"),
        ([{"queue": "Q"}], 400, "items[1].payload is required", "bad_request"),
        ([{"queue": "Q", "payload": 1, "transactionId": 5}], 400, "items[1].transactionId must be a non-empty string", "bad_request"),
        ([{"queue": "Q", "payload": 1, "transactionId": "t" * 65536}], 400, "items[1].transactionId is over 65535 bytes", "bad_request"),
        ([{"queue": "Q", "payload": 1, "partition": ["p"]}], 400, "items[1].partition must be a non-empty string", "bad_request"),
        ([{"queue": "q" * 512, "payload": 1}], 413, "items[1].queue is over 511 bytes", "name_too_long"),
    ],
)  # fmt: skip
def test_bad_push_writes_nothing(http, unique, items, status, message, code):
    q = unique("pushbad")
    body: dict[str, Any] = {}
    if items is not None:
        # A good item first: a refusal must not write it either.
        body["items"] = (
            [{"queue": q, "payload": 0}, *[{**i, "queue": q} if i.get("queue") == "Q" else i for i in items]]
            if isinstance(items, list)
            else items
        )
    answer = http.post("/push", json=body)
    assert answer.status_code == status
    assert answer.json() == {"error": message, "code": code}
    assert_nothing_written(http, q)


def test_requests_without_a_token_are_refused(live_server):
    answer = httpx.post(f"{live_server.url}/api/v1/push", json={"items": []})
    assert answer.status_code == 401
    answer = httpx.get(f"{live_server.url}/api/v1/pop/queue/x?wait=false")
    assert answer.status_code == 401
    assert answer.json()["code"] == "unauthorized"


# -- pop -------------------------------------------------------------------------------


def test_pop_answers_the_protocol_shape(http, unique):
    q = unique("pop")
    (pushed,) = push(http, q, {"x": 1}, txn="t")
    answer = http.get(f"/pop/queue/{q}", params={"batch": 5, "wait": "false"})
    assert answer.status_code == 200
    body = answer.json()
    assert list(body) == [
        "success", "queue", "partition", "partitionId", "leaseId", "consumerGroup", "partitionsClaimed", "messages",
    ]  # fmt: skip
    assert body["success"] is True
    assert (body["queue"], body["partition"], body["consumerGroup"], body["partitionsClaimed"]) == (
        q, "Default", "__QUEUE_MODE__", 1,
    )  # fmt: skip
    assert isinstance(body["partitionId"], str)
    assert body["partitionId"].isdigit()
    assert UUID.match(body["leaseId"])
    (message,) = body["messages"]
    assert message == {
        "id": pushed["message_id"], "transactionId": "t-0", "traceId": None, "data": {"x": 1},
        "producerSub": "live-tests", "createdAt": message["createdAt"], "partitionId": body["partitionId"],
        "partition": "Default", "leaseId": body["leaseId"], "consumerGroup": "__QUEUE_MODE__",
        "deliveryAttempt": 1, "offset": 0,
    }  # fmt: skip
    assert ISO_Z.match(message["createdAt"])


#: Payloads whose JSON is easy to get wrong, each pushed and popped back.
UNUSUAL_PAYLOADS = [
    {"deep": {"a": [1, [2, [3, {"b": None}]]], "z": {}}, "first": True, "empty": []},
    12345678901234567890,
    -(2**70) - 1,
    [1e-7, 1.0, -0.0, 1e22, 1.5e300, 0.1, 5e-324],
    {"null stores json's spelling": None, "small": 1e-7, "big": 1e22},
    'quote " backslash \\ slash / tab \t newline \n nul \x00 del \x7f',
    "line\u2028para\u2029 é 😀 \u00a0 \ufeff",
    {'\u2028key "quoted"': "\\", "ключ": "значение", "": ""},
    None,
    False,
    "",
    [],
]


def _strict(value: Any) -> str:
    """``value`` spelled so that 1 and 1.0 (equal in Python) differ."""
    return json.dumps(value, ensure_ascii=True)


@pytest.mark.parametrize(
    ("route", "params"),
    [
        ("/pop/queue/{q}", {"wait": "false"}),
        ("/pop/queue/{q}/partition/Default", {"wait": "false"}),
        ("/pop/queue/{q}", {"wait": "true", "timeout": 2000, "consumerGroup": "odd-group"}),
    ],
)
def test_unusual_payloads_come_back_equal_through_pop(http, unique, route, params):
    q = unique("odd")
    push(http, q, *UNUSUAL_PAYLOADS)
    answer = http.get(route.format(q=q), params={"batch": 50, **params})
    assert answer.status_code == 200
    got = [m["data"] for m in answer.json()["messages"]]
    assert [_strict(v) for v in got] == [_strict(v) for v in UNUSUAL_PAYLOADS]
    # The payloads travel as the push stored them, not parsed and written
    # again (which spells a stored 1e-07 as 1e-7).
    for payload in UNUSUAL_PAYLOADS:
        assert stored_text(payload).encode() in answer.content


def test_empty_pop_is_204_without_a_body(http, unique):
    answer = http.get(f"/pop/queue/{unique('empty')}", params={"wait": "false"})
    assert (answer.status_code, answer.content) == (204, b"")


def test_autopilot_pop_chooses_a_batch_and_echoes_it(http, unique):
    q = unique("auto")
    push(http, q, *range(150))
    body = http.get(f"/pop/queue/{q}", params={"autopilot": "true", "wait": "true", "timeout": 1000}).json()
    assert len(body["messages"]) == 100
    assert body["autopilot"]["batch"] == 100
    assert body["autopilot"]["partitions"] == 4


def test_partition_route_and_trace_id(http, unique):
    q = unique("part")
    trace = "0190b2a8-0000-7000-8000-000000000001"
    http.post("/push", json={"items": [{"queue": q, "partition": "p-1", "payload": 1, "traceId": trace}]})
    push(http, q, 2)
    body = http.get(f"/pop/queue/{q}/partition/p-1", params={"wait": "false"}).json()
    assert [(m["partition"], m["traceId"]) for m in body["messages"]] == [("p-1", trace)]


def test_discovery_pop_by_namespace_and_task(http, unique):
    q, ns = unique("disc"), unique("ns")
    http.post("/configure", json={"queue": q, "namespace": ns, "task": "t", "options": {}})
    push(http, q, "hello")
    body = http.get("/pop", params={"namespace": ns, "task": "t", "wait": "false"}).json()
    assert (body["queue"], body["messages"][0]["data"]) == (q, "hello")
    answer = http.get("/pop", params={"wait": "false"})
    assert (answer.status_code, answer.json()) == (
        400,
        {"error": "namespace or task is required", "code": "bad_request"},
    )


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"batch": "many"}, "batch must be an integer"),
        ({"batch": "0"}, "batch must be at least 1"),
        ({"wait": "perhaps"}, "wait must be true or false"),
        ({"timeout": "soon"}, "timeout must be an integer"),
        ({"leaseSeconds": "0"}, "leaseSeconds must be at least 1"),
        ({"subscriptionFrom": "yesterday"}, "subscriptionFrom must be an ISO time or now"),
        ({"conflation": "perhaps", "consumerGroup": "g"}, "conflation must be true or false"),
    ],
)
def test_bad_pop_parameters(http, unique, params, message):
    q = unique("popbad")
    push(http, q, 1)
    answer = http.get(f"/pop/queue/{q}", params={"wait": "false", **params})
    assert (answer.status_code, answer.json()) == (400, {"error": message, "code": "bad_request"})
    assert depth(http, q)["processing"] == 0


def test_long_poll_is_woken_by_a_push(http, live_server, unique):
    q = unique("wake")
    results: dict[str, Any] = {}

    def waiter() -> None:
        started = time.monotonic()
        with httpx.Client(headers={"Authorization": f"Bearer {live_server.token}"}, timeout=40) as client:
            results["answer"] = client.get(f"{live_server.url}/api/v1/pop/queue/{q}?wait=true&timeout=20000")
        results["elapsed"] = time.monotonic() - started

    thread = threading.Thread(target=waiter)
    thread.start()
    time.sleep(0.5)
    pushed_at = time.monotonic()
    push(http, q, "wake up")
    thread.join(30)
    assert results["answer"].status_code == 200
    assert results["answer"].json()["messages"][0]["data"] == "wake up"
    # Woken by the push, not by the 2 s re-check.
    assert time.monotonic() - pushed_at < 1.0


def test_long_poll_never_outlives_its_timeout(http, unique):
    started = time.monotonic()
    answer = http.get(f"/pop/queue/{unique('timeout')}", params={"wait": "true", "timeout": 700})
    elapsed = time.monotonic() - started
    assert answer.status_code == 204
    assert 0.6 < elapsed < 1.5


# -- ack and lease --------------------------------------------------------------------


def pop(http, queue: str, **params: Any) -> dict:
    answer = http.get(f"/pop/queue/{queue}", params={"wait": "false", **params})
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_single_ack_answers_an_array(http, unique):
    q = unique("ack")
    push(http, q, 1, 2)
    body = pop(http, q, batch=2)
    m = body["messages"][1]
    answer = http.post(
        "/ack",
        json={"transactionId": m["transactionId"], "partitionId": m["partitionId"], "status": "completed",
              "leaseId": m["leaseId"], "error": None, "consumerGroup": None},
    )  # fmt: skip
    assert answer.status_code == 200
    assert answer.json() == [
        {"index": 0, "transactionId": m["transactionId"], "success": True, "error": None,
         "leaseReleased": True, "dlq": False, "noop": False},
    ]  # fmt: skip
    assert depth(http, q)["pending"] == 0


def test_batch_ack_statuses_and_fencing(http, unique):
    q = unique("batch")
    http.post("/configure", json={"queue": q, "options": {"retryLimit": 0}})
    push(http, q, 1, 2)
    body = pop(http, q, batch=2)
    first, second = body["messages"]
    acks = [
        {"transactionId": first["transactionId"], "partitionId": first["partitionId"], "status": "failed",
         "leaseId": body["leaseId"], "error": "boom"},
        {"transactionId": second["transactionId"], "partitionId": second["partitionId"], "status": "completed",
         "leaseId": "0190b2a8-0000-7000-8000-000000000000"},
        {"transactionId": "missing", "partitionId": first["partitionId"], "status": "completed"},
        {"transactionId": "x", "partitionId": "p-1", "status": "completed"},
    ]  # fmt: skip
    answer = http.post("/ack/batch", json={"acknowledgments": acks, "consumerGroup": None})
    assert answer.status_code == 200
    results = answer.json()
    assert [(r["index"], r["success"], r["dlq"], r["error"]) for r in results] == [
        (0, True, True, None),
        (1, False, False, "invalid or expired lease"),
        (2, False, False, "transaction is unresolvable, already committed, or acknowledgment is stale"),
        (3, False, False, "partitionId is not a partition id"),
    ]
    dlq = http.get("/dlq", params={"queue": q}).json()
    assert dlq["total"] == 1
    (row,) = dlq["messages"]
    assert (row["transactionId"], row["errorMessage"], row["data"], row["consumerGroup"]) == (
        first["transactionId"], "boom", 1, "__QUEUE_MODE__",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"partitionId": "1"}, "transactionId must be a non-empty string"),
        ({"transactionId": "t"}, "partitionId must be a non-empty string"),
        ({"transactionId": "t", "partitionId": "1", "status": 3}, "status must be a string"),
        ({"transactionId": "t", "partitionId": "1", "leaseId": 3}, "leaseId must be a string"),
        ({"transactionId": "t", "partitionId": "1", "consumerGroup": 3}, "consumerGroup must be a string"),
    ],
)
def test_bad_acks_are_400(http, body, message):
    answer = http.post("/ack", json=body)
    assert (answer.status_code, answer.json()) == (400, {"error": message, "code": "bad_request"})


def test_bad_batch_ack_writes_nothing(http, unique):
    q = unique("badbatch")
    push(http, q, 1)
    m = pop(http, q)["messages"][0]
    good = {"transactionId": m["transactionId"], "partitionId": m["partitionId"], "status": "completed"}
    answer = http.post("/ack/batch", json={"acknowledgments": [good, "nope"]})
    assert (answer.status_code, answer.json()) == (
        400,
        {"error": "acknowledgment 1 must be an object", "code": "bad_request"},
    )
    assert depth(http, q)["processing"] == 1
    answer = http.post("/ack/batch", json={"acknowledgments": {}})
    assert answer.json() == {"error": "acknowledgments must be an array", "code": "bad_request"}


def test_lease_extend_takes_no_body_and_answers_success_false_when_gone(http, unique):
    q = unique("lease")
    push(http, q, 1)
    lease = pop(http, q, leaseSeconds=5)["leaseId"]
    answer = http.post(f"/lease/{lease}/extend")
    assert answer.status_code == 200
    body = answer.json()
    assert (body["leaseId"], body["success"], body["renewed"]) == (lease, True, 1)
    assert ISO_Z.match(body["newExpiresAt"])
    assert body["newExpiresAt"] == body["expiresAt"] == body["lease_expires_at"]
    gone = http.post("/lease/0190b2a8-0000-7000-8000-000000000000/extend").json()
    assert gone == {
        "leaseId": "0190b2a8-0000-7000-8000-000000000000", "success": False, "renewed": 0,
        "newExpiresAt": None, "expiresAt": None, "lease_expires_at": None,
    }  # fmt: skip
    assert http.post("/lease/not-a-lease/extend").json()["success"] is False
    bad = http.post(f"/lease/{lease}/extend", json={"seconds": 0})
    assert (bad.status_code, bad.json()) == (
        400,
        {"error": "seconds must be an integer of at least 1", "code": "bad_request"},
    )


# -- resources ----------------------------------------------------------------------------


def test_queue_list_detail_depth_and_delete(http, unique):
    q = unique("res")
    push(http, q, 1, 2, 3, partition="p1")
    pop(http, q, batch=1)
    listing = http.get("/resources/queues").json()
    assert set(listing) == {"queues", "kvRows", "kvBytes", "timerRows", "timerBytes"}
    entry = next(e for e in listing["queues"] if e["name"] == q)
    assert entry["messages"] == {"total": 3, "pending": 3, "processing": 1, "completed": 0, "deadLetter": 0}
    assert (entry["queue"], entry["partitions"], entry["storage"]) == (q, 1, "segments")
    assert entry["retainedBytes"] == 3
    lanes = http.get("/resources/queues", params={"stats": "lanes"}).json()
    assert lanes["stats"] == "lanes"
    assert set(next(e for e in lanes["queues"] if e["name"] == q)) == {"id", "name", "queue", "partitions", "createdAt"}

    detail = http.get(f"/resources/queues/{q}").json()
    (part,) = detail["partitions"]
    assert part["name"] == "p1"
    assert part["messages"] == {
        "total": 3,
        "pending": 3,
        "processing": 1,
        "completed": 0,
        "failed": None,
        "deadLetter": 0,
    }

    d = depth(http, q)
    assert {k: d[k] for k in ("queue", "group", "pending", "processing", "ready", "partitionsPending", "partitionsReady")} == {
        "queue": q, "group": None, "pending": 3, "processing": 1, "ready": 2, "partitionsPending": 1, "partitionsReady": 1,
    }  # fmt: skip
    assert d["partitions"] == [{"partition": "p1", "pending": 3, "processing": 1, "ready": 2}]
    assert d["oldestReadyAgeSeconds"] >= 0
    assert depth(http, q, group="never-seen")["pending"] == -1

    overview = http.get("/resources/overview").json()
    assert overview["queues"] >= 1
    assert set(overview["messages"]) == {"total", "pending", "processing", "completed", "failed", "deadLetter"}

    assert http.delete(f"/resources/queues/{q}").json() == {"deleted": True, "existed": True, "queue": q}
    assert http.delete(f"/resources/queues/{q}").json() == {
        "deleted": False, "existed": False, "queue": q, "message": "Queue not found",
    }  # fmt: skip


def test_queue_detail_oldest_and_newest_message(http, unique):
    """oldestMessage is the first pending message's push time, newestMessage the last one's."""
    q = unique("ages")
    for n in (1, 2, 3):
        push(http, q, n)
    body = pop(http, q, batch=3)
    created = [m["createdAt"] for m in body["messages"]]
    assert len(set(created)) == 3

    def times() -> tuple[str | None, str | None]:
        (part,) = http.get(f"/resources/queues/{q}").json()["partitions"]
        return part["oldestMessage"], part["newestMessage"]

    # Leased messages are still pending.
    assert times() == (created[0], created[2])
    first = body["messages"][0]
    acked = http.post(
        "/ack",
        json={"transactionId": first["transactionId"], "partitionId": first["partitionId"], "status": "completed",
              "leaseId": body["leaseId"]},
    )  # fmt: skip
    assert acked.json()[0]["success"] is True
    assert times() == (created[1], created[2])
    items = [
        {"transactionId": m["transactionId"], "partitionId": m["partitionId"], "status": "completed"}
        for m in body["messages"][1:]
    ]
    assert all(a["success"] for a in http.post("/ack/batch", json={"acknowledgments": items}).json())
    assert times() == (None, created[2])


def test_unknown_queue_is_404_queue_not_found(http):
    for path in ("/resources/queues/nope-nope", "/resources/queues/nope-nope/depth"):
        answer = http.get(path)
        assert (answer.status_code, answer.json()) == (404, {"error": "Queue not found"})


def test_dlq_parameters_are_checked(http):
    answer = http.get("/dlq", params={"limit": "x"})
    assert (answer.status_code, answer.json()) == (400, {"error": "limit must be an integer", "code": "bad_request"})
    answer = http.get("/dlq", params={"from": "long ago"})
    assert answer.json() == {"error": "from must be an ISO time", "code": "bad_request"}
    assert http.get("/dlq", params={"queue": "nothing-here"}).json() == {"messages": [], "total": 0}
    # Python reads offsets up to 23:59, PostgreSQL up to 15:59: the time is
    # sent in UTC (schemathesis found the 500 once the document named ``from``).
    answer = http.get("/dlq", params={"queue": "nothing-here", "from": "0297-04-08T09:24:39.3-21:55"})
    assert (answer.status_code, answer.json()) == (200, {"messages": [], "total": 0})


# LISTEN needs a session of its own; through a pooler the replicas poll
# instead (tests/pooler/test_transaction_mode.py).
@pytest.mark.direct_only
@requires_postgres
def test_a_push_on_another_replica_wakes_the_waiter(live_server, unique):
    """Two servers on one database: LISTEN/NOTIFY carries the wake-up."""
    q = unique("replica")
    with run_server(extra_env={"DATABASE_URL": live_server.env["DATABASE_URL"]}) as other:
        results: dict[str, Any] = {}

        def waiter() -> None:
            with httpx.Client(headers={"Authorization": f"Bearer {live_server.token}"}, timeout=40) as client:
                results["answer"] = client.get(f"{live_server.url}/api/v1/pop/queue/{q}?wait=true&timeout=20000")

        thread = threading.Thread(target=waiter)
        thread.start()
        time.sleep(0.7)
        pushed_at = time.monotonic()
        answer = httpx.post(
            f"{other.url}/api/v1/push",
            json={"items": [{"queue": q, "payload": "from the other replica"}]},
            headers={"Authorization": f"Bearer {live_server.token}"},
        )
        assert answer.status_code == 201
        thread.join(30)
        woke_after = time.monotonic() - pushed_at
    assert results["answer"].json()["messages"][0]["data"] == "from the other replica"
    # Well under the 2 s re-check: the NOTIFY woke it.
    assert woke_after < 1.0
