"""Waiting long-poll pops hold no thread of the server process.

A real ``manage.py serve`` holds 200 pops waiting on an empty queue; its
thread count stays near idle, it keeps answering KV calls meanwhile, and a
push then hands one message to each waiter.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import LiveServer, open_files_at_least, run_server

pytestmark = pytest.mark.live

WAITERS = 200
#: Threads the server may add while the pops wait: the bounded pools
#: (``dbthreads``, the WSGI bridge) are already full after the warm-up, so
#: this covers only stragglers such as asgiref's one shared sync thread.
SLACK = 8
#: Long enough to outlast the waiting phase and the push; short enough that a
#: missed wake-up still ends the test (with 204s, which then fails it).
POP_TIMEOUT_MS = 30_000


def _threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no Threads: line")


def _connections(port: int) -> int:
    """Established TCP connections accepted on ``port`` (IPv4)."""
    count = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, _, state = line.split()[1:4]
        if int(local.rsplit(":", 1)[1], 16) == port and state == "01":
            count += 1
    return count


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    # 200 client sockets here and 200 in the server (which inherits the limit).
    with open_files_at_least(4 * WAITERS + 256), run_server() as live:
        yield live


async def _kv_put(client: httpx.AsyncClient) -> httpx.Response:
    ops = [{"op": "put", "ns": "t", "key": "k", "value": 1, "forever": True}]
    return await client.post("/kv", json={"operations": ops}, timeout=5)


def _client(server: LiveServer, connections: int = 20) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=f"{server.url}/api/v1",
        headers={"Authorization": f"Bearer {server.token}"},
        limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
        timeout=POP_TIMEOUT_MS / 1000 + 30,
    )


async def test_waiting_pops_hold_no_thread(server, unique):
    """200 waiting pops add no thread each; KV calls are answered meanwhile."""
    pid = server.process.pid
    queue = unique("waiters")
    # Warm-up: fill the bounded pools (database threads, WSGI threads) and
    # start the wake-up hub, so idle means steady state.
    async with _client(server) as client:
        warm = [client.get(f"/pop/queue/{queue}", params={"wait": "false"}) for _ in range(16)]
        warm += [_kv_put(client) for _ in range(16)]
        warm.append(client.get(f"/pop/queue/{queue}", params={"wait": "true", "timeout": 100}))
        assert {r.status_code for r in await asyncio.gather(*warm)} == {200, 204}
    await asyncio.sleep(0.5)
    idle = _threads(pid)
    port = httpx.URL(server.url).port

    async with _client(server, WAITERS) as waiters, _client(server, 1) as kv:
        params = {"wait": "true", "timeout": POP_TIMEOUT_MS, "batch": 1}
        pops = [asyncio.ensure_future(waiters.get(f"/pop/queue/{queue}", params=params)) for _ in range(WAITERS)]
        # Wait until every waiter is connected, then give their first claims
        # time to run and park.
        deadline = time.monotonic() + 20
        while _connections(port) < WAITERS:
            assert not any(p.done() for p in pops), "a pop ended before the push"
            assert time.monotonic() < deadline, "the pops never all connected"
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)

        waiting = idle
        for _ in range(10):
            waiting = max(waiting, _threads(pid))
            answer = await _kv_put(kv)
            assert answer.status_code == 200
            assert answer.json()["results"][0]["applied"] is True
            await asyncio.sleep(0.2)
        assert not any(p.done() for p in pops), "a pop ended before the push"
        assert waiting <= idle + SLACK, f"idle {idle} threads, {waiting} with {WAITERS} waiting pops"

        # One message per partition: each waiter leases one partition.
        items = [{"queue": queue, "partition": f"p{i}", "payload": i} for i in range(WAITERS)]
        assert (await kv.post("/push", json={"items": items})).status_code == 201
        answers = await asyncio.gather(*pops)
    assert [a.status_code for a in answers] == [200] * WAITERS
    payloads = sorted(m["data"] for a in answers for m in a.json()["messages"])
    assert payloads == list(range(WAITERS))
