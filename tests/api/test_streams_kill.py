"""A streaming worker killed with SIGKILL mid-cycle (issue 27).

Each cycle commits its state, its sink pushes and its source ack in one
database transaction. A worker killed at any point leaves either all of a
cycle or none; the next worker gets the un-acked messages back once their
lease runs out. So, over several kills: every source message reaches the
sink exactly once, and the state counts each exactly once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any

import httpx
import pytest

from tests.api.test_streams import admin, push, state

pytestmark = pytest.mark.live

WORKER = """
import asyncio, sys
from queen import Queen, Stream

async def main(url, token, src, sink, name):
    async with Queen(url=url, bearer_token=token) as q:
        def count(msg, ctx):
            ctx.state["count"] = ctx.state.get("count", 0) + 1
            ctx.state["sum"] = ctx.state.get("sum", 0) + msg["n"]
            return True
        stream = Stream.from_(q.queue(src)).gate(count).to(q.queue(sink))
        await stream.run(query_id=name, url=url, bearer_token=token, batch_size=7, max_wait_millis=200)
        print("started", flush=True)
        await asyncio.Event().wait()

asyncio.run(main(*sys.argv[1:]))
"""

N = 400


def _worker(live_server, src: str, sink: str, name: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", WORKER, live_server.url, live_server.token, src, sink, name],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )


def _sink(http: httpx.Client, sink: str) -> list[Any]:
    """Every message in ``sink``, read by offset (nothing consumed)."""
    out: list[Any] = []
    answer = http.post("/api/v1/fetch", json={"entries": [{"queue": sink, "partition": "p"}]})
    if answer.status_code == 200:
        for entry in answer.json()["entries"]:
            out += [r["payload"] for r in entry["records"]]
    return out


def test_sigkill_mid_cycle_loses_and_doubles_nothing(live_server, unique):
    src, sink, name = unique("src"), unique("sink"), unique("q")
    with admin(live_server) as http:
        configured = http.post("/api/v1/configure", json={"queue": src, "options": {"leaseTime": 1}})
        assert configured.status_code == 200, configured.text
    push(live_server, src, [{"n": i} for i in range(N)])
    with admin(live_server) as http:
        kills = 0
        seen = 0
        deadline = time.monotonic() + 120
        while kills < 4 and time.monotonic() < deadline:
            worker = _worker(live_server, src, sink, name)
            # Let it commit some cycles, then kill it wherever it is.
            target = seen + 40
            while len(_sink(http, sink)) < target and time.monotonic() < deadline and worker.poll() is None:
                time.sleep(0.01)
            worker.send_signal(signal.SIGKILL)
            worker.wait()
            kills += 1
            seen = len(_sink(http, sink))
        worker = _worker(live_server, src, sink, name)
        try:
            while len(_sink(http, sink)) < N and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(1.5)  # a lease's length: a duplicate would show by now
            got = _sink(http, sink)
        finally:
            worker.send_signal(signal.SIGKILL)
            worker.wait()
        partitions = http.get("/api/v1/resources/partitions", params={"queue": src}).json()
    assert kills == 4
    numbers = [m["n"] for m in got]
    assert sorted(numbers) == list(range(N)), "a sink message was lost or doubled"
    rows = partitions if isinstance(partitions, list) else partitions.get("partitions", [])
    pid = str(rows[0]["id"])
    query_id = _query_id(live_server, name, src, sink)
    assert state(live_server, query_id, pid) == {pid: {"count": N, "sum": N * (N - 1) // 2}}


def _query_id(live_server, name: str, src: str, sink: str) -> str:
    """The query's id, from the 409 of a registration with another hash (which changes nothing)."""
    with admin(live_server) as http:
        answer = http.post(
            "/streams/v1/queries", json={"name": name, "source_queue": src, "config_hash": "x", "reset": False}
        )
        assert answer.status_code == 409
        return str(answer.json()["query_id"])
