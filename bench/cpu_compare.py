"""Server CPU per call of two or more checkouts, side by side in one run.

Run on demand (not part of CI)::

    git worktree add --detach /tmp/base <commit>; ln -s "$PWD/.venv" /tmp/base/.venv
    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test \\
        .venv/bin/python bench/cpu_compare.py /tmp/base . --work put --calls 3000

Each checkout gets a scratch PostgreSQL database and its own ``manage.py
serve --workers 1``; a checkout may carry server environment after ``@``
(``.@QUEENADMIN_METRICS_REQUESTS=0+QUEENADMIN_GC_FREEZE=0``), and
``BENCH_GRANTS=g1,g2`` there makes its token limited by those grants
(``.@BENCH_GRANTS=kv:orders=write,*:bench*=write``: a grant check per
operation against a token without grants). Then, for
``--rounds`` rounds, each server in turn (the order alternating per round)
takes ``--calls`` calls from ``--concurrency`` Python client threads after a
short warm-up, and the CPU its process tree used is read from ``/proc``.
Printed: per checkout the median CPU per call and calls/s, and the ratio of
each median to the first checkout's; then the same for the PostgreSQL
backends serving its database (read from ``/proc``: a local server), and for
server and backends together. The shared machine's speed changes from
minute to minute; alternating the servers within one run is what makes the
ratios comparable, not the absolute figures.

``--work``: ``put`` (one KV put), ``cas`` (one KV put at the version the
last answered), ``get`` (one KV get), ``push`` (one message),
``lock`` (acquire + release of a lock: two calls), ``health`` (no database).
``--scrape-every S`` polls every server's ``/metrics`` meanwhile.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

BASE_PORT = 18100


def _proc_cpu(pid: int) -> float:
    """CPU seconds of one process (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _tree_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and its children."""
    children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return sum(_proc_cpu(proc) for proc in [pid, *map(int, children)])


def _backends_cpu(database_url: str, database: str) -> dict[int, float]:
    """CPU seconds of each PostgreSQL backend on ``database`` (a local server)."""
    pids = subprocess.run(
        [
            "psql",
            database_url.rsplit("/", 1)[0] + "/postgres",
            "-Atc",
            f"SELECT pid FROM pg_stat_activity WHERE datname = '{database}'",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return {int(pid): _proc_cpu(int(pid)) for pid in pids}


class Server:
    def __init__(self, spec: str, index: int, database_url: str, base_port: int = BASE_PORT) -> None:
        tree, _, extra = spec.partition("@")
        self.label = spec
        self.tree = Path(tree).resolve()
        self.port = base_port + index
        self.db = f"cpu_compare_{os.getpid()}_{index}"
        base = database_url.rsplit("/", 1)[0]
        _psql(database_url, f"DROP DATABASE IF EXISTS {self.db}")
        _psql(database_url, f"CREATE DATABASE {self.db}")
        self.admin_url = database_url
        env = {k: v for k, v in os.environ.items() if not k.startswith(("QUEENADMIN_RECORD", "PYTEST"))}
        env.update(dict(pair.split("=", 1) for pair in extra.split("+") if pair))
        # Not the server's: the bench token's grants, comma-separated.
        grants = [g for g in env.pop("BENCH_GRANTS", "").split(",") if g]
        env.update(
            DATABASE_URL=f"{base}/{self.db}",
            DJANGO_SECRET_KEY="cpu-compare",
            QUEENADMIN_DATA_DIR=f"/tmp/cpu-compare-{os.getpid()}-{index}",
            PGOPTIONS="-c client_min_messages=warning",
        )
        python = str(self.tree / ".venv/bin/python")
        subprocess.run([python, "manage.py", "migrate", "-v0"], cwd=self.tree, env=env, check=True)
        created = subprocess.run(
            [
                python,
                "manage.py",
                "apitoken",
                "create",
                f"bench-{secrets.token_hex(3)}",
                *(arg for grant in grants for arg in ("--grant", grant)),
            ],
            cwd=self.tree,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        self.token = created.stdout.split()[-1]
        self.process = subprocess.Popen(
            [python, "manage.py", "serve", "--port", str(self.port), "--workers", "1"],
            cwd=self.tree,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"{spec}: serve did not start")
            time.sleep(0.1)
        self.runs: list[tuple[float, float]] = []
        #: PostgreSQL backends' CPU per call, per run (us).
        self.backend_runs: list[float] = []

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
        _psql(self.admin_url, f"DROP DATABASE IF EXISTS {self.db}")


def _psql(database_url: str, sql: str) -> None:
    subprocess.run(["psql", database_url.rsplit("/", 1)[0] + "/postgres", "-qc", sql], check=True, capture_output=True)


def _calls(server: Server, work: str, count: int, seed: int) -> None:
    headers = {"Authorization": f"Bearer {server.token}"}
    with httpx.Client(base_url=f"{server.url}/api/v1", headers=headers) as client:
        version: int | None = None
        for n in range(count):
            key = f"k{seed}-{n % 100}"
            if work == "put":
                op = {"op": "put", "ns": "bench", "key": key, "value": {"n": n}, "forever": True}
                answer = client.post("/kv", json={"operations": [op]})
            elif work == "cas":
                # A compare-and-set at the version the last one answered;
                # the first is a blind put (the key may be left by a round).
                op = {"op": "put", "ns": "bench", "key": f"cas{seed}", "value": {"n": n}, "forever": True}
                if version is not None:
                    op["expect"] = version
                answer = client.post("/kv", json={"operations": [op]})
                if answer.status_code >= 300:
                    raise RuntimeError(f"{server.label}: {answer.status_code} {answer.text[:200]}")
                result = answer.json()["results"][0]
                if not result["applied"]:
                    raise RuntimeError(f"{server.label}: compare-and-set refused: {result}")
                version = result["version"]
            elif work == "get":
                answer = client.post("/kv", json={"operations": [{"op": "get", "ns": "bench", "key": key}]})
            elif work == "push":
                item = {"queue": "bench", "partition": f"p{seed}", "payload": {"n": n}}
                answer = client.post("/push", json={"items": [item]})
            elif work == "lock":
                name = f"bench-{seed}"
                acquire = client.post(
                    "/locks", json={"operations": [{"op": "acquire", "name": name, "ttlSeconds": 30}]}
                )
                token = acquire.json()["results"][0]["token"]
                release = {"op": "release", "name": name, "token": token}
                answer = client.post("/locks", json={"operations": [release]})
            elif work == "health":
                answer = httpx.get(f"{server.url}/health")
            else:
                raise SystemExit(f"unknown work {work}")
            if answer.status_code >= 300:
                raise RuntimeError(f"{server.label}: {answer.status_code} {answer.text[:200]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trees", nargs="+", help="checkout[@ENV=VALUE+ENV=VALUE], the first is the baseline")
    parser.add_argument("--work", default="put")
    parser.add_argument("--calls", type=int, default=3000, help="calls per server per round")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--scrape-every", type=float, default=0.0)
    parser.add_argument(
        "--base-port", type=int, default=BASE_PORT, help="the first server's port (another run may hold the default)"
    )
    args = parser.parse_args()
    database_url = os.environ.get("DATABASE_URL", "")
    if not database_url.startswith("postgres"):
        sys.exit("set DATABASE_URL=postgresql://... (the benchmark runs on PostgreSQL)")

    servers: list[Server] = []
    stop = threading.Event()
    try:
        for index, spec in enumerate(args.trees):
            servers.append(Server(spec, index, database_url, args.base_port))

        def scrape(server: Server) -> None:
            while not stop.wait(args.scrape_every):
                httpx.get(f"{server.url}/metrics", headers={"Authorization": f"Bearer {server.token}"}, timeout=10)

        if args.scrape_every > 0:
            for server in servers:
                threading.Thread(target=scrape, args=(server,), daemon=True).start()
        per_thread = max(1, args.calls // args.concurrency)
        with ThreadPoolExecutor(args.concurrency) as pool:
            for round_ in range(args.rounds):
                for server in servers if round_ % 2 == 0 else list(reversed(servers)):
                    list(pool.map(lambda seed, s=server: _calls(s, args.work, 30, seed), range(args.concurrency)))
                    backends = _backends_cpu(database_url, server.db)
                    before, began = _tree_cpu(server.process.pid), time.monotonic()
                    list(
                        pool.map(lambda seed, s=server: _calls(s, args.work, per_thread, seed), range(args.concurrency))
                    )
                    elapsed = time.monotonic() - began
                    calls = per_thread * args.concurrency * (2 if args.work == "lock" else 1)
                    server.runs.append(((_tree_cpu(server.process.pid) - before) / calls * 1e6, calls / elapsed))
                    # Backends that left meanwhile are not counted; a pool
                    # of long-lived connections barely changes.
                    after = _backends_cpu(database_url, server.db)
                    spent = sum(cpu - backends.get(pid, 0.0) for pid, cpu in after.items())
                    server.backend_runs.append(spent / calls * 1e6)
    finally:
        stop.set()
        for server in servers:
            server.stop()

    load = os.getloadavg()[0]
    scraped = f"every {args.scrape_every:g} s" if args.scrape_every else "never"
    print(
        f"\n{time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, work {args.work}, {args.rounds} rounds x "
        f"{args.calls} calls at concurrency {args.concurrency}, /metrics scraped "
        f"{scraped}, load average {load:.1f}\n"
    )
    print("| checkout | CPU us/call (median) | runs | calls/s (median) | CPU vs first |")
    print("|---|---|---|---|---|")
    first = statistics.median(cpu for cpu, _ in servers[0].runs)
    for server in servers:
        cpus = [cpu for cpu, _ in server.runs]
        median: Any = statistics.median(cpus)
        rate = statistics.median(rate for _, rate in server.runs)
        runs = ", ".join(f"{cpu:.0f}" for cpu in cpus)
        print(f"| {server.label} | {median:.0f} | {runs} | {rate:.0f} | {median / first:.2f}x |")
    print("\nPostgreSQL backends of each server's database, and the sum:\n")
    print("| checkout | backends us/call (median) | runs | server + backends (median) | sum vs first |")
    print("|---|---|---|---|---|")
    sums = [[cpu + pg for (cpu, _), pg in zip(server.runs, server.backend_runs, strict=True)] for server in servers]
    first_sum = statistics.median(sums[0])
    for server, total in zip(servers, sums, strict=True):
        pg_median = statistics.median(server.backend_runs)
        runs = ", ".join(f"{pg:.0f}" for pg in server.backend_runs)
        both = statistics.median(total)
        print(f"| {server.label} | {pg_median:.0f} | {runs} | {both:.0f} | {both / first_sum:.2f}x |")


if __name__ == "__main__":
    main()
