"""The official ``queen-mq`` client's timers against a live server, end to end."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest

pytestmark = pytest.mark.live


async def _pop_one(queen, queue: str, seconds: float = 10.0) -> list:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got = await queen.queue(queue).batch(10).wait(True).timeout_millis(1000).pop()
        if got:
            return got
    return []


async def test_schedule_fires_into_its_queue_and_pops_as_json(queen, unique):
    q = unique("tm")
    scheduled = await queen.timers.schedule(q, "order:1:expire", {"orderId": 1}, delay_ms=300, partition="order-1")
    assert scheduled["ok"] is True
    assert scheduled["status"] == "scheduled"
    started = time.monotonic()
    (message,) = await _pop_one(queen, q)
    assert time.monotonic() - started >= 0.2
    assert message["data"] == {"orderId": 1}
    assert message["transactionId"] == scheduled["txn"]
    assert message["id"] == scheduled["messageId"]
    assert message["partition"] == "order-1"
    assert (await queen.timers.peek(q, "order:1:expire"))["found"] is False


async def test_reschedule_cancel_peek_list_count(queen, unique):
    q = unique("tm")
    first = await queen.timers.schedule(q, "a/b", {"n": 1}, delay=timedelta(hours=1))
    moved = await queen.timers.reschedule(q, "a/b", {"n": 2}, delay=timedelta(hours=2))
    assert (first["status"], moved["status"]) == ("scheduled", "rescheduled")
    peek = await queen.timers.peek(q, "a/b")
    assert peek["found"] is True
    assert peek["txn"] == moved["txn"]
    for i in range(3):
        await queen.timers.schedule(q, f"k{i}", i, delay_ms=3_600_000)
    page = await queen.timers.list(q, limit=2)
    assert [r["timerKey"] for r in page["rows"]] == ["a/b", "k0"]
    assert page["truncated"] is True
    assert [r["timerKey"] for r in await queen.timers.list_all(q, limit=2)] == ["a/b", "k0", "k1", "k2"]
    cancelled = await queen.timers.cancel(q, "a/b", txn=moved["txn"])
    assert (cancelled["ok"], cancelled["status"], cancelled["txn"]) == (True, "cancelled", moved["txn"])
    absent = await queen.timers.cancel(q, "a/b", txn=moved["txn"])
    assert not absent
    assert (absent["status"], absent["txn"]) == ("absent", moved["txn"])
    batch = await queen.timers.batch(
        [queen.timers.op.cancel(q, "k0"), queen.timers.op.schedule(q, "k9", "x", delay_ms=3_600_000)]
    )
    assert [r["status"] for r in batch] == ["cancelled", "scheduled"]
    remaining = await queen.timers.list_all(q)
    assert [r["timerKey"] for r in remaining] == ["k1", "k2", "k9"]


async def test_builder_schedules_and_a_cancelled_timer_never_fires(queen, unique):
    q = unique("tm")
    await queen.timer(q).key("gone").payload({"x": 1}).after_ms(400).schedule()
    await queen.timer(q).key("stays").payload({"x": 2}).after_ms(400).schedule()
    await queen.timers.cancel(q, "gone")
    (message,) = await _pop_one(queen, q)
    assert message["data"] == {"x": 2}
    await asyncio.sleep(0.5)
    assert await queen.queue(q).wait(False).pop() == []
