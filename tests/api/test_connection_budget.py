"""The several-replica setup of docs/operations.md stays inside PostgreSQL's connections.

Three ``serve`` replicas with ``--workers 2`` on one database, 96 KV clients
and 240 waiting pops at once, with docs/operations.md's ``QUEENADMIN_DB_POOL_SIZE=8``:
every answer is below 500, and the replicas together never hold more
connections than the documented budget (per worker process: the pool plus
two LISTEN connections). Before the pool each worker kept one connection per HTTP
thread and per pop thread, and this setup exhausted max_connections=100
("too many clients": 110 answers of 500).

Those are the ``QA_SCALE=full`` sizes; at ``ci`` (tests/scale.py) the same
replicas serve 48 KV clients of 10 calls and 120 waiting pops, still more
than the pools of the six workers hold at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections import Counter

import httpx
import psycopg
import pytest

from tests.conftest import requires_postgres, run_server
from tests.scale import scaled, sized

# Counts PostgreSQL's connections per worker, which a pooler replaces with
# its own.
pytestmark = [pytest.mark.live, requires_postgres, scaled, pytest.mark.direct_only]

REPLICAS = 3
WORKERS = 2
KV_CLIENTS = sized(ci=48, full=96)
KV_CALLS_EACH = sized(ci=10, full=20)
WAITING_POPS = sized(ci=120, full=240)
#: Per worker process (docs/operations.md, "The connection budget").
BUDGET_PER_PROCESS = 8 + 2


def _connections(url: str) -> int:
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", [name]).fetchone()
    return int(row[0]) if row else 0


async def test_three_replicas_with_two_workers_answer_no_500():
    with contextlib.ExitStack() as stack:
        pooled = {"QUEENADMIN_DB_POOL_SIZE": "8"}
        first = stack.enter_context(run_server(pooled, workers=WORKERS))
        shared = {**pooled, "DATABASE_URL": first.env["DATABASE_URL"]}
        servers = [first] + [stack.enter_context(run_server(shared, workers=WORKERS)) for _ in range(REPLICAS - 1)]
        headers = {"Authorization": f"Bearer {first.token}"}
        statuses: Counter[int] = Counter()
        peak = 0
        done = asyncio.Event()

        async def sample() -> None:
            nonlocal peak
            while not done.is_set():
                peak = max(peak, await asyncio.to_thread(_connections, first.env["DATABASE_URL"]))
                await asyncio.sleep(0.2)

        # A connection per call: on this loaded 2-core box a call sent on an
        # idle keep-alive connection as the server's keep-alive timer fires
        # reads a closed connection (a client-side race, not an answer).
        limits = httpx.Limits(max_connections=1000, max_keepalive_connections=0)
        async with httpx.AsyncClient(headers=headers, timeout=60, limits=limits) as client:
            assert (await client.post(f"{first.url}/api/v1/configure", json={"queue": "budget"})).status_code == 200

            async def kv_client(index: int) -> None:
                base = servers[index % REPLICAS].url
                for call in range(KV_CALLS_EACH):
                    op = {"op": "put", "ns": "budget", "key": f"c{index}", "value": call, "forever": True}
                    response = await client.post(f"{base}/api/v1/kv", json={"operations": [op]})
                    statuses[response.status_code] += 1

            async def waiting_pop(index: int) -> None:
                base = servers[index % REPLICAS].url
                response = await client.get(
                    f"{base}/api/v1/pop/queue/budget",
                    params={"wait": "true", "timeout": "3000", "consumerGroup": f"g{index % 12}"},
                )
                statuses[response.status_code] += 1

            sampler = asyncio.create_task(sample())
            await asyncio.gather(
                *(waiting_pop(i) for i in range(WAITING_POPS)), *(kv_client(i) for i in range(KV_CLIENTS))
            )
            done.set()
            await sampler

        assert not [status for status in statuses if status >= 500], statuses
        assert statuses[200] >= KV_CLIENTS * KV_CALLS_EACH
        assert sum(statuses.values()) == KV_CLIENTS * KV_CALLS_EACH + WAITING_POPS
        print(f"\npeak connections of {REPLICAS} replicas x {WORKERS} workers: {peak} ({dict(statuses)})")
        assert peak <= REPLICAS * WORKERS * BUDGET_PER_PROCESS
