"""The official ``queen-mq`` client's ``queen.transaction()`` against a live
server, end to end: acks and pushes, ``guard(lock)`` (including the
client's resend after its own renewal), ``once``, the KV rider, timers,
and the rollbacks it returns or raises."""

from __future__ import annotations

import time
from typing import Any

import pytest

pytestmark = pytest.mark.live

TXN_PATH = "/api/v1/transaction"


async def _pop_one(queen, queue: str, seconds: float = 10.0) -> list:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got = await queen.queue(queue).batch(10).wait(True).timeout_millis(1000).pop()
        if got:
            return got
    return []


def _record_transactions(queen, before_send: Any = None) -> list[dict[str, Any]]:
    """Record each transaction body the client sends; ``before_send`` (an
    async callable) runs before the first one goes out, after it was built."""
    http = queen._http_client
    real_post = http.post
    sent: list[dict[str, Any]] = []

    async def post(path: str, body: Any = None, *args: Any, **kwargs: Any) -> Any:
        if path == TXN_PATH:
            sent.append(body)
            if before_send is not None and len(sent) == 1:
                await before_send()
        return await real_post(path, body, *args, **kwargs)

    http.post = post
    return sent


async def test_ack_and_push_commit_together(queen, unique):
    """The input's ack and the output's push are one commit: the output pops
    and the input is no longer pending."""
    q_in, q_out = unique("txin"), unique("txout")
    await queen.queue(q_in).push([{"data": {"order": 1}}])
    (message,) = await queen.queue(q_in).wait(False).pop()
    result = await (
        queen.transaction()
        .ack(message)
        .queue(q_out)
        .partition("c-1")
        .push([{"data": {"done": 1}, "transactionId": "out-1"}])
        .commit()
    )
    assert result["success"] is True
    assert [(r["index"], r["type"], r["success"]) for r in result["results"]] == [(0, "ack", True), (1, "push", True)]
    assert result["results"][0]["transactionId"] == message["transactionId"]
    assert (result["results"][1]["transactionId"], result["results"][1]["queueName"]) == ("out-1", q_out)
    (out,) = await queen.queue(q_out).wait(False).pop()
    assert (out["data"], out["transactionId"], out["partition"]) == ({"done": 1}, "out-1", "c-1")
    assert out["id"] == result["results"][1]["messageId"]
    depth = await queen.admin.get_queue_depth(q_in)
    assert (depth["pending"], depth["processing"]) == (0, 0)


async def test_a_guarded_commit_lands_while_the_lock_is_held(queen, unique):
    """``guard(lock)`` sends the permit's required check first in the KV
    rider, at the current token; it holds, so the push commits."""
    name, q = unique("tx-guard"), unique("txg")
    lock = queen.lock(name, ttl_seconds=30)
    assert await lock.acquire()
    token = lock.token
    sent = _record_transactions(queen)
    try:
        result = await queen.transaction().guard(lock).queue(q).push([{"data": "report"}]).commit()
    finally:
        await lock.release()
    assert result["success"] is True
    assert sent[0]["kv"] == [
        {"op": "check", "ns": "queen-locks", "key": f"{name}#0", "expect": token, "required": True}
    ]
    push, guard = result["results"]
    assert push["type"] == "push"
    assert (guard["index"], guard["type"], guard["opIndex"], guard["op"], guard["applied"]) == (
        1,
        "kv",
        0,
        "check",
        True,
    )
    (message,) = await queen.queue(q).wait(False).pop()
    assert message["data"] == "report"


async def test_a_guard_lost_to_another_holder_returns_the_rollback(queen, unique):
    """Once another holder has the lock, the old handle's guarded commit is
    returned (not raised) as ``kv_precondition`` naming the new holder, the
    handle reports the lock lost, and nothing of the bundle is visible."""
    name, q, ns = unique("tx-taken"), unique("txt"), unique("txt-ns")
    old = queen.lock(name, ttl_seconds=30)
    assert await old.acquire()
    # The permit ends behind the handle's back (as a lapsed lease does), and
    # another holder takes it; the handle still believes it holds.
    assert (await queen.locks.release(name, token=old.token))["released"] is True
    new = queen.lock(name, ttl_seconds=30)
    assert await new.acquire()
    assert old.held
    result = await (
        queen.transaction()
        .guard(old)
        .queue(q)
        .push([{"data": 1}, {"data": 2}])
        .kv.put(ns, "state", {"n": 1}, forever=True)
        .commit()
    )
    assert not result
    assert (result["success"], result["reason"], result["results"]) == (False, "kv_precondition", [])
    assert result["error"] == "QKV a required KV precondition failed; the transaction rolled back"
    # Flat index: two pushed items, then the guard (kv op 0).
    assert (result["ok"], result["failedIndex"], result["kvReason"]) == (False, 2, "version")
    assert (result["version"], result["value"]["owner"]) == (new.token, new.owner)
    assert old.lost.is_set()
    assert not old.held
    assert await queen.queue(q).wait(False).pop() == []
    assert (await queen.kv.get(ns, "state"))["found"] is False
    committed = await queen.transaction().guard(new).queue(q).push([{"data": 3}]).commit()
    assert committed["success"] is True
    await new.release()


async def test_a_guard_lost_only_to_the_handles_own_renewal_is_sent_again(queen, unique):
    """The handle renews between the moment the body is built and the moment
    it is judged: the guard fails with ``version`` and this owner's value,
    the client sends the bundle again with the new token, and it commits
    once."""
    name, q = unique("tx-renew"), unique("txr")
    lock = queen.lock(name, ttl_seconds=30)
    assert await lock.acquire()
    first_token = lock.token

    async def renew_now() -> None:
        assert await lock.renew()

    sent = _record_transactions(queen, before_send=renew_now)
    try:
        result = (
            await queen.transaction().guard(lock).queue(q).push([{"data": "once", "transactionId": "r-1"}]).commit()
        )
        assert result["success"] is True
        assert [body["kv"][0]["expect"] for body in sent] == [first_token, lock.token]
        assert lock.token > first_token
        assert not lock.lost.is_set()
    finally:
        await lock.release()
    (message,) = await queen.queue(q).batch(10).wait(False).pop()
    assert message["data"] == "once"


async def test_once_lets_the_first_commit_through_and_rolls_back_the_second(queen, unique):
    """``once(ns, key)`` is a required putIfAbsent: the first bundle commits,
    the second with the same key returns ``kv_precondition`` (``exists``)
    and pushes nothing."""
    ns, q = unique("tx-once"), unique("txo")

    def bundle(n: int):
        return queen.transaction().once(ns, "evt:1", ttl_seconds=3600).queue(q).push([{"data": n}])

    first = await bundle(1).commit()
    assert first["success"] is True
    assert [(r["index"], r["type"]) for r in first["results"]] == [(0, "push"), (1, "kv")]
    assert (first["results"][1]["opIndex"], first["results"][1]["applied"]) == (0, True)
    second = await bundle(2).commit()
    assert (second["success"], second["reason"], second["failedIndex"], second["kvReason"]) == (
        False,
        "kv_precondition",
        1,
        "exists",
    )
    assert second["value"] is True
    messages = await queen.queue(q).batch(10).wait(False).pop()
    assert [m["data"] for m in messages] == [1]


async def test_kv_rider_results(queen, unique):
    """``tx.kv.put``, ``incr`` and ``check`` answer in the flat index space
    after the operations, each with its ``opIndex``; the writes are visible
    after the commit."""
    ns, q = unique("tx-kv"), unique("txk")
    before = await queen.kv.put(ns, "seen", "x", forever=True)
    other = await queen.kv.put(ns, "other", "y", forever=True)
    result = await (
        queen.transaction()
        .queue(q)
        .push([{"data": 1}])
        .kv.put(ns, "state", {"step": 2}, ttl_seconds=600)
        .kv.incr(ns, "count", delta=5, forever=True)
        .kv.check(ns, "seen", expect=before["version"])
        .kv.check(ns, "other", expect=other["version"] + 1000)
        .commit()
    )
    assert result["success"] is True
    push, put, incr, held, missed = result["results"]
    assert push["type"] == "push"
    assert [(r["index"], r["type"], r["opIndex"], r["op"]) for r in (put, incr, held, missed)] == [
        (1, "kv", 0, "put"),
        (2, "kv", 1, "incr"),
        (3, "kv", 2, "check"),
        (4, "kv", 3, "check"),
    ]
    assert (put["applied"], put["value"]) == (True, {"step": 2})
    assert (incr["applied"], incr["value"]) == (True, 5)
    assert (held["applied"], held["version"]) == (True, before["version"])
    # A check that is not required is only a look: it does not apply, the
    # bundle commits anyway.
    assert (missed["applied"], missed["reason"], missed["version"]) == (False, "version", other["version"])
    state = await queen.kv.get(ns, "state")
    assert (state["value"], state["version"]) == ({"step": 2}, put["version"])
    assert (await queen.kv.get(ns, "count"))["value"] == 5


async def test_a_kv_get_in_a_transaction_sees_an_earlier_write_of_its_key_only(queen, unique):
    """Issue 27: the kv part of a transaction reads by the same rule as a
    ``kv.batch``: a get after the write of its key sees it, one before it
    does not, and the getMany sees it wherever it stands."""
    ns = unique("tx-order")
    before = await queen.kv.put(ns, "k", "before", forever=True)
    result = await (
        queen.transaction()
        .kv.get_many(ns, ["k"])
        .kv.get(ns, "k")
        .kv.put(ns, "k", "after", forever=True)
        .kv.get(ns, "k")
        .commit()
    )
    assert result["success"] is True
    many, first, put, got = result["results"]
    later = await queen.kv.get(ns, "k")
    assert (put["applied"], put["version"]) == (True, later["version"])
    assert (first["value"], first["version"]) == ("before", before["version"])
    assert (got["found"], got["value"], got["version"], got["updatedAt"]) == (
        True,
        "after",
        later["version"],
        later["updatedAt"],
    )
    assert [(r["value"], r["version"]) for r in many["rows"]] == [("after", later["version"])]


async def test_a_timer_scheduled_in_a_transaction_fires_later(queen, unique):
    """``tx.timer(q).key().payload().after_ms().schedule()`` commits with
    the bundle and its message arrives once the delay has passed."""
    q, ns = unique("txtm"), unique("txtm-ns")
    started = time.monotonic()
    result = await (
        queen.transaction()
        .kv.put(ns, "order:1", {"state": "placed"}, forever=True)
        .timer(q)
        .key("order:1:remind")
        .partition("order-1")
        .payload({"remind": 1})
        .after_ms(300)
        .schedule()
        .commit()
    )
    assert result["success"] is True
    kv_result, timer = result["results"]
    assert (kv_result["type"], timer["index"], timer["type"], timer["opIndex"]) == ("kv", 1, "timer", 0)
    assert (timer["status"], timer["timerKey"]) == ("scheduled", "order:1:remind")
    (message,) = await _pop_one(queen, q)
    assert time.monotonic() - started >= 0.25
    assert (message["data"], message["partition"]) == ({"remind": 1}, "order-1")
    assert (message["id"], message["transactionId"]) == (timer["messageId"], timer["txn"])


async def test_a_push_already_in_the_log_raises_and_leaves_nothing(queen, unique):
    """A pushed transactionId already in its partition rolls the bundle back
    as ``duplicate``, which the client raises; the ack, the other push, the
    KV write and the timer are all absent afterwards."""
    q_in, q_out, ns = unique("txdin"), unique("txdout"), unique("txd-ns")
    await queen.queue(q_out).push([{"data": "original", "transactionId": "dup-1"}])
    await queen.queue(q_in).push([{"data": "input"}])
    (message,) = await queen.queue(q_in).wait(False).pop()
    bundle = (
        queen.transaction()
        .ack(message)
        .queue(q_out)
        .push([{"data": "fresh", "transactionId": "fresh-1"}, {"data": "again", "transactionId": "dup-1"}])
        .kv.put(ns, "state", 1, forever=True)
        .timer(q_out)
        .key("t-1")
        .payload("later")
        .after_ms(60_000)
        .schedule()
    )
    with pytest.raises(Exception, match=r"^QDUP a pushed message to .+/Default is a duplicate"):
        await bundle.commit()
    out = await queen.queue(q_out).batch(10).wait(False).pop()
    assert [m["data"] for m in out] == ["original"]
    depth = await queen.admin.get_queue_depth(q_in)
    assert (depth["pending"], depth["processing"]) == (1, 1)
    assert (await queen.kv.get(ns, "state"))["found"] is False
    assert (await queen.timers.peek(q_out, "t-1"))["found"] is False
    # The input is still leased to this consumer: its plain ack lands.
    assert (await queen.ack(message, True))["success"] is True


async def test_a_resent_bundle_is_fenced_by_its_ack(queen, unique):
    """Sending a committed bundle of a fenced ack and a KV increment again
    rolls back as ``rejected_ack`` (the client raises): its lease is gone,
    so the counter counts the step once (protocol 5.1, 5.4)."""
    q_in, ns = unique("txrin"), unique("txr-ns")
    await queen.queue(q_in).push([{"data": "input"}])
    (message,) = await queen.queue(q_in).wait(False).pop()

    def bundle():
        return queen.transaction().ack(message).kv.incr(ns, "processed", forever=True)

    assert (await bundle().commit())["success"] is True
    with pytest.raises(Exception, match=r"^QTXN the ack of "):
        await bundle().commit()
    assert (await queen.kv.get(ns, "processed"))["value"] == 1
