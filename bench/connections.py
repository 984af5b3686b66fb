"""PostgreSQL connections one ``serve`` worker holds at its peak, unpooled and pooled.

Run on demand (not part of CI)::

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test .venv/bin/python bench/connections.py

For each ``QUEENADMIN_DB_POOL_SIZE`` given (default ``0 8``: no pool, and
docs/operations.md's production example) it starts one ``manage.py serve --workers 1``
on a scratch database (``tests.conftest.run_server``) with every loop of a
default start (reaper, retention, ephemeral idle check, timer loop,
sampler), drives KV puts, durable and ephemeral pushes and waiting pops at
once, samples ``pg_stat_activity`` for the database every 0.1 s, and prints
the peak beside the documented figure for it (docs/operations.md, the
connection budget):
``QUEENADMIN_HTTP_THREADS`` + ``QUEENADMIN_POP_DB_THREADS`` + 7 unpooled,
the pool size + 2 pooled.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import sys
import threading
from pathlib import Path

import httpx
import psycopg

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"


def _count(database: str, stop: threading.Event) -> int:
    peak = 0
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        while not stop.is_set():
            row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", [database]).fetchone()
            peak = max(peak, int(row[0]) if row else 0)
            stop.wait(0.1)
    return peak


def _writer(url: str, token: str, n: int, calls: int) -> None:
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        for call in range(calls):
            http.post("/api/v1/kv", json={"operations": [{"op": "put", "ns": "b", "key": f"k{n}", "value": call}]})
            http.post("/api/v1/push", json={"items": [{"queue": "budget", "payload": {"n": call}}]})
            http.post("/api/v1/ephemeral/push", json={"queue": "budget-eph", "items": [{"payload": call}]})


def _waiter(url: str, token: str, n: int) -> None:
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        for _ in range(3):
            http.get(
                "/api/v1/pop/queue/budget-idle", params={"wait": "true", "timeout": "2000", "consumerGroup": f"g{n}"}
            )


def peak(pool: int, writers: int, waiters: int, calls: int) -> tuple[int, int]:
    """The peak connections of one worker, and the documented budget for it."""
    from tests.conftest import run_server

    env = {"QUEENADMIN_DB_POOL_SIZE": str(pool)}
    with run_server(env, workers=1) as server:
        database = server.env["DATABASE_URL"].rsplit("/", 1)[1]
        stop = threading.Event()
        with concurrent.futures.ThreadPoolExecutor(writers + waiters + 1) as pool_:
            counting = pool_.submit(_count, database, stop)
            jobs = [pool_.submit(_writer, server.url, server.token, n, calls) for n in range(writers)]
            jobs += [pool_.submit(_waiter, server.url, server.token, n) for n in range(waiters)]
            for job in jobs:
                job.result()
            stop.wait(2)
            stop.set()
            seen = counting.result()
    threads = int(os.environ.get("QUEENADMIN_HTTP_THREADS", "4")) + int(
        os.environ.get("QUEENADMIN_POP_DB_THREADS", "8")
    )
    return seen, (pool + 2 if pool else threads + 7)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pools", nargs="*", type=int, default=[0, 8], help="QUEENADMIN_DB_POOL_SIZE values")
    parser.add_argument("--writers", type=int, default=16)
    parser.add_argument("--waiters", type=int, default=40)
    parser.add_argument("--calls", type=int, default=40, help="rounds of put + push + ephemeral push per writer")
    args = parser.parse_args()
    os.environ.setdefault("DATABASE_URL", DEFAULT_URL)
    if not os.environ["DATABASE_URL"].startswith("postgres"):
        sys.exit("bench/connections.py needs PostgreSQL (DATABASE_URL)")
    sys.path.insert(0, str(ROOT))
    for pool in args.pools:
        seen, budget = peak(pool, args.writers, args.waiters, args.calls)
        label = f"pool {pool}" if pool else "no pool"
        print(f"{label:>8}: peak {seen} connections for one worker; the documented budget {budget}")


if __name__ == "__main__":
    main()
