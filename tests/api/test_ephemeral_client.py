"""Ephemeral queues (``client.ephemeral``) against a live server (issue 27 B).

Every verb of the official client, the exact wire answers, each bad
input's 400, the bounds, leases and retry limit (on the clock server, so
no test waits a lease out), fan-out and competing groups, reset fencing
old ids, and on PostgreSQL: UNLOGGED contents, two servers sharing a queue.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import httpx
import psycopg
import pytest
from queen import Queen
from queen.errors import EphemeralError, EphemeralQueueNotFoundError

from tests.conftest import IS_POSTGRES, run_server

pytestmark = pytest.mark.live


def http(server) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {server.token}"}, timeout=30)


async def test_configure_push_pop_ack_depth_queues_reset_delete(queen, unique):
    """Every verb once, with its exact answer."""
    q = unique("eph")
    eph = queen.ephemeral
    configured = await eph.configure(q, max_length=5, policy="dropOldest", lease_seconds=60)
    assert configured["queue"] == q
    assert configured["options"] == {"maxLength": 5, "policy": "dropOldest", "leaseSeconds": 60}
    assert configured["updatedAt"].endswith("Z")
    assert await eph.push(q, [{"n": 1}, {"payload": [1, "two"]}, "three"]) == {"pushed": 3}
    popped = await eph.pop(q, batch=10)
    assert popped["queue"] == q
    assert [m["payload"] for m in popped["messages"]] == [{"n": 1}, [1, "two"], "three"]
    assert [(m["partition"], m["attempts"]) for m in popped["messages"]] == [("Default", 1)] * 3
    assert all(m["id"].startswith("e:") for m in popped["messages"])
    acked = await eph.ack(q, popped["messages"])
    assert acked == {"results": [{"id": m["id"], "outcome": "acked"} for m in popped["messages"]]}
    again = await eph.ack(q, popped["messages"][0])
    assert again["results"][0]["outcome"] == "unknown"
    assert (await eph.pop(q))["messages"] == []
    await eph.push(q, [{"k": i} for i in range(2)], partition="p1")
    depth = await eph.depth(q)
    assert depth == {
        "queue": q,
        "group": None,
        "tier": "declared",
        "pending": 2,
        "partitionsPending": 1,
        "bytes": len('{"k":0}') * 2,
        "partitions": [
            {"partition": "Default", "pending": 0, "bytes": 0},
            {"partition": "p1", "pending": 2, "bytes": 14},
        ],
        "groups": [{"group": "__QUEUE_MODE__", "pending": 2, "skipped": 0}],
    }
    listed = [row for row in (await eph.queues())["queues"] if row["queue"] == q]
    assert listed == [
        {
            "queue": q,
            "tier": "declared",
            "depth": 2,
            "bytes": 14,
            "partitions": 2,
            "groups": 1,
            "drops": {"bounds": 0, "ttl": 0, "retry": 0},
            "options": {
                "maxBytes": 16 * 1024 * 1024,
                "maxLength": 5,
                "policy": "dropOldest",
                "ttlSeconds": 0,
                "leaseSeconds": 60,
                "retryLimit": 5,
                "windowBuffer": {"ms": 0, "count": 0},
            },
        }
    ]
    assert await eph.reset(q) == {"queue": q, "dropped": 2}
    assert await eph.delete(q) == {"queue": q, "deleted": True, "declared": True}
    assert await eph.delete(q) == {"queue": q, "deleted": False, "declared": False}
    assert await eph.reset(q) == {"queue": q, "dropped": 0}
    with pytest.raises(EphemeralQueueNotFoundError):
        await eph.depth(q)


async def test_implicit_queue_and_options_are_clamped(queen, unique):
    """A push makes an implicit queue; declared options beyond the caps read clamped."""
    q = unique("implicit")
    await queen.ephemeral.push(q, {"a": 1}, partition="x")
    (row,) = [r for r in (await queen.ephemeral.queues())["queues"] if r["queue"] == q]
    assert (row["tier"], row["depth"], row["partitions"]) == ("implicit", 1, 1)
    big = unique("clamp")
    await queen.ephemeral.configure(big, max_bytes=2**40, max_length=10**9, lease_seconds=0, retry_limit=10**6)
    (row,) = [r for r in (await queen.ephemeral.queues())["queues"] if r["queue"] == big]
    assert row["options"]["maxBytes"] == 16 * 1024 * 1024
    assert row["options"]["maxLength"] == 10_000
    assert row["options"]["leaseSeconds"] == 1
    assert row["options"]["retryLimit"] == 1000


BAD = [
    ("post", "/api/v1/ephemeral/configure", {"queue": "q", "options": {"bogus": 1}}),
    ("post", "/api/v1/ephemeral/configure", {"queue": "q", "options": {"policy": "dropNewest"}}),
    ("post", "/api/v1/ephemeral/configure", {"queue": "q", "options": {"maxLength": -1}}),
    ("post", "/api/v1/ephemeral/configure", {"queue": "q", "options": {"ttlSeconds": 1.5}}),
    ("post", "/api/v1/ephemeral/configure", {"queue": "q", "options": {"windowBuffer": 5}}),
    ("post", "/api/v1/ephemeral/configure", {"queue": "", "options": {}}),
    ("post", "/api/v1/ephemeral/configure", {"queue": "a\nb"}),
    ("post", "/api/v1/ephemeral/configure", {"queue": "x" * 513}),
    ("post", "/api/v1/ephemeral/push", {"queue": "q", "messages": []}),
    ("post", "/api/v1/ephemeral/push", {"queue": "q", "messages": [{"data": 1}]}),
    ("post", "/api/v1/ephemeral/push", {"queue": "q", "messages": [{"payload": 1}] * 10_001}),
    ("post", "/api/v1/ephemeral/push", [1, 2]),
    ("post", "/api/v1/ephemeral/ack", {"queue": "q", "acks": [{"status": "completed"}]}),
    ("post", "/api/v1/ephemeral/ack", {"queue": "q"}),
    ("post", "/api/v1/ephemeral/reset", {}),
    ("get", "/api/v1/ephemeral/pop?queue=q&batch=0", None),
    ("get", "/api/v1/ephemeral/pop?queue=q&batch=10001", None),
    ("get", "/api/v1/ephemeral/pop?queue=q&timeout=300001&wait=true", None),
    ("get", "/api/v1/ephemeral/pop?queue=q&wait=maybe", None),
    ("get", "/api/v1/ephemeral/pop", None),
]


@pytest.mark.parametrize(("method", "path", "body"), BAD)
def test_bad_input_is_400_ephemeral_bad_request(live_server, method, path, body):
    """Each malformed request answers 400 ``{error, code: ephemeral_bad_request}``."""
    with http(live_server) as client:
        answer = client.request(method.upper(), path, json=body) if body is not None else client.get(path)
    assert answer.status_code == 400, answer.text
    assert answer.json()["code"] == "ephemeral_bad_request"
    assert isinstance(answer.json()["error"], str)


def test_not_json_is_400_and_depth_of_unknown_is_404(live_server, unique):
    with http(live_server) as client:
        answer = client.post("/api/v1/ephemeral/push", content=b"{nope", headers={"Content-Type": "application/json"})
        assert (answer.status_code, answer.json()["code"]) == (400, "ephemeral_bad_request")
        answer = client.get(f"/api/v1/ephemeral/queues/{unique('none')}/depth")
        assert (answer.status_code, answer.json()["code"]) == (404, "ephemeral_queue_not_found")


async def test_reject_policy_refuses_with_429_and_storage_does_not_grow(live_server, unique):
    """A queue at its maxBytes refuses (429 queue_full); its bytes stay put."""
    q = unique("full")
    client = Queen(url=live_server.url, bearer_token=live_server.token, retry_attempts=1, retry_429={"max_attempts": 1})
    try:
        await client.ephemeral.configure(q, max_bytes=100)
        await client.ephemeral.push(q, [{"payload": "x" * 40}, {"payload": "y" * 40}])
        before = await client.ephemeral.depth(q)
        for _ in range(3):
            with pytest.raises(EphemeralError) as refused:
                await client.ephemeral.push(q, {"payload": "z" * 40})
            assert refused.value.code == "queue_full"
        after = await client.ephemeral.depth(q)
        assert (after["pending"], after["bytes"]) == (before["pending"], before["bytes"]) == (2, 84)
    finally:
        await client.close()
    with http(live_server) as raw:
        answer = raw.post("/api/v1/ephemeral/push", json={"queue": q, "messages": [{"payload": "z" * 40}]})
        assert answer.status_code == 429
        assert answer.json() == {"error": answer.json()["error"], "code": "queue_full"}


async def test_drop_oldest_keeps_the_newest_and_counts_drops(queen, unique):
    q = unique("feed")
    await queen.ephemeral.configure(q, max_length=3, policy="dropOldest")
    for i in range(5):
        await queen.ephemeral.push(q, {"n": i})
    popped = await queen.ephemeral.pop(q, batch=10, auto_ack=True)
    assert [m["payload"]["n"] for m in popped["messages"]] == [2, 3, 4]
    (row,) = [r for r in (await queen.ephemeral.queues())["queues"] if r["queue"] == q]
    assert row["drops"] == {"bounds": 2, "ttl": 0, "retry": 0}
    assert row["depth"] == 0


async def test_fan_out_and_competing_consumers(queen, unique):
    """Each group gets every message; members of one group share them."""
    q = unique("fan")
    # Both subscribers are known before the messages come.
    for group in ("a", "b"):
        assert (await queen.ephemeral.pop(q, group=group))["messages"] == []
    await queen.ephemeral.push(q, [{"n": i} for i in range(6)])
    a = await queen.ephemeral.pop(q, group="a", batch=10, auto_ack=True)
    b = await queen.ephemeral.pop(q, group="b", batch=10, auto_ack=True)
    assert [m["payload"]["n"] for m in a["messages"]] == [m["payload"]["n"] for m in b["messages"]] == list(range(6))
    await queen.ephemeral.push(q, [{"n": i} for i in range(6, 12)])
    first, second = await asyncio.gather(
        queen.ephemeral.pop(q, group="w", batch=3), queen.ephemeral.pop(q, group="w", batch=3)
    )
    got = [m["payload"]["n"] for m in first["messages"] + second["messages"]]
    assert sorted(got) == list(range(6, 12))
    assert len(set(got)) == 6


async def test_fifo_per_partition_and_partitions_in_name_order(queen, unique):
    q = unique("fifo")
    await queen.ephemeral.push(q, [{"n": i} for i in range(3)], partition="b")
    await queen.ephemeral.push(q, [{"n": i} for i in range(3)], partition="a")
    popped = await queen.ephemeral.pop(q, batch=10, auto_ack=True)
    assert [(m["partition"], m["payload"]["n"]) for m in popped["messages"]] == [
        ("a", 0),
        ("a", 1),
        ("a", 2),
        ("b", 0),
        ("b", 1),
        ("b", 2),
    ]


async def test_lease_expiry_redelivers_then_retry_limit_drops(clock_server, unique):
    """An unacked message returns with attempts+1 after its lease, and is
    dropped for the group (drops.retry, skipped) at retryLimit."""
    q = unique("lease")
    client = Queen(url=clock_server.url, bearer_token=clock_server.token, retry_attempts=1)
    try:
        eph = client.ephemeral
        await eph.configure(q, lease_seconds=10, retry_limit=2)
        await eph.push(q, {"job": 1})
        (first,) = (await eph.pop(q, group="g"))["messages"]
        assert first["attempts"] == 1
        assert (await eph.pop(q, group="g"))["messages"] == []
        clock_server.shift(timedelta(seconds=11))
        (second,) = (await eph.pop(q, group="g"))["messages"]
        assert (second["id"], second["attempts"]) == (first["id"], 2)
        clock_server.shift(timedelta(seconds=11))
        assert (await eph.pop(q, group="g"))["messages"] == []
        depth = await eph.depth(q)
        assert depth["groups"] == [{"group": "g", "pending": 0, "skipped": 1}]
        assert depth["pending"] == 0
        (row,) = [r for r in (await eph.queues())["queues"] if r["queue"] == q]
        assert row["drops"]["retry"] == 1
        assert (await eph.ack(q, first, group="g"))["results"][0]["outcome"] == "unknown"
    finally:
        await client.close()


async def test_failed_ack_redelivers_and_reset_makes_ids_stale(queen, unique):
    q = unique("stale")
    eph = queen.ephemeral
    await eph.push(q, [{"n": 1}, {"n": 2}])
    m1, m2 = (await eph.pop(q, batch=2, group="g"))["messages"]
    answer = await eph.ack(q, [{"id": m1["id"], "status": "retry"}], group="g")
    assert answer["results"] == [{"id": m1["id"], "outcome": "redelivered"}]
    (again,) = (await eph.pop(q, group="g"))["messages"]
    assert (again["id"], again["attempts"]) == (m1["id"], 2)
    assert await eph.reset(q) == {"queue": q, "dropped": 2}
    answer = await eph.ack(q, [again, m2, "not-an-id"], group="g")
    assert [r["outcome"] for r in answer["results"]] == ["stale", "stale", "unknown"]
    await eph.push(q, {"n": 3})
    (fresh,) = (await eph.pop(q, group="g"))["messages"]
    assert fresh["payload"] == {"n": 3}
    assert fresh["id"] != m1["id"]


async def test_wait_pop_is_woken_by_a_push(queen, unique):
    q = unique("wait")
    started = time.monotonic()
    waiting = asyncio.create_task(queen.ephemeral.pop(q, wait=True, timeout=10_000, auto_ack=True))
    await asyncio.sleep(0.5)
    await queen.ephemeral.push(q, {"hello": 1})
    popped = await asyncio.wait_for(waiting, 10)
    assert [m["payload"] for m in popped["messages"]] == [{"hello": 1}]
    assert time.monotonic() - started < 5
    started = time.monotonic()
    assert (await queen.ephemeral.pop(q, wait=True, timeout=300))["messages"] == []
    assert 0.25 <= time.monotonic() - started < 3


async def test_window_buffer_holds_a_waiting_pop_for_its_count(queen, unique):
    q = unique("window")
    await queen.ephemeral.configure(q, window_buffer={"ms": 5000, "count": 3})
    await queen.ephemeral.push(q, {"n": 0})
    waiting = asyncio.create_task(queen.ephemeral.pop(q, batch=10, wait=True, timeout=8000, auto_ack=True))
    await asyncio.sleep(0.5)
    assert not waiting.done()
    await queen.ephemeral.push(q, [{"n": 1}, {"n": 2}])
    popped = await asyncio.wait_for(waiting, 8)
    assert [m["payload"]["n"] for m in popped["messages"]] == [0, 1, 2]


async def test_buffered_push_then_flush(queen, unique):
    q = unique("buffered")
    answer = await queen.ephemeral.push(
        q, [{"n": i} for i in range(4)], buffered={"message_count": 100, "time_millis": 60_000}
    )
    assert answer == {"buffered": True, "count": 4}
    with pytest.raises(EphemeralQueueNotFoundError):
        await queen.ephemeral.depth(q)
    await queen.ephemeral.flush(q)
    assert (await queen.ephemeral.depth(q))["pending"] == 4
    popped = await queen.ephemeral.pop(q, batch=10, auto_ack=True)
    assert [m["payload"]["n"] for m in popped["messages"]] == [0, 1, 2, 3]


@pytest.mark.skipif(not IS_POSTGRES, reason="UNLOGGED tables and several server processes are PostgreSQL's")
def test_content_tables_are_unlogged_and_the_config_is_not(live_server):
    with psycopg.connect(live_server.env["DATABASE_URL"]) as conn:
        rows = dict(
            conn.execute(
                "SELECT relname, relpersistence FROM pg_class WHERE relname LIKE 'queenadmin_ephemeral%%' AND relkind = 'r'"
            ).fetchall()
        )
    assert rows == {
        "queenadmin_ephemeralconfig": "p",
        "queenadmin_ephemeralqueue": "u",
        "queenadmin_ephemeralmessage": "u",
        "queenadmin_ephemeralpartition": "u",
        "queenadmin_ephemeralcursor": "u",
        "queenadmin_ephemerallease": "u",
    }


@pytest.mark.skipif(not IS_POSTGRES, reason="several server processes share one queue only on PostgreSQL")
async def test_two_servers_share_one_queue(live_server, unique):
    """A push through one server is popped through another; a waiting pop
    on the second is woken by the first's push."""
    q = unique("shared")
    with run_server(extra_env={"DATABASE_URL": live_server.env["DATABASE_URL"]}) as other:
        one = Queen(url=live_server.url, bearer_token=live_server.token, retry_attempts=1)
        two = Queen(url=other.url, bearer_token=live_server.token, retry_attempts=1)
        try:
            await one.ephemeral.push(q, {"via": "one"})
            (m,) = (await two.ephemeral.pop(q, group="g"))["messages"]
            assert m["payload"] == {"via": "one"}
            assert (await one.ephemeral.ack(q, m, group="g"))["results"][0]["outcome"] == "acked"
            waiting = asyncio.create_task(two.ephemeral.pop(q, wait=True, timeout=10_000, auto_ack=True))
            await asyncio.sleep(0.5)
            started = time.monotonic()
            await one.ephemeral.push(q, {"via": "one again"})
            popped = await asyncio.wait_for(waiting, 10)
            assert [x["payload"] for x in popped["messages"]] == [{"via": "one again"}]
            assert time.monotonic() - started < 1.5
        finally:
            await one.close()
            await two.close()


async def test_ttl_drops_old_messages_and_idle_implicit_queues_go(clock_server, unique):
    """Messages older than ttlSeconds are dropped (drops.ttl); an implicit
    queue empty and unpolled for 300 s is gone from the list, a declared one stays."""
    q, implicit = unique("ttl"), unique("idle")
    client = Queen(url=clock_server.url, bearer_token=clock_server.token, retry_attempts=1)
    try:
        eph = client.ephemeral
        await eph.configure(q, ttl_seconds=5)
        await eph.push(q, [{"old": 1}, {"old": 2}])
        await eph.push(implicit, {"x": 1})
        assert len((await eph.pop(implicit, auto_ack=True))["messages"]) == 1
        clock_server.shift(timedelta(seconds=6))
        await eph.push(q, {"new": 1})
        popped = await eph.pop(q, batch=10, auto_ack=True)
        assert [m["payload"] for m in popped["messages"]] == [{"new": 1}]
        rows = {r["queue"]: r for r in (await eph.queues())["queues"]}
        assert rows[q]["drops"] == {"bounds": 0, "ttl": 2, "retry": 0}
        assert implicit in rows
        clock_server.shift(timedelta(seconds=301))
        rows = {r["queue"]: r for r in (await eph.queues())["queues"]}
        assert implicit not in rows
        assert rows[q]["tier"] == "declared"
        with pytest.raises(EphemeralQueueNotFoundError):
            await eph.depth(implicit)
    finally:
        await client.close()


def test_the_cell_ceiling_answers_503_and_nothing_is_stored(live_server, unique):
    """Past QUEENADMIN_EPHEMERAL_CELL_BYTES every push is refused with 503
    ephemeral_unavailable; the cell stays at its bytes."""
    with run_server(extra_env={"QUEENADMIN_EPHEMERAL_CELL_BYTES": "100"}) as small, http(small) as client:
        ok = client.post("/api/v1/ephemeral/push", json={"queue": "a", "messages": [{"payload": "x" * 60}]})
        assert ok.status_code == 201, ok.text
        refused = client.post("/api/v1/ephemeral/push", json={"queue": "b", "messages": [{"payload": "y" * 60}]})
        assert refused.status_code == 503
        assert refused.json()["code"] == "ephemeral_unavailable"
        listed = client.get("/api/v1/ephemeral/queues").json()
        assert listed["cellBytes"] == 62
        assert [(r["queue"], r["depth"]) for r in listed["queues"]] == [("a", 1)]


async def test_concurrent_consumers_of_two_groups_each_get_every_message_once(queen, unique):
    """Four competing consumers per group, popping and acking at once: each
    group sees every message exactly once, and the acks' trims (taken
    without the queue's lock on PostgreSQL) leave the ring empty, not short."""
    q = unique("race")
    eph = queen.ephemeral
    for group in ("a", "b"):
        await eph.pop(q, group=group)
    total = 400
    for start in range(0, total, 100):
        await eph.push(q, [{"n": n} for n in range(start, start + 100)], partition=f"p{start // 100 % 3}")
    seen: dict[str, list[int]] = {"a": [], "b": []}

    async def consume(group: str) -> None:
        while True:
            got = (await eph.pop(q, group=group, batch=7))["messages"]
            if not got:
                return
            seen[group] += [m["payload"]["n"] for m in got]
            answer = await eph.ack(q, got, group=group)
            assert {r["outcome"] for r in answer["results"]} == {"acked"}

    await asyncio.gather(*(consume(g) for g in ("a", "b") for _ in range(4)))
    assert sorted(seen["a"]) == sorted(seen["b"]) == list(range(total))
    depth = await eph.depth(q)
    assert (depth["pending"], depth["bytes"]) == (0, 0)


def test_every_async_api_view_is_served_on_the_event_loop():
    """An ``async def`` route outside ``ASYNC_PREFIXES`` would run under the
    WSGI bridge on a loop of its own per request (and rebind the long-poll hub)."""
    import inspect

    from queenadmin.api import api
    from queenadmin.server.handlers import ASYNC_PREFIXES

    async_paths = [
        f"/api/v1{path}"
        for router_prefix, router in api._routers
        for path, operations in router.path_operations.items()
        for operation in operations.operations
        if inspect.iscoroutinefunction(operation.view_func)
    ]
    assert "/api/v1/ephemeral/pop" in async_paths
    assert [p for p in async_paths if not p.startswith(ASYNC_PREFIXES)] == []


async def test_an_ephemeral_pop_leaves_durable_long_polls_their_wake_ups(queen, unique):
    """A durable waiting pop is woken by its push at once, ephemeral pops in between."""
    q, e = unique("durable"), unique("eph")
    waiting = asyncio.create_task(queen.queue(q).batch(1).wait(True).timeout_millis(10_000).pop())
    await asyncio.sleep(0.5)
    for _ in range(3):
        await queen.ephemeral.pop(e)
    started = time.monotonic()
    await queen.queue(q).push([{"data": {"hello": 1}}])
    (message,) = await asyncio.wait_for(waiting, 10)
    assert message["data"] == {"hello": 1}
    assert time.monotonic() - started < 1.0


def test_null_options_read_as_absent_and_a_huge_ttl_is_clamped(live_server, unique):
    q = unique("nulls")
    with http(live_server) as client:
        body = {"queue": q, "options": {"ttlSeconds": 10**30, "policy": None, "windowBuffer": {"ms": None, "count": 2}}}
        answer = client.post("/api/v1/ephemeral/configure", json=body)
        assert answer.status_code == 201, answer.text
        assert answer.json()["options"] == {"ttlSeconds": 10**30, "windowBuffer": {"count": 2}}
        assert client.post("/api/v1/ephemeral/push", json={"queue": q, "messages": [{"payload": 1}]}).status_code == 201
        (row,) = [r for r in client.get("/api/v1/ephemeral/queues").json()["queues"] if r["queue"] == q]
        assert row["options"]["ttlSeconds"] == 2**31 - 1
        assert row["options"]["policy"] == "reject"
        assert row["options"]["windowBuffer"] == {"ms": 0, "count": 2}
        assert row["depth"] == 1
