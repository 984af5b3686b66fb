"""One replica against six, through one PgBouncer: throughput and PostgreSQL's connections.

    .venv/bin/python bench/replicas.py

Issue 25 asks for "the 6 x 2 test's throughput against one replica's, and
PostgreSQL's connection count at peak". This runs the soak test's mixed load
(tests/pooler/load.py: KV puts and incrs, locks with guarded transactions, a
semaphore, pushes, pops, timers, transactions) at its full size on each
shape in turn, each on a fresh database of one private PostgreSQL
(max_connections 100) behind one PgBouncer in transaction pooling
(default_pool_size 20), replicas with DATABASE_LISTEN_URL and a private
Redis: tests/pooler/cluster.py starts and stops them all. The load
generator shares the machine's cores with the servers and PostgreSQL, so
read the numbers as a ratio taken in one run (its own CPU is printed).

Options (environment): BENCH_SECONDS (per shape, default 30), BENCH_SHAPES
(replicas x workers, default "1x2,6x2").
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SECONDS = float(os.environ.get("BENCH_SECONDS", "30"))
SHAPES = [tuple(int(n) for n in s.split("x")) for s in os.environ.get("BENCH_SHAPES", "1x2,6x2").split(",")]


def _problems(out: Any, semaphore: str, limit: int) -> list[str]:
    """The soak test's invariants, as words (empty: all held)."""
    found = []
    bad = {code: n for code, n in out.statuses().items() if code >= 500 or code == 0}
    if bad:
        found.append(f"answers {bad}")
    if out.kv_missing or out.kv_wrong or out.txn_kv_missing:
        found.append(f"KV lost {len(out.kv_missing) + len(out.kv_wrong) + len(out.txn_kv_missing)}")
    undelivered = sum(len(v) for v in out.undelivered().values())
    if undelivered:
        found.append(f"undelivered {undelivered}")
    if out.timers_not_once():
        found.append(f"timers not once {len(out.timers_not_once())}")
    if out.overlapping_leases():
        found.append(f"overlapping leases {len(out.overlapping_leases())}")
    if out.most_held_at_once(semaphore) > limit:
        found.append("semaphore above its limit")
    if out.counter_value != out.incr_acked:
        found.append(f"counter {out.counter_value} != {out.incr_acked} acked")
    return found


async def _run_shape(pg: Any, bouncer: Any, redis: Any, replica_count: int, workers: int) -> dict[str, Any]:
    from tests.pooler.cluster import migrated_database, pooled_env, replicas
    from tests.pooler.load import FULL_SHAPE as SHAPE
    from tests.pooler.load import ConnectionSampler, Load

    database = f"queen_{replica_count}x{workers}"
    token = migrated_database(pg, database)
    env = {**pooled_env(pg, bouncer, database), "REDIS_URL": redis.url}
    with replicas(replica_count, env, workers=workers) as servers:
        load = Load([s.url for s in servers], token, SHAPE)
        with ConnectionSampler(pg.url(), bouncer.url("pgbouncer")) as sampler:
            cpu, wall = time.process_time(), time.monotonic()
            out = await load.run(SECONDS)
            cpu, wall = time.process_time() - cpu, time.monotonic() - wall
    return {
        "shape": f"{replica_count}x{workers}",
        "out": out,
        "problems": _problems(out, load.semaphore, SHAPE.semaphore_limit),
        "peak_clients": sampler.peak_clients,
        "peak_all": sampler.peak_all,
        "peak_waiting": sampler.peak_waiting,
        "load_cpu": cpu / wall,
    }


def main() -> None:
    from tests.pooler.cluster import private_bouncer, private_postgres, private_redis

    rows = []
    with private_postgres(max_connections=100) as pg, private_redis() as redis:
        for replica_count, workers in SHAPES:
            print(f"  {replica_count} x {workers} for {SECONDS:g} s…", file=sys.stderr)
            # A PgBouncer of its own: the last shape's idle server connections
            # would count in this one's peak.
            with private_bouncer(pg) as bouncer:
                rows.append(asyncio.run(_run_shape(pg, bouncer, redis, replica_count, workers)))
            print(f"  load average {os.getloadavg()[0]:.1f}", file=sys.stderr)
    print()
    print(f"mixed load (tests/pooler/load.py, full size), {SECONDS:g} s per shape, through one PgBouncer (pool 20)")
    print(
        f"| {'replicas':>8} | {'calls/s':>7} | {'acked writes/s':>14} | {'vs first':>8} | {'pg peak':>7} "
        f"| {'pg all':>6} | {'bouncer waiting':>15} | {'load gen CPU':>12} | invariants"
    )
    print(f"|{'-' * 10}|{'-' * 9}|{'-' * 16}|{'-' * 10}|{'-' * 9}|{'-' * 8}|{'-' * 17}|{'-' * 14}|{'-' * 11}")
    first = rows[0]["out"].answered_per_second() if rows else 0.0
    for row in rows:
        out = row["out"]
        rate = out.answered_per_second()
        writes = out.acked_writes() / out.write_seconds
        print(
            f"| {row['shape']:>8} | {rate:>7.0f} | {writes:>14.0f} | {rate / first if first else 0:>8.2f} "
            f"| {row['peak_clients']:>7} | {row['peak_all']:>6} | {row['peak_waiting']:>15} "
            f"| {row['load_cpu']:>11.0%} | {'; '.join(row['problems']) or 'all held'}"
        )
    print("pg peak: client backends in pg_stat_activity (the sampler's own included); pg all: every backend")


if __name__ == "__main__":
    main()
