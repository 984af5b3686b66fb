"""The Streams SDK of ``queen-mq`` (``Stream``) against a live server (issue 27).

Windowing, gates and reduce run in the client; the server keeps queries,
state and commits each cycle all or nothing. Windows use event time (a
``ts`` field), so a last message far ahead closes every earlier window
without waiting on the wall clock.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest
from queen import Stream
from queen.streams.runtime.register import StreamsConfigHashMismatch
from queen.streams.runtime.runner import Runner

pytestmark = pytest.mark.live


def admin(live_server) -> httpx.Client:
    return httpx.Client(base_url=live_server.url, headers={"Authorization": f"Bearer {live_server.token}"}, timeout=30)


def push(live_server, queue: str, payloads: list[Any], partition: str = "p") -> None:
    with admin(live_server) as http:
        items = [{"queue": queue, "partition": partition, "payload": p} for p in payloads]
        answer = http.post("/api/v1/push", json={"items": items})
        assert answer.status_code == 201, answer.text


def drain(live_server, queue: str, want: int, *, group: str = "check", settle: float = 0.5) -> list[Any]:
    """Every payload of ``queue`` once ``want`` came (and nothing more for ``settle`` s)."""
    got: list[Any] = []
    deadline = time.monotonic() + 30
    quiet_since = None
    with admin(live_server) as http:
        while time.monotonic() < deadline:
            answer = http.get(
                f"/api/v1/pop/queue/{queue}",
                params={"batch": 500, "wait": "false", "consumerGroup": group, "autoAck": "true"},
            )
            messages = answer.json().get("messages", []) if answer.status_code == 200 else []
            got += [m["data"] for m in messages]
            if len(got) >= want:
                if quiet_since is None:
                    quiet_since = time.monotonic()
                if time.monotonic() - quiet_since >= settle:
                    return got
            time.sleep(0.05)
    return got


def state(live_server, query_id: str, partition_id: str, **extra: Any) -> dict[str, Any]:
    with admin(live_server) as http:
        answer = http.post(
            "/streams/v1/state/get", json={"query_id": query_id, "partition_id": partition_id, "keys": [], **extra}
        )
        assert answer.status_code == 200, answer.text
        return {row["key"]: row["value"] for row in answer.json()["rows"]}


def window_row(value: Any, ctx: dict[str, Any]) -> dict[str, Any]:
    """After a reduce, map gets the window's value and its key and bounds."""
    return {"key": ctx["key"], "windowStart": ctx["windowStart"], "value": value}


async def run(stream: Stream, live_server, name: str, *, reset: bool = False, **options: Any) -> Runner:
    """``stream.run(...)``, but a start that fails closes the runner's HTTP
    client (``Stream.run`` leaves it open, which warns as a leak)."""
    runner = Runner(
        queryId=name,
        url=live_server.url,
        stream=stream._compile(),
        bearerToken=live_server.token,
        maxWaitMillis=200,
        reset=reset,
        **options,
    )
    try:
        await runner.start()
    except BaseException:
        await runner.http.close()
        raise
    return runner


async def test_map_filter_to(queen, live_server, unique):
    """map and filter (both handed the source message) run per message; the sink gets exactly the survivors, in order."""
    src, sink = unique("src"), unique("sink")
    push(live_server, src, [{"n": i} for i in range(30)])
    stream = (
        Stream.from_(queen.queue(src))
        .map(lambda m: {"n": m["data"]["n"] * 10})
        .filter(lambda m: m["data"]["n"] % 2 == 0)
    )
    runner = await run(stream.to(queen.queue(sink)), live_server, unique("q"))
    try:
        got = await asyncio.to_thread(drain, live_server, sink, 15)
    finally:
        await runner.stop()
    assert got == [{"n": i * 10} for i in range(0, 30, 2)]


async def test_the_sink_pushes_carry_the_workers_identity(queen, live_server, unique):
    """A stream's sink messages name the worker's token as their producer (``producerSub``)."""
    src, sink = unique("src"), unique("sink")
    push(live_server, src, [{"n": i} for i in range(3)])
    runner = await run(Stream.from_(queen.queue(src)).to(queen.queue(sink)), live_server, unique("q"))
    try:
        await asyncio.to_thread(drain, live_server, sink, 3, group="peek")
    finally:
        await runner.stop()
    with admin(live_server) as http:
        answer = http.get(f"/api/v1/pop/queue/{sink}", params={"batch": 10, "wait": "false", "autoAck": "true"})
    assert [m["producerSub"] for m in answer.json()["messages"]] == ["live-tests"] * 3


async def test_a_conflating_stream_maps_only_the_newest_message_of_each_partition(queen, live_server, unique):
    """With ``conflation=True`` the runner's source pops deliver each partition's newest message only."""
    src, sink = unique("src"), unique("sink")
    push(live_server, src, [{"n": i} for i in range(10)], partition="a")
    push(live_server, src, [{"n": i} for i in range(100, 105)], partition="b")
    stream = Stream.from_(queen.queue(src)).map(lambda m: {"n": m["data"]["n"]})
    runner = await run(stream.to(queen.queue(sink)), live_server, unique("q"), conflation=True)
    try:
        got = await asyncio.to_thread(drain, live_server, sink, 2)
    finally:
        await runner.stop()
    assert sorted(m["n"] for m in got) == [9, 104]


async def test_key_by_tumbling_window_reduce(queen, live_server, unique):
    """Per key and 10 s window, the sums close once event time passes the window's end."""
    src, sink = unique("src"), unique("sink")
    rows = [{"k": k, "ts": ts, "v": v} for ts, v in ((1_000, 1), (4_000, 2), (12_000, 3)) for k in ("a", "b")]
    push(live_server, src, [*rows, {"k": "a", "ts": 100_000, "v": 0}])
    stream = (
        Stream.from_(queen.queue(src))
        .key_by(lambda m: m["data"]["k"])
        .window_tumbling(seconds=10, event_time=lambda m: m["data"]["ts"])
        .reduce(lambda acc, m: acc + m["v"], 0)
        .map(window_row)
        .to(queen.queue(sink))
    )
    runner = await run(stream, live_server, unique("q"))
    try:
        got = await asyncio.to_thread(drain, live_server, sink, 4)
    finally:
        await runner.stop()
    sums = sorted((e["key"], e["windowStart"], e["value"]) for e in got)
    assert sums == [("a", 0, 3), ("a", 10_000, 3), ("b", 0, 3), ("b", 10_000, 3)]


async def test_sliding_window_counts_each_message_in_every_window_it_falls_in(queen, live_server, unique):
    """A 10 s window sliding by 5 s: each message lands in two windows."""
    src, sink = unique("src"), unique("sink")
    push(live_server, src, [{"ts": 6_000}, {"ts": 7_000}, {"ts": 11_000}, {"ts": 100_000}])
    stream = (
        Stream.from_(queen.queue(src))
        .window_sliding(size=10, slide=5, event_time=lambda m: m["data"]["ts"])
        .reduce(lambda acc, m: acc + 1, 0)
        .map(window_row)
        .to(queen.queue(sink))
    )
    runner = await run(stream, live_server, unique("q"))
    try:
        got = await asyncio.to_thread(drain, live_server, sink, 3)
    finally:
        await runner.stop()
    counts = sorted((e["windowStart"], e["value"]) for e in got)
    assert counts == [(0, 2), (5_000, 3), (10_000, 1)]


async def test_session_window_splits_on_the_gap(queen, live_server, unique):
    """Messages closer than the gap share a session; a longer silence starts another."""
    src, sink = unique("src"), unique("sink")
    push(live_server, src, [{"ts": 1_000}, {"ts": 2_000}, {"ts": 3_000}, {"ts": 20_000}, {"ts": 100_000}])
    stream = (
        Stream.from_(queen.queue(src))
        .window_session(gap=5, event_time=lambda m: m["data"]["ts"])
        .reduce(lambda acc, m: acc + 1, 0)
        .map(window_row)
        .to(queen.queue(sink))
    )
    runner = await run(stream, live_server, unique("q"))
    try:
        got = await asyncio.to_thread(drain, live_server, sink, 2)
    finally:
        await runner.stop()
    assert sorted(e["value"] for e in got)[:2] == [1, 3]
    assert len(got) == 2


async def test_gate_lets_through_until_it_denies_and_keeps_its_state(queen, live_server, unique):
    """A gate allowing five per key: five reach the sink and the state counts
    five; the denied tail is acked by no cycle (a partial ack keeps the lease)."""
    src, sink, name = unique("src"), unique("sink"), unique("q")
    push(live_server, src, [{"n": i} for i in range(8)])

    def five(msg, ctx):
        if ctx.state.get("allowed", 0) >= 5:
            return False
        ctx.state["allowed"] = ctx.state.get("allowed", 0) + 1
        return True

    runner = await run(Stream.from_(queen.queue(src)).gate(five).to(queen.queue(sink)), live_server, name)
    try:
        got = await asyncio.to_thread(drain, live_server, sink, 5)
        query_id = runner.metrics()["serverQueryId"]
    finally:
        await runner.stop()
    assert got == [{"n": i} for i in range(5)]
    partition_id = _partition_id(live_server, src)
    # The state key is the envelope's key: the partition id without key_by.
    assert state(live_server, query_id, partition_id) == {partition_id: {"allowed": 5}}


def _partition_id(live_server, queue: str) -> str:
    with admin(live_server) as http:
        answer = http.get("/api/v1/resources/partitions", params={"queue": queue}).json()
    rows = answer if isinstance(answer, list) else answer.get("partitions", [])
    return str(rows[0]["id"])


async def test_restart_with_the_same_config_keeps_state_and_a_changed_one_needs_reset(queen, live_server, unique):
    """Same hash: not fresh, state kept. Changed hash: 409 (the client raises)
    unless reset, which wipes the state and keeps the query id."""
    src, name = unique("src"), unique("q")
    push(live_server, src, [{"k": "a", "ts": 1_000, "v": 5}])

    def build(seconds: int) -> Stream:
        return (
            Stream.from_(queen.queue(src))
            .key_by(lambda m: m["data"]["k"])
            .window_tumbling(seconds=seconds, event_time=lambda m: m["data"]["ts"])
            .reduce(lambda acc, m: acc + m["v"], 0)
            .foreach(lambda value: None)
        )

    first = await run(build(10), live_server, name)
    query_id = first.metrics()["serverQueryId"]
    pid = await asyncio.to_thread(_wait_partition, live_server, src)
    await asyncio.to_thread(_wait_state, live_server, query_id, pid)
    await first.stop()

    again = await run(build(10), live_server, name)
    assert again.metrics()["serverQueryId"] == query_id
    await again.stop()
    assert state(live_server, query_id, pid) != {}

    with pytest.raises(StreamsConfigHashMismatch):
        await run(build(20), live_server, name)
    assert state(live_server, query_id, pid) != {}

    reset = await run(build(20), live_server, name, reset=True)
    assert reset.metrics()["serverQueryId"] == query_id
    await reset.stop()
    assert state(live_server, query_id, pid) == {}


def _wait_partition(live_server, queue: str) -> str:
    return _partition_id(live_server, queue)


def _wait_state(live_server, query_id: str, pid: str) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if state(live_server, query_id, pid):
            return
        time.sleep(0.05)
    raise AssertionError("no state was written")


# -- the routes' answers to bad input and replays ------------------------------


def _register(http: httpx.Client, src: str, name: str, **extra: Any) -> str:
    answer = http.post("/streams/v1/queries", json={"name": name, "source_queue": src, "config_hash": "h1", **extra})
    assert answer.status_code == 200, answer.text
    return str(answer.json()["query_id"])


def _pop(http: httpx.Client, queue: str, group: str, batch: int = 10) -> dict[str, Any]:
    answer = http.get(f"/api/v1/pop/queue/{queue}", params={"batch": batch, "wait": "false", "consumerGroup": group})
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def test_unknown_streams_routes_answer_the_apis_json_404(live_server):
    with admin(live_server) as http:
        for path in ("/streams/v1/nope", "/streams", "/streams/v2/queries", "/streams/v1/queries/x"):
            answer = http.post(path, json={})
            assert answer.status_code == 404, path
            assert answer.json()["code"] == "no_such_route", path


def test_bad_input_is_a_4xx_in_the_engines_shape(live_server, unique):
    """Missing fields, a body that is no JSON, a wrong method, no token."""
    with admin(live_server) as http:
        for body in ({}, {"name": "x"}, {"name": "x", "source_queue": "s"}, {"name": 1, "source_queue": "s"}):
            answer = http.post("/streams/v1/queries", json=body)
            assert answer.status_code == 400, body
            assert answer.json()["code"] == "bad_request"
        answer = http.post("/streams/v1/cycle", content=b"{nope", headers={"Content-Type": "application/json"})
        assert answer.status_code == 400
        assert answer.json()["code"] == "bad_request"
        for body in (
            {"partition_id": "1"},
            {"query_id": "q"},
            {"query_id": "q", "partition_id": "1", "state_ops": [{"type": "merge", "key": "k"}]},
            {"query_id": "q", "partition_id": "1", "state_ops": "x"},
            {"query_id": "q", "partition_id": "1", "ack": {"transactionId": "t"}},
            {"query_id": "q", "partition_id": "1", "ack": {"transactionId": "t", "leaseId": "l", "status": "failed"}},
            {"query_id": "q", "partition_id": "1", "push_items": [{"payload": 1}]},
            {"query_id": "q", "partition_id": "1", "state_ops": [{"type": "upsert", "key": "a\x00b"}]},
        ):
            answer = http.post("/streams/v1/cycle", json=body)
            assert answer.status_code == 400, (body, answer.text)
            assert answer.json()["code"] == "bad_request", body
        answer = http.get("/streams/v1/queries")
        assert answer.status_code == 405
        assert answer.headers["content-type"].startswith("application/json")
    answer = httpx.post(f"{live_server.url}/streams/v1/queries", json={})
    assert answer.status_code == 401
    assert answer.json()["code"] == "unauthorized"


def test_unknown_query_or_partition_fails_the_cycle_with_success_false(live_server, unique):
    """Queen answers a cycle that cannot apply with 200 and success: false."""
    src = unique("src")
    push(live_server, src, [{"n": 1}])
    pid = _partition_id(live_server, src)
    with admin(live_server) as http:
        query_id = _register(http, src, unique("q"))
        cases = [
            ({"query_id": "not-a-uuid", "partition_id": pid}, "query not found"),
            ({"query_id": "01900000-0000-7000-8000-000000000000", "partition_id": pid}, "query not found"),
            ({"query_id": query_id, "partition_id": "999999999"}, "partition not found"),
            ({"query_id": query_id, "partition_id": "abc"}, "partition not found"),
        ]
        for body, error in cases:
            answer = http.post("/streams/v1/cycle", json={**body, "state_ops": [{"type": "upsert", "key": "k"}]})
            assert answer.status_code == 200, answer.text
            assert answer.json()["success"] is False
            assert answer.json()["error"] == error
        # An unknown query or partition reads as no rows.
        assert state(live_server, "not-a-uuid", pid) == {}
        assert state(live_server, query_id, "abc") == {}


def test_a_state_value_over_the_limit_is_413_and_writes_nothing(live_server, unique):
    src, sink = unique("src"), unique("sink")
    push(live_server, src, [{"n": 1}])
    pid = _partition_id(live_server, src)
    with admin(live_server) as http:
        query_id = _register(http, src, unique("q"))
        popped = _pop(http, src, "g")
        message = popped["messages"][0]
        big = "x" * (1024 * 1024)
        body = {
            "query_id": query_id,
            "partition_id": pid,
            "consumer_group": "g",
            "state_ops": [
                {"type": "upsert", "key": "small", "value": 1},
                {"type": "upsert", "key": "big", "value": big},
            ],
            "push_items": [{"queue": sink, "partition": "p", "payload": {"n": 1}}],
            "ack": {"transactionId": message["transactionId"], "leaseId": popped["leaseId"], "count": 1},
            "release_lease": True,
        }
        answer = http.post("/streams/v1/cycle", json=body)
        assert answer.status_code == 413, answer.text
        assert answer.json() == {"error": answer.json()["error"], "code": "payload_too_large"}
        long_key = {**body, "state_ops": [{"type": "upsert", "key": "k" * 1025, "value": 1}]}
        answer = http.post("/streams/v1/cycle", json=long_key)
        assert answer.status_code == 413, answer.text
        assert state(live_server, query_id, pid) == {}
        # The ack did not apply either: the lease still holds the message.
        ok = http.post("/streams/v1/cycle", json={**body, "state_ops": body["state_ops"][:1]})
        assert ok.json()["success"] is True, ok.text
        assert ok.json()["ack_result"] == {"success": True, "count": 1, "lease_released": True, "dlq": False}
    assert state(live_server, query_id, pid) == {"small": 1}


def test_a_cycle_sent_again_applies_nothing_twice(live_server, unique):
    """A resend of a committed cycle (a lost answer) fails whole: one sink
    message, the state of one application; likewise a gate's partial ack,
    which keeps its lease."""
    src, sink = unique("src"), unique("sink")
    push(live_server, src, [{"n": i} for i in range(3)])
    pid = _partition_id(live_server, src)
    with admin(live_server) as http:
        query_id = _register(http, src, unique("q"))
        popped = _pop(http, src, "g")
        first = popped["messages"][0]
        partial = {
            "query_id": query_id,
            "partition_id": pid,
            "consumer_group": "g",
            "state_ops": [{"type": "upsert", "key": "count", "value": {"n": 1}}],
            "push_items": [{"queue": sink, "partition": "p", "payload": {"n": 0}}],
            "ack": {"transactionId": first["transactionId"], "leaseId": popped["leaseId"], "count": 1},
            "release_lease": False,
        }
        answer = http.post("/streams/v1/cycle", json=partial).json()
        assert answer["success"] is True
        assert answer["ack_result"]["lease_released"] is False
        again = http.post("/streams/v1/cycle", json=partial).json()
        assert again["success"] is False
        assert "acknowledged already" in again["error"]
        last = popped["messages"][-1]
        rest = {
            **partial,
            "state_ops": [{"type": "upsert", "key": "count", "value": {"n": 3}}],
            "push_items": [{"queue": sink, "partition": "p", "payload": {"n": 1}}],
            "ack": {"transactionId": last["transactionId"], "leaseId": popped["leaseId"], "count": 2},
            "release_lease": True,
        }
        answer = http.post("/streams/v1/cycle", json=rest).json()
        assert answer["success"] is True
        assert answer["ack_result"]["lease_released"] is True
        again = http.post("/streams/v1/cycle", json=rest).json()
        assert again["success"] is False
        assert "invalid or expired lease" in again["error"]
    assert state(live_server, query_id, pid) == {"count": {"n": 3}}
    assert drain(live_server, sink, 2, settle=0.3) == [{"n": 0}, {"n": 1}]


def test_state_get_filters_by_keys_prefix_and_ripeness(live_server, unique):
    """The idle flush's read: an exact prefix (``_`` is no wildcard) and a
    window end at or before the time given; rows without one never match."""
    src = unique("src")
    push(live_server, src, [{"n": 1}])
    pid = _partition_id(live_server, src)
    values = {
        "t\x1fa": {"acc": 1, "windowStart": 0, "windowEnd": 1_000},
        "t\x1fb": {"acc": 2, "windowStart": 0, "windowEnd": 5_000},
        "t_x": {"acc": 3, "windowEnd": 10},
        "__wm__": {"eventTimeMs": 7},
        "odd": {"windowEnd": True},
    }
    with admin(live_server) as http:
        query_id = _register(http, src, unique("q"))
        ops = [{"type": "upsert", "key": k, "value": v} for k, v in values.items()]
        answer = http.post("/streams/v1/cycle", json={"query_id": query_id, "partition_id": pid, "state_ops": ops})
        assert answer.json()["success"] is True, answer.text
        assert answer.json()["ack_result"] is None
    assert state(live_server, query_id, pid) == values
    assert state(live_server, query_id, pid, keys=["odd", "missing"]) == {"odd": values["odd"]}
    assert list(state(live_server, query_id, pid, key_prefix="t\x1f")) == ["t\x1fa", "t\x1fb"]
    assert list(state(live_server, query_id, pid, key_prefix="t\x1f", ripe_at_or_before=2_000)) == ["t\x1fa"]
    assert list(state(live_server, query_id, pid, ripe_at_or_before=5_000)) == ["t\x1fa", "t\x1fb", "t_x"]


async def test_an_idle_processing_time_window_is_flushed_by_the_timer(queen, live_server, unique):
    """No message comes after the window: the runner's idle flush reads the
    ripe rows (``key_prefix``, ``ripe_at_or_before``), emits them and deletes
    them in a cycle without an ack."""
    src, sink, name = unique("src"), unique("sink"), unique("q")
    push(live_server, src, [{"v": 1}, {"v": 2}, {"v": 3}])
    stream = (
        Stream.from_(queen.queue(src))
        .window_tumbling(seconds=1, idle_flush_ms=200)
        .reduce(lambda acc, m: acc + m["v"], 0)
        .to(queen.queue(sink))
    )
    runner = await run(stream, live_server, name)
    try:
        got = await asyncio.to_thread(drain, live_server, sink, 1)
        query_id = runner.metrics()["serverQueryId"]
    finally:
        await runner.stop()
    assert sum(m["value"] for m in got) == 6
    assert state(live_server, query_id, _partition_id(live_server, src)) == {}


@pytest.mark.django_db
def test_the_streams_api_leaves_the_dashboard_home_alone():
    """Its own root view is mounted after the dashboard: "/" stays the overview,
    and the streams routes and their OpenAPI document resolve."""
    from django.test import Client
    from django.urls import resolve

    assert resolve("/").url_name == "overview"
    assert resolve("/streams/v1/cycle").url_name == "commit_cycle"
    document = Client().get("/streams/v1/openapi.json")
    assert document.status_code == 200
    assert set(document.json()["paths"]) == {"/streams/v1/queries", "/streams/v1/state/get", "/streams/v1/cycle"}
