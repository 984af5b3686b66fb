"""Acquire+release cycles per second: queenadmin's HTTP locks vs redis-py's Lock.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test .venv/bin/python bench/locks.py

Starts ``manage.py serve`` on a fresh PostgreSQL database (the test suite's
``run_server``), then, at each concurrency, runs the same workload against
it and against redis-py's ``Lock`` on 127.0.0.1:6379: every client owns a
lock name of its own and loops acquire, release. One cycle over HTTP is two
``POST /api/v1/locks`` calls on a kept-alive connection; one Redis cycle is
``SET NX PX`` plus the release script. The load generator shares the
machine's cores with the server and PostgreSQL (and Redis), so read the
numbers as a ratio taken in one run, not as absolutes.

Options (environment): BENCH_SECONDS (per cell, default 5),
BENCH_CONCURRENCY (default "1,16"), BENCH_WORKERS (serve processes,
default 2), BENCH_RUNS (rounds per cell, default 1; medians are shown),
REDIS_HOST/REDIS_PORT.

``--pooler`` (issue 25) compares the server with itself instead of with
Redis: a second ``serve`` on a database of its own through a PgBouncer in
transaction pooling (bench/pooler.py); each round runs a cell on both
servers, the order alternating, and the table shows both and their ratio.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import secrets
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SECONDS = float(os.environ.get("BENCH_SECONDS", "5"))
CONCURRENCY = [int(c) for c in os.environ.get("BENCH_CONCURRENCY", "1,16").split(",")]
SERVER_WORKERS = int(os.environ.get("BENCH_WORKERS", "2"))
REDIS_HOST = os.environ.get("REDIS_HOST", "127.0.0.1")
REDIS_PORT = int(os.environ.get("REDIS_PORT", "6379"))
RUNS = int(os.environ.get("BENCH_RUNS", "1"))
#: Load-generator processes at most; the rest of the concurrency is threads.
MAX_CLIENT_PROCS = 4


def _http_loop(url: str, token: str, name: str, start_at: float, stop_at: float, out: list[Any]) -> None:
    parsed = urlparse(url)
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=30)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def post(op: dict[str, Any]) -> dict[str, Any]:
        conn.request("POST", "/api/v1/locks", body=json.dumps({"operations": [op]}), headers=headers)
        response = conn.getresponse()
        body = response.read()
        if response.status != 200:
            raise RuntimeError(f"{response.status}: {body[:200]!r}")
        return json.loads(body)["results"][0]  # type: ignore[no-any-return]

    cycles = errors = 0
    latencies: list[float] = []
    while time.time() < stop_at:
        began = time.perf_counter()
        got = post({"op": "acquire", "name": name, "ttlSeconds": 30})
        if not got["acquired"]:
            errors += 1
            continue
        done = post({"op": "release", "name": name, "token": got["token"]})
        if not done["released"]:
            errors += 1
        if time.time() >= start_at:
            cycles += 1
            latencies.append(time.perf_counter() - began)
    conn.close()
    out.append((cycles, errors, latencies))


def _redis_loop(name: str, start_at: float, stop_at: float, out: list[Any]) -> None:
    import redis

    client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT)
    cycles = errors = 0
    latencies: list[float] = []
    while time.time() < stop_at:
        began = time.perf_counter()
        lock = client.lock(name, timeout=30)
        if not lock.acquire(blocking=False):
            errors += 1
            continue
        lock.release()
        if time.time() >= start_at:
            cycles += 1
            latencies.append(time.perf_counter() - began)
    client.close()
    out.append((cycles, errors, latencies))


def _client_proc(kind: str, url: str, token: str, names: list[str], start_at: float, stop_at: float) -> Any:
    out: list[Any] = []
    threads = []
    for name in names:
        if kind == "http":
            thread = threading.Thread(target=_http_loop, args=(url, token, name, start_at, stop_at, out))
        else:
            thread = threading.Thread(target=_redis_loop, args=(name, start_at, stop_at, out))
        threads.append(thread)
        thread.start()
    for thread in threads:
        thread.join()
    return out


def measure(kind: str, concurrency: int, url: str = "", token: str = "") -> dict[str, float]:
    """Cycles per second (and latency) at ``concurrency`` clients."""
    run_id = secrets.token_hex(3)
    names = [f"bench-{run_id}-{i}" for i in range(concurrency)]
    procs = min(concurrency, MAX_CLIENT_PROCS)
    groups = [names[i::procs] for i in range(procs)]
    warmup = 1.0
    ctx = multiprocessing.get_context("fork")
    start_at = time.time() + 0.5 + warmup
    stop_at = start_at + SECONDS
    with ctx.Pool(procs) as pool:
        pending = [pool.apply_async(_client_proc, (kind, url, token, g, start_at, stop_at)) for g in groups]
        results = [item for p in pending for item in p.get(timeout=SECONDS + 120)]
    cycles = sum(r[0] for r in results)
    errors = sum(r[1] for r in results)
    latencies = sorted(lat for r in results for lat in r[2])
    return {
        "rate": cycles / SECONDS,
        "errors": errors,
        "p50_ms": statistics.median(latencies) * 1000 if latencies else float("nan"),
        "p99_ms": latencies[int(len(latencies) * 0.99) - 1] * 1000 if latencies else float("nan"),
    }


def _median(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


def main_pooler() -> None:
    """Direct against through PgBouncer, ``RUNS`` rounds per concurrency."""
    import contextlib

    import pooler

    pooler.prepare()
    from tests.conftest import drop_live_template, run_server

    rows = []
    with contextlib.ExitStack() as stack:
        stack.callback(drop_live_template)
        servers = {"direct": stack.enter_context(run_server(workers=SERVER_WORKERS))}
        bouncer = stack.enter_context(pooler.bouncer())
        servers["pgbouncer"] = stack.enter_context(pooler.pooled_server(bouncer, SERVER_WORKERS))
        for server in servers.values():
            measure("http", 1, server.url, server.token)  # warm the server's connections
        for concurrency in CONCURRENCY:
            runs: dict[str, list[dict[str, float]]] = {"direct": [], "pgbouncer": []}
            for round_no in range(RUNS):
                order = ["direct", "pgbouncer"] if round_no % 2 == 0 else ["pgbouncer", "direct"]
                for side in order:
                    load = float(Path("/proc/loadavg").read_text().split()[0])
                    got = measure("http", concurrency, servers[side].url, servers[side].token)
                    runs[side].append({**got, "load": load})
                    print(
                        f"  c={concurrency} round {round_no + 1} {side}: {got['rate']:.0f}/s, load {load:.2f}",
                        file=sys.stderr,
                    )
            rows.append((concurrency, _median(runs["direct"]), _median(runs["pgbouncer"]), runs))
    print()
    print(
        f"acquire+release cycles/s, {SECONDS:g} s per cell, {RUNS} round(s), medians, serve --workers "
        f"{SERVER_WORKERS}, PostgreSQL directly and through PgBouncer 1.18 (transaction pooling)"
    )
    print(
        f"| {'clients':>7} | {'direct':>8} | {'p50 ms':>6} | {'p99 ms':>6} | {'PgBouncer':>9} | {'p50 ms':>6} "
        f"| {'p99 ms':>6} | {'ratio':>6} | load |"
    )
    print(f"|{'-' * 9}|{'-' * 10}|{'-' * 8}|{'-' * 8}|{'-' * 11}|{'-' * 8}|{'-' * 8}|{'-' * 8}|---|")
    for concurrency, direct, pooled, runs in rows:
        loads = "/".join(f"{run['load']:.1f}" for side in runs.values() for run in side)
        print(
            f"| {concurrency:>7} | {direct['rate']:>8.0f} | {direct['p50_ms']:>6.2f} | {direct['p99_ms']:>6.2f} "
            f"| {pooled['rate']:>9.0f} | {pooled['p50_ms']:>6.2f} | {pooled['p99_ms']:>6.2f} "
            f"| {pooled['rate'] / direct['rate']:>6.1%} | {loads} |"
        )
    refused = sum(run["errors"] for _, _, _, runs in rows for side in runs.values() for run in side)
    if refused:
        print(f"({refused:.0f} refused acquires or lost releases; each client owns its lock, so expect 0)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--pooler", action="store_true", help="compare with the same server through PgBouncer instead of with Redis"
    )
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        sys.exit("set DATABASE_URL=postgresql://... (the benchmark runs on PostgreSQL)")
    if args.pooler:
        main_pooler()
        return
    import redis

    redis.Redis(host=REDIS_HOST, port=REDIS_PORT).ping()
    from tests.conftest import run_server

    rows = []
    with run_server(workers=SERVER_WORKERS) as server:
        measure("http", 1, server.url, server.token)  # warm the server's connections
        for concurrency in CONCURRENCY:
            ours = measure("http", concurrency, server.url, server.token)
            theirs = measure("redis", concurrency)
            rows.append((concurrency, ours, theirs))
            print(
                f"  c={concurrency}: queenadmin {ours['rate']:.0f}/s, redis {theirs['rate']:.0f}/s",
                file=sys.stderr,
            )
    print()
    print(f"acquire+release cycles/s, {SECONDS:g} s per cell, serve --workers {SERVER_WORKERS}, PostgreSQL")
    print(
        f"| {'clients':>7} | {'queenadmin HTTP':>15} | {'p50 ms':>6} | {'p99 ms':>6} "
        f"| {'redis-py Lock':>13} | {'p50 ms':>6} | {'p99 ms':>6} | {'ratio':>6} |"
    )
    print(f"|{'-' * 9}|{'-' * 17}|{'-' * 8}|{'-' * 8}|{'-' * 15}|{'-' * 8}|{'-' * 8}|{'-' * 8}|")
    for concurrency, ours, theirs in rows:
        ratio = ours["rate"] / theirs["rate"] if theirs["rate"] else float("nan")
        print(
            f"| {concurrency:>7} | {ours['rate']:>15.0f} | {ours['p50_ms']:>6.2f} | {ours['p99_ms']:>6.2f} "
            f"| {theirs['rate']:>13.0f} | {theirs['p50_ms']:>6.2f} | {theirs['p99_ms']:>6.2f} | {ratio:>6.1%} |"
        )
    refused = sum(ours["errors"] + theirs["errors"] for _, ours, theirs in rows)
    if refused:
        print(f"({refused:.0f} refused acquires or lost releases; each client owns its lock, so expect 0)")


if __name__ == "__main__":
    main()
