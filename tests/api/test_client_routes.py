"""The client's remaining routes through the official client, then their
exact answers and refusals over HTTP."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta

import httpx
import pytest

pytestmark = pytest.mark.live

ISO_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


@pytest.fixture
def http(live_server):
    with httpx.Client(
        base_url=f"{live_server.url}/api/v1",
        headers={"Authorization": f"Bearer {live_server.token}"},
        timeout=30,
    ) as client:
        yield client


async def _push(queen, q, partition, *payloads):
    return await queen.queue(q).partition(partition).push([{"data": p} for p in payloads])


# -- offset reads ------------------------------------------------------------------


async def test_fetch_reads_partitions_by_offset(queen, unique):
    """fetch() reads every record of each partition from an offset, without a lease."""
    q = unique("fetch")
    await _push(queen, q, "a", *[{"n": i} for i in range(5)])
    await _push(queen, q, "b", "x", "y")
    read = await queen.queue(q).fetch(["a", "b", "nobody"])
    assert [r["offset"] for r in read["a"]["records"]] == [0, 1, 2, 3, 4]
    assert [r["payload"] for r in read["a"]["records"]] == [{"n": i} for i in range(5)]
    assert all(ISO_Z.match(r["ts"]) for r in read["a"]["records"])
    assert (read["a"]["highWatermark"], read["a"]["logStartOffset"], read["a"]["nextOffset"]) == (5, 0, 5)
    assert [r["payload"] for r in read["b"]["records"]] == ["x", "y"]
    assert read["nobody"]["records"] == []
    again = await queen.queue(q).fetch("a", offsets={"a": 3})
    assert [r["offset"] for r in again["a"]["records"]] == [3, 4]
    # Nothing was leased: a pop still gets the first message.
    (first,) = await queen.queue(q).partition("a").batch(1).wait(False).pop()
    assert first["data"] == {"n": 0}


async def test_fetch_pages_through_a_small_byte_budget(queen, unique):
    """A byte budget smaller than the partition makes the client ask again; every record arrives once."""
    q = unique("fetch-bytes")
    await _push(queen, q, "p", *["z" * 100 for _ in range(30)])
    read = await queen.queue(q).fetch("p", max_bytes=250)
    assert [r["offset"] for r in read["p"]["records"]] == list(range(30))


async def test_changed_since_lists_written_partitions(queen, unique):
    """changed_since() lists partitions in creation order; a later since leaves the old ones out."""
    q = unique("changed")
    await _push(queen, q, "first", 1)
    await _push(queen, q, "second", 2, 3)
    everything = await queen.queue(q).changed_since()
    assert [(p["name"], p["lastOffset"], p["logStart"]) for p in everything["partitions"]] == [
        ("first", 0, 0),
        ("second", 1, 0),
    ]
    assert ISO_Z.match(everything["safeTime"])
    later = await queen.queue(q).changed_since(datetime.now(UTC) + timedelta(minutes=5))
    assert later["partitions"] == []
    assert (await queen.queue(unique("none")).changed_since())["partitions"] == []


# -- consumer groups ---------------------------------------------------------------


async def _consume(queen, q, group, n):
    messages = await queen.queue(q).group(group).batch(n).wait(False).pop()
    if messages:
        await queen.ack(messages, True, {"group": group})
    return [m["data"] for m in messages]


async def test_delete_consumer_group_forgets_its_position(queen, unique):
    """delete_consumer_group() drops the group's cursors: it reads everything again."""
    q = unique("cg-del")
    group = unique("g")
    await _push(queen, q, "Default", 1, 2, 3)
    assert await _consume(queen, q, group, 10) == [1, 2, 3]
    answer = await queen.delete_consumer_group(group)
    assert answer == {"success": True, "consumerGroup": group, "deletedPartitions": 1, "metadataDeleted": True}
    assert await _consume(queen, q, group, 10) == [1, 2, 3]


async def test_delete_consumer_group_keeping_metadata_rewinds_it(queen, unique):
    """deleteMetadata=false keeps the registration and rewinds to the subscription start."""
    q = unique("cg-keep")
    group = unique("g")
    await _push(queen, q, "Default", 1, 2)
    await queen.queue(q).group(group).subscription_mode("new").batch(1).wait(False).pop()
    await _push(queen, q, "Default", 3, 4)
    assert await _consume(queen, q, group, 10) == [3, 4]
    answer = await queen.delete_consumer_group(group, delete_metadata=False)
    assert answer["metadataDeleted"] is False
    assert await _consume(queen, q, group, 10) == [3, 4]


async def test_update_consumer_group_timestamp_moves_an_unread_group(queen, unique):
    """A group that has read nothing starts after the last message pushed at or before the timestamp."""
    q = unique("cg-sub")
    group = unique("g")
    await _push(queen, q, "Default", 1, 2)
    assert await queen.queue(q).group(group).subscription_mode("new").wait(False).pop() == []
    answer = await queen.update_consumer_group_timestamp(group, "2000-01-01T00:00:00Z")
    assert answer == {
        "success": True,
        "consumerGroup": group,
        "newTimestamp": "2000-01-01T00:00:00Z",
        "rowsUpdated": 1,
        "partitionsMoved": 1,
    }
    assert await _consume(queen, q, group, 10) == [1, 2]


async def test_admin_consumer_groups(queen, unique):
    """List, detail, lagging, seek to the end and delete for one queue, through queen.admin."""
    q = unique("cg-admin")
    group = unique("g")
    await _push(queen, q, "p", 1, 2, 3, 4)
    assert await _consume(queen, q, group, 1) == [1]
    listed = [g for g in await queen.admin.list_consumer_groups() if g["name"] == group]
    assert len(listed) == 1
    row = listed[0]
    assert (row["queueName"], row["members"], row["partitionsWithLag"], row["totalLag"], row["state"]) == (
        q,
        1,
        1,
        3,
        "Stable",
    )
    assert row["subscriptionMode"] == "all"
    detail = await queen.admin.get_consumer_group(group)
    (part,) = detail[q]["partitions"]
    assert (part["partition"], part["totalConsumed"], part["offsetLag"], part["leaseActive"]) == ("p", 1, 3, False)
    # Its oldest unfinished message is seconds old: not lagging by an hour
    # (tests/unit/test_queues_browse.py moves the clock for the other side).
    assert [r for r in await queen.admin.get_lagging_consumers(3600) if r["consumer_group"] == group] == []
    seek = await queen.admin.seek_consumer_group(group, q, {"toEnd": True})
    assert seek == {
        "success": True,
        "consumerGroup": group,
        "queueName": q,
        "seekToEnd": True,
        "targetTimestamp": None,
        "partitionsUpdated": 1,
    }
    assert await _consume(queen, q, group, 10) == []
    await _push(queen, q, "p", 5)
    assert await _consume(queen, q, group, 10) == [5]
    gone = await queen.admin.delete_consumer_group_for_queue(group, q)
    assert gone == {
        "success": True,
        "consumerGroup": group,
        "queueName": q,
        "deletedPartitions": 1,
        "metadataDeleted": True,
    }
    assert await queen.admin.get_consumer_group(group) == {}


async def test_seek_to_a_time_replays_from_there(queen, unique, http):
    """A seek to a time before every push rewinds the group to the start."""
    q = unique("cg-seek")
    group = unique("g")
    await _push(queen, q, "Default", 1, 2)
    assert await _consume(queen, q, group, 10) == [1, 2]
    seek = await queen.admin.seek_consumer_group(group, q, {"timestamp": "2000-01-01T00:00:00Z"})
    assert seek["targetTimestamp"] == "2000-01-01T00:00:00.000000Z"
    assert await _consume(queen, q, group, 10) == [1, 2]


# -- traces ------------------------------------------------------------------------


async def test_traces_recorded_by_a_consumer_are_listed(queen, unique):
    """message.trace() in a consume handler stores the event; it is listed per message and by name."""
    q = unique("trace")
    name = unique("order")
    await _push(queen, q, "Default", {"order": 7})
    seen = []

    async def handler(message):
        result = await message["trace"]({"traceName": [name, "all-orders"], "data": {"step": "paid"}})
        seen.append((message["partitionId"], message["transactionId"], result))

    await asyncio.wait_for(queen.queue(q).each().limit(1).timeout_millis(2000).consume(handler), 30)
    ((pid, txn, result),) = seen
    assert result["success"] is True
    assert re.match(r"^[0-9a-f-]{36}$", result["traceId"])
    (trace,) = (await queen.admin.get_traces_for_message(pid, txn))["traces"]
    assert trace["id"] == result["traceId"]
    assert (trace["event_type"], trace["data"], trace["consumer_group"]) == ("info", {"step": "paid"}, "__QUEUE_MODE__")
    assert trace["trace_names"] == sorted([name, "all-orders"])
    by_name = await queen.admin.get_traces_by_name(name)
    (named,) = by_name["traces"]
    assert (named["queue_name"], named["partition_name"], named["message_payload"]) == (q, "Default", {"order": 7})
    assert by_name["pagination"] == {"limit": 100, "offset": 0, "hasMore": False}
    names = {n["trace_name"]: n for n in (await queen.admin.get_trace_names(limit=1000))["trace_names"]}
    assert (names[name]["trace_count"], names[name]["message_count"]) == (1, 1)


# -- operator reads ----------------------------------------------------------------


async def test_admin_namespaces_tasks_partitions_and_messages(queen, unique):
    """queen.admin's resource and message reads answer Queen's shapes with our counts."""
    ns = unique("ns")
    q = f"{ns}.billing"
    await queen.queue(q).namespace(ns).task("billing").create()
    pushed = await _push(queen, q, "p", {"a": 1}, {"a": 2})
    namespaces = {n["namespace"]: n for n in (await queen.admin.get_namespaces())["namespaces"]}
    assert namespaces[ns] == {"namespace": ns, "queues": 1, "partitions": 1, "messages": {"total": 2, "pending": 2}}
    tasks = {t["task"]: t for t in (await queen.admin.get_tasks())["tasks"]}
    assert tasks["billing"]["queues"] >= 1
    (part,) = (await queen.admin.get_partitions(queue=q))["partitions"]
    assert (part["name"], part["queue"], part["messages"]["total"], part["messages"]["pending"]) == ("p", q, 2, 2)
    listed = await queen.admin.list_messages(queue=q)
    assert [m["transactionId"] for m in listed["messages"]] == [
        pushed[1]["transaction_id"],
        pushed[0]["transaction_id"],
    ]
    assert {m["status"] for m in listed["messages"]} == {"pending"}
    (message,) = await queen.queue(q).batch(1).wait(False).pop()
    await queen.ack(message, True)
    done = await queen.admin.list_messages(queue=q, status="completed")
    assert [m["transactionId"] for m in done["messages"]] == [message["transactionId"]]
    detail = await queen.admin.get_message(message["partitionId"], message["transactionId"])
    assert (detail["status"], detail["payload"], detail["queue"], detail["partition"]) == (
        "completed",
        {"a": 1},
        q,
        "p",
    )
    assert detail["consumerGroups"] == [{"name": "__QUEUE_MODE__", "consumed": True, "leaseExpiresAt": None}]


# -- exact answers and refusals ----------------------------------------------------


def test_fetch_exact_answer(http, unique):
    q = unique("fetch-http")
    http.post("/push", json={"items": [{"queue": q, "partition": "p", "payload": {"k": 1}, "transactionId": "t1"}]})
    answer = http.post(
        "/fetch",
        json={
            "entries": [
                {"queue": q, "partition": "p", "offset": 0},
                {"queue": q, "partition": "p", "offset": 9},
                {"queue": q, "partition": "x"},
                {"queue": q, "partition": "p", "offset": 1},
            ]
        },
    )
    assert answer.status_code == 200
    body = answer.json()
    ts = body["entries"][0]["records"][0]["ts"]
    assert ISO_Z.match(ts)
    assert body == {
        "entries": [
            {
                "queue": q,
                "partition": "p",
                "records": [{"offset": 0, "transactionId": "t1", "payload": {"k": 1}, "ts": ts}],
                "highWatermark": 1,
                "logStartOffset": 0,
                "error": None,
            },
            {
                "queue": q,
                "partition": "p",
                "records": [],
                "highWatermark": 1,
                "logStartOffset": 0,
                "error": "OFFSET_OUT_OF_RANGE",
            },
            {
                "queue": q,
                "partition": "x",
                "records": [],
                "highWatermark": 0,
                "logStartOffset": 0,
                "error": "UNKNOWN_TOPIC_OR_PARTITION",
            },
            # The high watermark itself is in range: nothing to read yet.
            {
                "queue": q,
                "partition": "p",
                "records": [],
                "highWatermark": 1,
                "logStartOffset": 0,
                "error": None,
            },
        ]
    }


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ([], "the body must be a JSON object"),
        ({"entries": []}, "entries must be a non-empty array"),
        ({"entries": [{"queue": "q"}]}, "entries[0].partition must be a non-empty string"),
        (
            {"entries": [{"queue": "q", "partition": "p", "offset": -1}]},
            "entries[0].offset must be an integer of at least 0",
        ),
        ({"entries": [{"queue": "q", "partition": "p"}], "maxBytes": 0}, "maxBytes must be an integer of at least 1"),
        ({"entries": [{"queue": "q", "partition": "p"}] * 1025}, "at most 1024 entries per call"),
    ],
)
def test_fetch_refusals(http, body, error):
    answer = http.post("/fetch", json=body)
    assert (answer.status_code, answer.json()) == (400, {"error": error, "code": "bad_request"})


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"entries": [{"queue": "q", "since": "yesterday"}]}, "entries[0].since must be an ISO-8601 time"),
        ({"entries": [{"queue": "q", "after": "abc"}]}, "entries[0].after must be a cursor this route answered"),
        # A digit str.isdigit() knows and int() does not (it was a 500).
        ({"entries": [{"queue": "q", "after": "\u00b2"}]}, "entries[0].after must be a cursor this route answered"),
        ({"entries": [{"queue": "q", "after": 5}]}, "entries[0].after must be a cursor this route answered"),
        ({"entries": [{"queue": "q", "limit": 0}]}, "entries[0].limit must be an integer of at least 1"),
    ],
)
def test_changed_refusals(http, body, error):
    answer = http.post("/partitions/changed", json=body)
    assert (answer.status_code, answer.json()) == (400, {"error": error, "code": "bad_request"})


def test_changed_pages_with_a_cursor(http, unique):
    q = unique("changed-page")
    for name in ("a", "b", "c"):
        http.post("/push", json={"items": [{"queue": q, "partition": name, "payload": 1}]})
    first = http.post("/partitions/changed", json={"entries": [{"queue": q, "limit": 2}]}).json()["entries"][0]
    assert [p["name"] for p in first["partitions"]] == ["a", "b"]
    assert first["next"] == first["partitions"][1]["id"]
    rest = http.post("/partitions/changed", json={"entries": [{"queue": q, "limit": 2, "after": first["next"]}]}).json()
    assert [p["name"] for p in rest["entries"][0]["partitions"]] == ["c"]
    assert rest["entries"][0]["next"] is None
    unknown = http.post("/partitions/changed", json={"entries": [{"queue": unique("none")}]}).json()["entries"][0]
    assert unknown == {"queue": unknown["queue"], "partitions": [], "next": None, "error": "UNKNOWN_TOPIC_OR_PARTITION"}


def test_group_route_refusals(http):
    assert http.post("/consumer-groups/g/subscription", json={}).json() == {
        "error": "Missing subscriptionTimestamp in request body",
        "code": "bad_request",
    }
    bad_time = http.post("/consumer-groups/g/subscription", json={"subscriptionTimestamp": "soon"})
    assert (bad_time.status_code, bad_time.json()["error"]) == (400, "subscriptionTimestamp must be an ISO-8601 time")
    seek = http.post("/consumer-groups/g/queues/q/seek", json={})
    assert (seek.status_code, seek.json()) == (
        400,
        {"error": "Must specify either 'toEnd': true or 'timestamp'", "code": "bad_request"},
    )
    flag = http.delete("/consumer-groups/g", params={"deleteMetadata": "maybe"})
    assert (flag.status_code, flag.json()["error"]) == (400, "deleteMetadata must be true or false")
    unknown = http.delete("/consumer-groups/never-seen-group")
    assert unknown.json() == {
        "success": True,
        "consumerGroup": "never-seen-group",
        "deletedPartitions": 0,
        "metadataDeleted": True,
    }
    assert http.get("/consumer-groups/never-seen-group").json() == {}


def test_trace_refusals(http, unique):
    missing = http.post("/traces", json={"transactionId": "t", "data": {}})
    assert (missing.status_code, missing.json()) == (
        400,
        {"error": "transactionId and partitionId are required", "code": "bad_request"},
    )
    no_data = http.post("/traces", json={"transactionId": "t", "partitionId": "1"})
    assert no_data.json() == {"error": "data is required", "code": "bad_request"}
    gone = http.post("/traces", json={"transactionId": "nope", "partitionId": "999999999", "data": {}})
    assert (gone.status_code, gone.json()) == (404, {"error": "Message not found", "code": "not_found"})
    not_an_id = http.get("/messages/abc/t")
    assert (not_an_id.status_code, not_an_id.json()) == (404, {"error": "Message not found", "code": "not_found"})
    assert http.get("/traces/999999999/t").json() == {"traces": []}
    far = http.get("/messages", params={"offset": 100_001})
    assert (far.status_code, far.json()) == (
        400,
        {"error": "offset must be at most 100000 (narrow the time window with from and to)", "code": "bad_request"},
    )
    # An empty parameter reads as absent (the document says so too).
    empty = http.get("/messages", params={"limit": "", "offset": "", "status": "", "from": "", "to": ""})
    assert (empty.status_code, empty.json()["pagination"]) == (200, {"limit": 200, "offset": 0})
    bad_status = http.get("/messages", params={"status": "lost"})
    assert (bad_status.status_code, bad_status.json()["error"]) == (
        400,
        "status must be pending, processing, completed or dead_letter",
    )


async def test_a_push_infers_namespace_and_task_from_a_dotted_name(queen, unique):
    """billing.invoices.eu is namespace billing, task invoices (Queen's push rule); a dotless name has none."""
    ns = unique("shop")
    q = f"{ns}.invoices.eu"
    plain = unique("plain")
    await _push(queen, q, "Default", {"n": 1})
    await _push(queen, plain, "Default", {"n": 2})
    detail = await queen.admin.get_queue(q)
    assert (detail["namespace"], detail["task"]) == (ns, "invoices")
    undotted = await queen.admin.get_queue(plain)
    assert (undotted["namespace"], undotted["task"]) == (None, None)
    assert ns in {n["namespace"] for n in (await queen.admin.get_namespaces())["namespaces"]}
    (message,) = await queen.queue().namespace(ns).task("invoices").wait(False).pop()
    assert message["data"] == {"n": 1}


# -- message writes ----------------------------------------------------------------


async def test_delete_message_is_skipped_by_consumers(queen, unique, http):
    """admin.delete_message() removes a message: pops skip it, a gap at the head or the tail never stalls."""
    q = unique("msg-del")
    pushed = await _push(queen, q, "Default", "m1", "m2", "m3")
    (head,) = await queen.queue(q).batch(1).wait(False).pop()
    assert head["data"] == "m1"
    await queen.ack(head, True)
    pid = head["partitionId"]
    answer = await queen.admin.delete_message(pid, pushed[1]["transaction_id"])
    assert answer == {
        "success": True,
        "partitionId": pid,
        "transactionId": pushed[1]["transaction_id"],
        "message": "Message deleted successfully",
    }
    # The head of the partition is gone: the next pop skips to m3.
    (third,) = await queen.queue(q).batch(1).wait(False).pop()
    assert third["data"] == "m3"
    await queen.ack(third, True)
    again = await queen.admin.delete_message(pid, pushed[1]["transaction_id"])
    assert (again["success"], again["message"]) == (False, "Message not found")
    # A deleted message at the end of a batch: acking what was handed out frees the partition.
    tail = await _push(queen, q, "Default", "m4", "m5")
    await queen.admin.delete_message(pid, tail[1]["transaction_id"])
    batch = await queen.queue(q).batch(10).wait(False).pop()
    assert [m["data"] for m in batch] == ["m4"]
    await queen.ack(batch, True)
    await _push(queen, q, "Default", "m6")
    assert [m["data"] for m in await queen.queue(q).batch(10).wait(False).pop()] == ["m6"]
    assert http.get(f"/messages/{pid}/{pushed[1]['transaction_id']}").status_code == 404


async def test_retry_message_pushes_a_dead_letter_again(queen, unique, http):
    """admin.retry_message() puts a dead-lettered message back at the end of its partition."""
    q = unique("msg-retry")
    await _push(queen, q, "Default", {"job": 1})
    (message,) = await queen.queue(q).wait(False).pop()
    await queen.ack(message, "dlq")
    assert (await queen.queue(q).dlq().limit(10).get())["total"] == 1
    pid, txn = message["partitionId"], message["transactionId"]
    detail = await queen.admin.get_message(pid, txn)
    assert detail["status"] == "dead_letter"
    answer = await queen.admin.retry_message(pid, txn)
    replayed = answer["replayedAs"]
    assert replayed["transaction_id"].startswith("dlq:")
    assert answer == {
        "success": True,
        "result": "moved",
        "queue": q,
        "partition": "Default",
        "partitionId": pid,
        "transactionId": txn,
        "replayedAs": {
            "index": 0,
            "message_id": replayed["message_id"],
            "transaction_id": replayed["transaction_id"],
            "queueName": q,
            "status": "queued",
            "offset": 1,
        },
        "dlqRowsRemoved": 1,
    }
    assert (await queen.queue(q).dlq().limit(10).get())["total"] == 0
    (copy,) = await queen.queue(q).wait(False).pop()
    assert (copy["data"], copy["transactionId"]) == ({"job": 1}, replayed["transaction_id"])
    refused = http.post(f"/messages/{pid}/{txn}/retry")
    assert (refused.status_code, refused.json()) == (
        409,
        {"error": "The message is not in the dead-letter queue.", "code": "not_dead_lettered"},
    )
    unknown = http.post("/messages/999999999/nope/retry")
    assert (unknown.status_code, unknown.json()) == (404, {"error": "Message not found", "code": "not_found"})


def test_move_message_to_dlq_takes_a_groups_next_message(http, unique):
    """POST /messages/{pid}/{txid}/dlq dead-letters the group's next message and moves the group past it."""
    q = unique("msg-dlq")
    pushed = http.post(
        "/push", json={"items": [{"queue": q, "payload": n, "transactionId": f"t{n}"} for n in (1, 2, 3)]}
    ).json()
    pid = http.get(f"/resources/queues/{q}").json()["partitions"][0]["id"]
    assert pushed[0]["offset"] == 0
    not_next = http.post(f"/messages/{pid}/t2/dlq")
    assert (not_next.status_code, not_next.json()["code"]) == (409, "message_not_next")
    moved = http.post(f"/messages/{pid}/t1/dlq", json={"error": "poison"})
    assert moved.json() == {
        "success": True,
        "queue": q,
        "partition": "Default",
        "partitionId": pid,
        "transactionId": "t1",
        "consumerGroup": "__QUEUE_MODE__",
        "offset": 0,
    }
    (dead,) = http.get("/dlq", params={"queue": q}).json()["messages"]
    assert (dead["transactionId"], dead["errorMessage"], dead["consumerGroup"]) == ("t1", "poison", "__QUEUE_MODE__")
    popped = http.get(f"/pop/queue/{q}", params={"batch": 1, "wait": "false"}).json()
    assert [m["transactionId"] for m in popped["messages"]] == ["t2"]
    leased = http.post(f"/messages/{pid}/t2/dlq")
    assert (leased.status_code, leased.json()) == (
        409,
        {
            "error": "Only a consumer group's next message, not under a live lease, can be moved to its dead-letter queue.",
            "code": "message_not_next",
        },
    )
    assert http.post(f"/messages/{pid}/nope/dlq").status_code == 404
    bad = http.post(f"/messages/{pid}/t3/dlq", json={"error": 5})
    assert (bad.status_code, bad.json()) == (400, {"error": "error must be a string", "code": "bad_request"})


def test_operator_reads_exact_answers(http, unique):
    """Every key of the operator reads, over HTTP, for one queue a group has half read."""
    ns = unique("exact")
    q = f"{ns}.mail"
    group = unique("g")
    http.post(
        "/push",
        json={"items": [{"queue": q, "partition": "p", "payload": {"n": n}, "transactionId": f"t{n}"} for n in (1, 2)]},
    )
    popped = http.get(f"/pop/queue/{q}", params={"consumerGroup": group, "batch": 1, "wait": "false"}).json()
    (m1,) = popped["messages"]
    pid = m1["partitionId"]
    http.post(
        "/ack", json={"transactionId": "t1", "partitionId": pid, "leaseId": m1["leaseId"], "consumerGroup": group}
    )
    trace = http.post(
        "/traces",
        json={"transactionId": "t1", "partitionId": pid, "consumerGroup": group, "traceNames": ns, "data": {"ok": 1}},
    )
    assert trace.status_code == 201
    trace_id = trace.json()["traceId"]
    assert trace.json() == {"success": True, "traceId": trace_id}

    assert http.get("/resources/namespaces").json()["namespaces"][
        [n["namespace"] for n in http.get("/resources/namespaces").json()["namespaces"]].index(ns)
    ] == {"namespace": ns, "queues": 1, "partitions": 1, "messages": {"total": 2, "pending": 1}}

    (part,) = http.get("/resources/partitions", params={"queue": q}).json()["partitions"]
    assert part == {
        "id": pid,
        "name": "p",
        "queue": q,
        "namespace": ns,
        "task": "mail",
        "createdAt": part["createdAt"],
        "lastActivity": part["lastActivity"],
        "messages": {"total": 2, "pending": 1, "processing": 0, "completed": 1, "deadLetter": 0},
    }

    (row,) = [g for g in http.get("/consumer-groups").json() if g["name"] == group]
    assert row == {
        "name": group,
        "topics": [q],
        "queueName": q,
        "members": 1,
        "partitionsWithLag": 1,
        "totalLag": 1,
        "maxTimeLag": row["maxTimeLag"],
        "state": "Stable",
        "subscriptionMode": "all",
        "subscriptionTimestamp": None,
        "subscriptionCreatedAt": row["subscriptionCreatedAt"],
    }
    assert ISO_Z.match(row["subscriptionCreatedAt"])
    detail = http.get(f"/consumer-groups/{group}").json()
    assert detail == {
        q: {
            "partitions": [
                {
                    "partition": "p",
                    "workerId": None,
                    "lastConsumedAt": detail[q]["partitions"][0]["lastConsumedAt"],
                    "totalConsumed": 1,
                    "offsetLag": 1,
                    "timeLagSeconds": detail[q]["partitions"][0]["timeLagSeconds"],
                    "leaseActive": False,
                }
            ]
        }
    }

    listed = http.get("/messages", params={"queue": q}).json()
    first = listed["messages"][1]
    assert listed["mode"] == {"hasQueueMode": False, "busGroupsCount": 1, "type": "bus"}
    assert listed["pagination"] == {"limit": 200, "offset": 0}
    assert first == {
        "id": m1["id"],
        "transactionId": "t1",
        "partitionId": pid,
        "offset": 0,
        "queuePath": f"{q}/p",
        "queue": q,
        "partition": "p",
        "namespace": ns,
        "task": "mail",
        "status": "completed",
        "queueStatus": "pending",
        "busStatus": {"consumedBy": 1, "totalGroups": 1},
        "traceId": None,
        "producerSub": "live-tests",
        "queuePriority": 0,
        "createdAt": m1["createdAt"],
        "leaseExpiresAt": None,
    }
    assert [m["status"] for m in listed["messages"]] == ["pending", "completed"]

    message = http.get(f"/messages/{pid}/t1").json()
    assert message == {
        "id": m1["id"],
        "transactionId": "t1",
        "partitionId": pid,
        "offset": 0,
        "queuePath": f"{q}/p",
        "queue": q,
        "partition": "p",
        "namespace": ns,
        "task": "mail",
        "status": "completed",
        "traceId": None,
        "producerSub": "live-tests",
        "createdAt": m1["createdAt"],
        "leaseExpiresAt": None,
        "payload": {"n": 1},
        "isEncrypted": False,
        "errorMessage": None,
        "retryCount": None,
        "queueConfig": {
            "leaseTime": 60,
            "retryLimit": 3,
            "retryDelay": 1000,
            "ttl": message["queueConfig"]["ttl"],
            "priority": 0,
        },
        "mode": {"hasQueueMode": False, "busGroupsCount": 1, "consumedByGroups": 1, "type": "bus"},
        "consumerGroups": [{"name": group, "consumed": True, "leaseExpiresAt": None}],
    }

    (traced,) = http.get(f"/traces/{pid}/t1").json()["traces"]
    assert traced == {
        "id": trace_id,
        "event_type": "info",
        "data": {"ok": 1},
        "consumer_group": group,
        "worker_id": None,
        "created_at": traced["created_at"],
        "trace_names": [ns],
    }
    assert ISO_Z.match(traced["created_at"])
    assert http.get(f"/traces/by-name/{ns}").json() == {
        "traces": [
            {
                **traced,
                "transaction_id": "t1",
                "partition_id": pid,
                "queue_name": q,
                "partition_name": "p",
                "message_payload": {"n": 1},
            }
        ],
        "pagination": {"limit": 100, "offset": 0, "hasMore": False},
    }
    names = http.get("/traces/names", params={"limit": 1000}).json()
    assert names["pagination"] == {"limit": 1000, "offset": 0}
    assert {"trace_name": ns, "trace_count": 1, "message_count": 1, "last_seen": traced["created_at"]} in names[
        "trace_names"
    ]


async def test_admin_overview_counts_inferred_namespaces(queen, unique):
    """admin.get_overview() answers Queen's keys; a dotted push adds its namespace and task to the counts."""
    before = await queen.admin.get_overview()
    ns = unique("ov")
    await _push(queen, q := f"{ns}.{unique('task')}", "Default", 1, 2)
    after = await queen.admin.get_overview()
    assert set(after) == {"queues", "partitions", "namespaces", "tasks", "messages", "lag", "timestamp", "statsAge"}
    assert after["namespaces"] == before["namespaces"] + 1
    assert after["tasks"] == before["tasks"] + 1
    assert after["messages"]["total"] >= before["messages"]["total"] + 2
    assert (await queen.admin.get_queue(q))["namespace"] == ns
