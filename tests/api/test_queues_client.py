"""The official ``queen-mq`` client against a live server, end to end."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import httpx
import pytest

pytestmark = pytest.mark.live


async def test_push_pop_ack_round_trip(queen, unique):
    q = unique("cli")
    await queen.queue(q).create()
    pushed = await queen.queue(q).push([{"data": {"n": i}} for i in range(3)])
    assert [r["status"] for r in pushed] == ["queued"] * 3
    messages = await queen.queue(q).batch(10).wait(False).pop()
    assert [m["data"] for m in messages] == [{"n": 0}, {"n": 1}, {"n": 2}]
    result = await queen.ack(messages, True)
    assert result["success"] is True
    single = await queen.queue(q).push([{"data": "one"}])
    (message,) = await queen.queue(q).wait(False).pop()
    assert message["transactionId"] == single[0]["transaction_id"]
    assert (await queen.ack(message, True))["success"] is True
    assert await queen.queue(q).wait(False).pop() == []
    depth = await queen.admin.get_queue_depth(q)
    assert (depth["pending"], depth["processing"]) == (0, 0)


async def test_duplicate_push_is_reported_as_duplicate(queen, unique):
    q = unique("dup")
    seen = []

    async def on_duplicate(items, error):
        seen.extend(items)

    await queen.queue(q).push([{"data": 1, "transactionId": "same"}])
    await queen.queue(q).push([{"data": 2, "transactionId": "same"}]).on_duplicate(on_duplicate)
    assert [i["transactionId"] for i in seen] == ["same"]


async def test_consume_loop_with_handler_and_limit(queen, unique):
    q = unique("consume")
    await queen.queue(q).push([{"data": {"n": i}} for i in range(10)])
    handled = []

    async def handler(message):
        handled.append(message["data"]["n"])

    await asyncio.wait_for(queen.queue(q).batch(1).limit(10).timeout_millis(2000).consume(handler), 30)
    assert handled == list(range(10))
    depth = await queen.admin.get_queue_depth(q)
    assert depth["pending"] == 0


async def test_consume_in_batches_acks_the_whole_batch(queen, unique):
    q = unique("consume-batch")
    await queen.queue(q).push([{"data": i} for i in range(25)])
    batches = []

    async def handler(messages):
        batches.append([m["data"] for m in messages])

    await asyncio.wait_for(queen.queue(q).limit(25).timeout_millis(2000).consume(handler), 30)
    assert [n for batch in batches for n in batch] == list(range(25))
    assert (await queen.admin.get_queue_depth(q))["pending"] == 0


async def test_expired_lease_is_redelivered_and_the_old_ack_refused(queen, unique):
    q = unique("lease")
    await queen.queue(q).config({"lease_time": 1}).create()
    await queen.queue(q).push([{"data": "x"}])
    (first,) = await queen.queue(q).wait(False).pop()
    assert first["deliveryAttempt"] == 1
    assert await queen.queue(q).wait(False).pop() == []
    started = time.monotonic()
    (again,) = await queen.queue(q).wait(True).timeout_millis(5000).pop()
    # The waiting pop re-tried when the lease ran out, not at its timeout.
    assert time.monotonic() - started < 2.5
    assert (again["transactionId"], again["deliveryAttempt"]) == (first["transactionId"], 2)
    stale = await queen.ack(first, True)
    assert stale == {"success": False, "error": "invalid or expired lease"}
    assert (await queen.ack(again, True))["success"] is True


async def test_renew_extends_the_lease(clock_server, clock_queen, unique):
    queen = clock_queen
    q = unique("renew")
    await queen.queue(q).config({"lease_time": 2}).create()
    await queen.queue(q).push([{"data": "x"}])
    (message,) = await queen.queue(q).wait(False).pop()
    renewed = await queen.renew(message)
    assert renewed["success"] is True
    clock_server.shift(timedelta(seconds=2.2))
    # Renewed to 60 s, so the message is still leased.
    assert await queen.queue(q).wait(False).pop() == []
    assert (await queen.ack(message, True))["success"] is True
    gone = await queen.renew(message)
    assert gone["success"] is False


async def test_consumer_groups_have_their_own_cursors(queen, unique):
    q = unique("groups")
    await queen.queue(q).push([{"data": i} for i in range(3)])
    a = await queen.queue(q).group("a").subscription_mode("all").batch(10).wait(False).pop()
    b = await queen.queue(q).group("b").subscription_mode("all").batch(10).wait(False).pop()
    assert [m["data"] for m in a] == [m["data"] for m in b] == [0, 1, 2]
    assert {m["consumerGroup"] for m in a} == {"a"}
    assert (await queen.ack(a, True, {"group": "a"}))["success"] is True
    assert (await queen.admin.get_queue_depth(q, group="a"))["pending"] == 0
    assert (await queen.admin.get_queue_depth(q, group="b"))["pending"] == 3
    late = await queen.queue(q).group("late").subscription_mode("new").wait(False).pop()
    assert late == []
    await queen.queue(q).push([{"data": "fresh"}])
    assert [m["data"] for m in await queen.queue(q).group("late").wait(False).pop()] == ["fresh"]
    # A group that names no mode processes everything retained (Queen's default).
    everything = await queen.queue(q).group("default").batch(10).wait(False).pop()
    assert [m["data"] for m in everything] == [0, 1, 2, "fresh"]
    # Other spellings are read as Queen reads them, never refused.
    odd = await queen.queue(q).group("odd").subscription_mode("from_beginning").batch(10).wait(False).pop()
    assert len(odd) == 4


async def test_failed_messages_reach_the_dlq_after_retry_limit(queen, unique):
    q = unique("dlq")
    await queen.queue(q).config({"retry_limit": 2}).create()
    await queen.queue(q).push([{"data": "poison"}])
    attempts = []
    for _ in range(3):
        (message,) = await queen.queue(q).wait(False).pop()
        attempts.append(message["deliveryAttempt"])
        assert (await queen.ack(message, False, {"error": "handler blew up"}))["success"] is True
    assert attempts == [1, 2, 3]
    assert await queen.queue(q).wait(False).pop() == []
    dlq = await queen.queue(q).dlq().get()
    assert dlq["total"] == 1
    assert (dlq["messages"][0]["data"], dlq["messages"][0]["errorMessage"]) == ("poison", "handler blew up")


async def test_consume_handler_errors_nack_and_dead_letter(queen, unique):
    q = unique("nack")
    await queen.queue(q).config({"retry_limit": 1}).create()
    await queen.queue(q).push([{"data": "bad"}])
    calls = 0

    async def handler(message):
        nonlocal calls
        calls += 1
        raise RuntimeError("no")

    await asyncio.wait_for(queen.queue(q).batch(1).limit(2).timeout_millis(1000).consume(handler), 30)
    assert calls == 2
    assert (await queen.queue(q).dlq().get())["total"] == 1


async def test_long_poll_pop_wakes_on_push(queen, unique):
    q = unique("wake")

    async def push_later():
        await asyncio.sleep(0.5)
        await queen.queue(q).push([{"data": "now"}])
        return time.monotonic()

    pusher = asyncio.create_task(push_later())
    messages = await queen.queue(q).wait(True).timeout_millis(20000).pop()
    woke = time.monotonic()
    pushed_at = await pusher
    assert [m["data"] for m in messages] == ["now"]
    assert woke - pushed_at < 1.0


async def test_a_client_pops_through_a_pause_and_gets_the_messages_after_resume(queen, live_server, unique):
    """While the queue is paused the client's pops, plain, long-polling and
    in a consume loop, get nothing and raise nothing; once resumed the
    waiting consumer gets every message pushed meanwhile."""
    q = unique("paused")
    await queen.queue(q).create()
    headers = {"Authorization": f"Bearer {live_server.token}"}
    async with httpx.AsyncClient(base_url=f"{live_server.url}/api/v1", headers=headers, timeout=30) as http:
        assert (await http.post(f"/resources/queues/{q}/pause", json={"reason": "test"})).json()["paused"] is True
        await queen.queue(q).push([{"data": i} for i in range(3)])
        assert await queen.queue(q).batch(10).wait(False).pop() == []
        assert await queen.queue(q).group("g").batch(10).wait(True).timeout_millis(300).pop() == []
        handled: list[int] = []

        async def handler(message):
            handled.append(message["data"])

        async def consume() -> None:
            await queen.queue(q).batch(1).limit(3).timeout_millis(500).consume(handler)

        consumer = asyncio.create_task(consume())
        waiting = asyncio.create_task(queen.queue(q).group("g").batch(10).wait(True).timeout_millis(20000).pop())
        # Long enough for the consumer's empty long polls to come back at least once.
        await asyncio.sleep(1.0)
        assert handled == []
        assert not consumer.done()
        assert (await http.post(f"/resources/queues/{q}/resume")).json()["changed"] is True
        await asyncio.wait_for(consumer, 30)
        messages = await asyncio.wait_for(waiting, 30)
    assert handled == [0, 1, 2]
    assert [m["data"] for m in messages] == [0, 1, 2]


async def test_delete_queue(queen, unique):
    q = unique("del")
    await queen.queue(q).push([{"data": 1}])
    answer = await queen.queue(q).delete()
    assert answer == {"deleted": True, "existed": True, "queue": q}


async def test_delayed_processing_through_the_client(queen, unique):
    q = unique("delayed")
    await queen.queue(q).config({"delayedProcessing": 2}).create()
    await queen.queue(q).push([{"data": {"n": 1}}])
    assert await queen.queue(q).wait(False).pop() == []
    started = asyncio.get_running_loop().time()
    # A long-poll pop comes back when the delay ends, not at its timeout.
    (message,) = await queen.queue(q).wait(True).timeout_millis(10000).pop()
    waited = asyncio.get_running_loop().time() - started
    assert message["data"] == {"n": 1}
    assert 0.5 < waited < 5


async def test_each_consumer_gets_the_rest_of_a_batch_back_at_once_after_a_nack_that_dead_letters(queen, unique):
    """retryLimit 1 and .each(): message 2 fails twice and goes to the DLQ, and
    the loop still gets messages 3..5 at once instead of waiting out the lease."""
    q = unique("nack")
    await queen.queue(q).config({"retry_limit": 1, "lease_time": 300}).create()
    await queen.queue(q).push([{"data": i} for i in range(1, 6)])
    seen: list[int] = []
    failures = 0

    async def handler(message):
        nonlocal failures
        seen.append(message["data"])
        if message["data"] == 2:
            failures += 1
            raise RuntimeError("boom")

    started = time.monotonic()
    await queen.queue(q).batch(5).each().limit(6).consume(handler)
    assert seen == [1, 2, 2, 3, 4, 5]
    assert time.monotonic() - started < 30
    dead = await queen.queue(q).dlq().limit(10).get()
    assert [m["data"] for m in dead["messages"]] == [2]
