"""Retention and limits over real HTTP and through the official client:
maxSize refusals, priority's range, windowBuffer, and the
retention loop of a live ``serve`` deleting old messages."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from tests.conftest import run_server

pytestmark = pytest.mark.live

PRIORITY_REFUSAL = "option priority must be from -1000 to 1000"


@pytest.fixture
def http(live_server):
    with httpx.Client(
        base_url=f"{live_server.url}/api/v1",
        headers={"Authorization": f"Bearer {live_server.token}"},
        timeout=30,
    ) as client:
        yield client


def configure(http, queue: str, **options: Any) -> dict:
    answer = http.post("/configure", json={"queue": queue, "options": options})
    assert answer.status_code == 200, answer.text
    return answer.json()


def push(http, *items: dict) -> httpx.Response:
    return http.post("/push", json={"items": list(items)})


# -- maxSize ------------------------------------------------------------------


def test_a_push_over_max_size_answers_failed_items_and_writes_nothing(http, unique):
    """Queen's capacity answer: each item of the full queue is ``failed``
    with the reason; another queue in the same call is pushed."""
    q, other = unique("cap"), unique("free")
    configure(http, q, maxSize=2)
    assert push(http, {"queue": q, "payload": 1, "transactionId": "a"}).status_code == 201
    answer = push(
        http,
        {"queue": q, "payload": 2, "transactionId": "b"},
        {"queue": other, "payload": 3, "transactionId": "c"},
        {"queue": q, "partition": "new", "payload": 4, "transactionId": "d"},
    )
    assert answer.status_code == 201
    body = answer.json()
    reason = f"Queue '{q}' would exceed max capacity (2). Current: 1, Batch: 2"
    assert body[0] == {
        "index": 0,
        "message_id": None,
        "transaction_id": "b",
        "queueName": q,
        "status": "failed",
        "offset": None,
        "error": reason,
    }
    assert body[2] == {**body[0], "index": 2, "transaction_id": "d"}
    assert (body[1]["status"], body[1]["queueName"], body[1]["offset"]) == ("queued", other, 0)
    detail = http.get(f"/resources/queues/{q}").json()
    assert [p["name"] for p in detail["partitions"]] == ["Default"]
    assert detail["totals"]["total"] == 1


def test_a_transaction_pushing_over_max_size_rolls_back(http, unique):
    q = unique("cap")
    configure(http, q, maxSize=1)
    push(http, {"queue": q, "payload": 1})
    answer = http.post("/transaction", json={"operations": [{"type": "push", "items": [{"queue": q, "payload": 2}]}]})
    assert answer.status_code == 200
    body = answer.json()
    assert {k: body[k] for k in ("success", "reason", "error", "results")} == {
        "success": False,
        "reason": "queue_full",
        "error": f"QFULL Queue '{q}' would exceed max capacity (1). Current: 1, Batch: 1; the transaction rolled back",
        "results": [],
    }
    assert http.get(f"/resources/queues/{q}/depth").json()["pending"] == 1


async def test_the_client_raises_on_a_push_over_max_size(queen, unique):
    q = unique("cap")
    await queen.queue(q).config({"max_size": 2}).create()
    await queen.queue(q).push([{"data": 1}, {"data": 2}])
    with pytest.raises(Exception, match=rf"Queue '{q}' would exceed max capacity \(2\)\. Current: 2, Batch: 1"):
        await queen.queue(q).push([{"data": 3}])
    failed: list[Any] = []

    async def on_error(items, error):
        failed.extend(items)

    await queen.queue(q).push([{"data": 4}]).on_error(on_error)
    assert [i["result"]["status"] for i in failed] == ["failed"]
    messages = await queen.queue(q).batch(10).wait(False).pop()
    assert [m["data"] for m in messages] == [1, 2]
    await queen.ack(messages, True)
    assert [r["status"] for r in await queen.queue(q).push([{"data": 5}, {"data": 6}])] == ["queued"] * 2


# -- priority and windowBuffer ------------------------------------------------


@pytest.mark.parametrize("bad", [1001, -1001, 2**31, 1.5, "5", True])
def test_priority_outside_its_range_or_not_an_integer_is_a_400(http, unique, bad):
    """A priority that is no integer, or outside -1000..1000, is refused and creates nothing."""
    q = unique("prio")
    answer = http.post("/configure", json={"queue": q, "options": {"priority": bad}})
    assert answer.status_code == 400
    message = PRIORITY_REFUSAL if type(bad) is int else "option priority must be an integer"
    assert answer.json() == {"error": message, "code": "bad_request"}
    assert http.get(f"/resources/queues/{q}").status_code == 404


def test_priority_is_echoed_by_configure_and_the_queue_reads(http, unique):
    """A stored priority comes back from configure, the queue detail and the queue list."""
    q = unique("prio")
    assert configure(http, q, priority=-3)["options"]["priority"] == -3
    assert http.get(f"/resources/queues/{q}").json()["options"]["priority"] == -3
    listed = [row for row in http.get("/resources/queues").json()["queues"] if row["name"] == q]
    assert [row["options"]["priority"] for row in listed] == [-3]


async def test_the_client_create_with_a_priority_echoes_it(queen, unique):
    """The official client's configure with priority 7 gets 7 back (its test_configure_queue)."""
    q = unique("prio")
    created = await queen.queue(q).config({"priority": 7}).create()
    assert (created["configured"], created["options"]["priority"]) == (True, 7)


def test_window_buffer_holds_a_partition_that_was_just_pushed_to(http, unique):
    """A pop inside the quiet window answers 204; without the window it delivers."""
    held, free = unique("window"), unique("nowindow")
    configure(http, held, windowBuffer=60)
    configure(http, free, windowBuffer=0)
    push(http, {"queue": held, "payload": 1}, {"queue": free, "payload": 1})
    assert http.get(f"/pop/queue/{held}", params={"wait": "false"}).status_code == 204
    assert http.get(f"/pop/queue/{free}", params={"wait": "false"}).status_code == 200
    assert http.get(f"/resources/queues/{held}/depth").json()["ready"] == 1


# -- the retention loop in serve --------------------------------------------------


async def test_the_retention_loop_of_serve_deletes_old_messages():
    """A live ``serve`` (loop every 0.2 s) deletes messages older than a 1 s
    retentionSeconds: the queue ends with no message, no pending count and
    no retained bytes; a queue without a retention window keeps its own."""
    from queen import Queen

    with run_server(extra_env={"QUEENADMIN_RETENTION_INTERVAL_SECONDS": "0.2"}) as server:
        client = Queen(url=server.url, bearer_token=server.token, retry_attempts=1)
        try:
            await client.queue("short").config({"retention_enabled": True, "retention_seconds": 1}).create()
            await client.queue("kept").create()
            await client.queue("short").push([{"data": {"n": i}} for i in range(5)])
            await client.queue("kept").push([{"data": {"n": i}} for i in range(5)])
            with httpx.Client(
                base_url=f"{server.url}/api/v1", headers={"Authorization": f"Bearer {server.token}"}
            ) as http:
                deadline = time.monotonic() + 60
                while (short := http.get("/resources/queues/short").json())["totals"]["total"]:
                    assert time.monotonic() < deadline, short
                    time.sleep(0.2)
                assert (short["totals"]["pending"], short["retainedBytes"]) == (0, 0)
                assert http.get("/resources/queues/short/depth").json()["pending"] == 0
                kept = http.get("/resources/queues/kept").json()
                assert (kept["totals"]["total"], kept["totals"]["pending"]) == (5, 5)
            assert await client.queue("short").wait(False).pop() == []
        finally:
            await client.close()
