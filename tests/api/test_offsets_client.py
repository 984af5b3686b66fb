"""Offsets start at 0 (issue 27 G), as the official client sees them.

After three pushes to a partition: push answers 0, 1, 2 (a duplicate
carries its original), pops hand out 0, 1, 2, ``fetch`` reads records 0..2
with ``highWatermark`` 3, ``logStartOffset`` 0 and the client-computed
``nextOffset`` 3, and ``changed_since`` says ``lastOffset`` 0 after one
message and -1 for a partition with none. The DLQ and the operator reads
name the same offsets.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connections, transaction
from django.test import Client
from queen.reads.offset_reads import partitions_changed_since

from queenadmin.domain import clock, queues, tokens


@pytest.mark.live
async def test_a_partition_numbers_its_messages_from_0(queen, unique):
    q = unique("zero")
    pushed = await queen.queue(q).partition("p").push([{"data": {"n": i}, "transactionId": f"t{i}"} for i in range(3)])
    assert [r["offset"] for r in pushed] == [0, 1, 2]
    (again,) = await queen.queue(q).partition("p").push([{"data": "dup", "transactionId": "t0"}])
    assert (again["status"], again["offset"], again["message_id"]) == ("duplicate", 0, pushed[0]["message_id"])

    read = (await queen.queue(q).fetch("p"))["p"]
    assert [r["offset"] for r in read["records"]] == [0, 1, 2]
    assert [r["transactionId"] for r in read["records"]] == ["t0", "t1", "t2"]
    assert (read["highWatermark"], read["logStartOffset"], read["nextOffset"]) == (3, 0, 3)
    # From the next offset on: nothing new yet, and that is no error.
    later = (await queen.queue(q).fetch("p", offsets={"p": read["nextOffset"]}))["p"]
    assert (later["records"], later["highWatermark"], later["nextOffset"]) == ([], 3, 3)
    from_one = (await queen.queue(q).fetch("p", offsets={"p": 1}))["p"]
    assert [r["offset"] for r in from_one["records"]] == [1, 2]

    await queen.queue(q).partition("one").push([{"data": "only"}])
    changed = {p["name"]: p for p in (await queen.queue(q).changed_since())["partitions"]}
    assert (changed["one"]["lastOffset"], changed["one"]["logStart"]) == (0, 0)
    assert (changed["p"]["lastOffset"], changed["p"]["logStart"]) == (2, 0)

    messages = await queen.queue(q).partition("p").group("g").batch(10).wait(False).pop()
    assert [(m["offset"], m["deliveryAttempt"]) for m in messages] == [(0, 1), (1, 1), (2, 1)]
    await queen.ack(messages[0], True, {"group": "g"})
    await queen.ack(messages[1], "dlq", {"group": "g"})
    dead = (await queen.queue(q).dlq().limit(10).get())["messages"]
    assert [(d["transactionId"], d["offset"]) for d in dead] == [("t1", 1)]

    detail = await queen.admin.get_consumer_group("g")
    (part,) = [p for p in detail[q]["partitions"] if p["partition"] == "p"]
    # Offsets 0 and 1 are done (acked, dead-lettered); 2 is left.
    assert part["offsetLag"] == 1
    listed = await queen.admin.list_messages(queue=q, partition="p")
    assert sorted(m["offset"] for m in listed["messages"]) == [0, 1, 2]


async def _in_a_thread(work: Callable[..., Any], *args: Any) -> Any:
    """``work(*args)`` in a worker thread (Django refuses database work where an
    event loop runs), closing that thread's connection after: the test
    database is dropped at the end and must have no session left."""

    def run() -> Any:
        try:
            return work(*args)
        finally:
            connections.close_all()

    return await asyncio.to_thread(run)


class _DjangoHttp:
    """What the official client's reads call on its HTTP client, over Django's test client."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def post(self, path: str, body: Any, *_: Any) -> Any:
        answer = await _in_a_thread(self.client.post, path, json.dumps(body), "application/json")
        assert answer.status_code == 200, answer.content
        return answer.json()


def _a_full_and_an_empty_partition() -> str:
    """Queue ``z``: partition ``full`` holds one message; ``empty`` none, made
    by a timer out of attempts (its dead letter never reached the log)."""
    queues.queue_push(items=[queues.PushItem("z", "full", '"x"')])
    with transaction.atomic():
        queues.queue_dead_letter_in_txn(
            queue="z",
            partition="empty",
            group="__timer__",
            transaction_id="timer-1",
            message_id=queues.uuid7(),
            payload_json="{}",
            error="gave up",
            retry_count=5,
            now=clock.now(),
        )
    return tokens.token_create(by=tokens.HOST, name="offsets")


@pytest.mark.django_db(transaction=True)
async def test_a_partition_with_no_message_has_last_offset_minus_1():
    """``changed_since`` answers a partition with no message with ``lastOffset``
    -1 (Queen's empty partition), the other with its last offset."""
    token = await _in_a_thread(_a_full_and_an_empty_partition)
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    changed = await partitions_changed_since(_DjangoHttp(client), "z")
    assert {p["name"]: (p["lastOffset"], p["logStart"]) for p in changed["partitions"]} == {
        "full": (0, 0),
        "empty": (-1, 0),
    }
