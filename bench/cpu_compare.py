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
operation against a token without grants), and ``BENCH_WORKERS=N`` serves
it with ``--workers N`` (a worker's CPU is counted with its parent's), and
``BENCH_JWT=1`` serves it as a JWT-enabled Queen broker (``JWT_ENABLED``,
an HS256 ``JWT_SECRET``) and calls it with a read-write JWT instead of an
API token (``. .@BENCH_JWT=1``: the cost of a JWT beside our token). Then, for
``--rounds`` rounds, each server in turn (the order alternating per round)
takes ``--calls`` calls from ``--concurrency`` Python client threads after a
short warm-up, and the CPU its process tree used is read from ``/proc``.
Printed: per checkout the median CPU per call and calls/s, and the ratio of
each median to the first checkout's. The shared machine's speed changes from
minute to minute; alternating the servers within one run is what makes the
ratios comparable, not the absolute figures.

``--work``: ``put`` (one KV put), ``cas`` (a put with ``expect``: the
version the last one answered), ``get`` (one KV get), ``push`` (one message),
``lock`` (acquire + release of a lock: two calls), ``health`` (no database; on the kept-alive connection, like the others),
``popack`` (pop 1 message and ack it: two calls, as the queen client's
``batch(1).wait(False).pop()`` and ``ack``, from a queue of 16 partitions
filled before the round), ``popack100`` (pop 100 and ack them in one
``/ack/batch`` call; per message), ``push1000`` (1,000 messages to one of
16 partitions, each with a transactionId, as the official client sends
them). Besides the server's CPU, its
database's PostgreSQL backends' CPU is read from ``/proc`` too, and the
server's peak RSS (the largest ``VmHWM`` of its processes, after the last round).
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
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

#: The first server's port (``--base-port``, or ``CPU_COMPARE_PORT``): runs side by side need their own.
BASE_PORT = int(os.environ.get("CPU_COMPARE_PORT", "18100"))
#: What one call of ``--work`` counts as: two calls for ``lock`` (acquire,
#: release), 100 messages for ``popack100``.
PER_CALL = {"lock": 2, "popack100": 100}


def _proc_cpu(pid: int) -> float:
    """CPU seconds of process ``pid`` (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _tree_peak_rss(pid: int) -> int:
    """The largest peak RSS (``VmHWM``, KiB) of ``pid`` and its children."""
    children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    peak = 0
    for proc in [pid, *map(int, children)]:
        try:
            status = Path(f"/proc/{proc}/status").read_text()
        except FileNotFoundError:
            continue
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                peak = max(peak, int(line.split()[1]))
    return peak


def _tree_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and its children."""
    children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return sum(_proc_cpu(proc) for proc in [pid, *map(int, children)])


def _jwt(secret: str) -> str:
    """A read-write HS256 JWT good for a day, as an identity provider would sign it."""
    import jwt

    now = int(time.time())
    return jwt.encode({"sub": "bench", "role": "read-write", "iat": now, "exp": now + 86400}, secret, "HS256")


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
        # Not the server's either: ``serve --workers`` (1 unless given).
        workers = env.pop("BENCH_WORKERS", "1")
        # Not the server's: call it with a JWT (and make it verify them).
        jwt_secret = secrets.token_urlsafe(48) if env.pop("BENCH_JWT", "") else None
        if jwt_secret is not None:
            env.update(JWT_ENABLED="true", JWT_SECRET=jwt_secret, JWT_ALGORITHM="HS256")
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
        self.token = created.stdout.split()[-1] if jwt_secret is None else _jwt(jwt_secret)
        self.process = subprocess.Popen(
            [python, "manage.py", "serve", "--port", str(self.port), "--workers", workers],
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
        self.pg_runs: list[float] = []
        self.peak_rss = 0

    def pg_cpu(self) -> float:
        """CPU seconds of the PostgreSQL backends connected to this server's database."""
        out = subprocess.run(
            [
                "psql",
                self.admin_url.rsplit("/", 1)[0] + "/postgres",
                "-Atc",
                f"SELECT pid FROM pg_stat_activity WHERE datname = '{self.db}'",
            ],
            capture_output=True,
            text=True,
        ).stdout.split()
        return sum(_proc_cpu(int(pid)) for pid in out)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
        _psql(self.admin_url, f"DROP DATABASE IF EXISTS {self.db}")


def _psql(database_url: str, sql: str) -> None:
    subprocess.run(["psql", database_url.rsplit("/", 1)[0] + "/postgres", "-qc", sql], check=True, capture_output=True)


#: Partitions of the ``popack`` queue.
POP_PARTITIONS = 16


def _prefill(server: Server, work: str, count: int) -> None:
    """Messages for ``count`` pops of ``work`` (``popack``, ``popack100``), 1,000 per push."""
    if not work.startswith("popack"):
        return
    total = count * (100 if work == "popack100" else 1)
    headers = {"Authorization": f"Bearer {server.token}"}
    with httpx.Client(base_url=f"{server.url}/api/v1", headers=headers, timeout=120) as client:
        for first in range(0, total, 1000):
            items = [
                {"queue": "bench-pop", "partition": f"p{n % POP_PARTITIONS}", "payload": {"n": n, "pad": "x" * 100}}
                for n in range(first, min(total, first + 1000))
            ]
            client.post("/push", json={"items": items}).raise_for_status()


def _popack(client: httpx.Client, batch: int) -> httpx.Response:
    """Pop ``batch`` (as the queen client does) and ack them; an empty pop tries again."""
    query = {"autopilot": "true", "batch": str(batch), "wait": "false", "timeout": "30000"}
    while True:
        popped = client.get("/pop/queue/bench-pop", params=query)
        if popped.status_code == 200:
            break
        if popped.status_code != 204:
            return popped
        time.sleep(0.005)  # every partition leased this instant
    acks = [
        {
            "transactionId": m["transactionId"],
            "partitionId": m["partitionId"],
            "leaseId": m["leaseId"],
            "status": "completed",
        }
        for m in popped.json()["messages"]
    ]
    if batch == 1:
        return client.post("/ack", json=acks[0])
    return client.post("/ack/batch", json={"acknowledgments": acks})


def _calls(server: Server, work: str, count: int, seed: int) -> None:
    headers = {"Authorization": f"Bearer {server.token}"}
    version: int | None = None
    with httpx.Client(base_url=f"{server.url}/api/v1", headers=headers) as client:
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
            elif work == "push1000":
                partition = f"p{(seed * 7 + n) % 16}"
                items = [
                    {
                        "queue": "bench",
                        "partition": partition,
                        "payload": {"n": k, "pad": "x" * 60},
                        "transactionId": str(uuid.uuid4()),
                    }
                    for k in range(1000)
                ]
                answer = client.post("/push", json={"items": items})
            elif work == "lock":
                name = f"bench-{seed}"
                acquire = client.post(
                    "/locks", json={"operations": [{"op": "acquire", "name": name, "ttlSeconds": 30}]}
                )
                token = acquire.json()["results"][0]["token"]
                release = {"op": "release", "name": name, "token": token}
                answer = client.post("/locks", json={"operations": [release]})
            elif work in ("popack", "popack100"):
                answer = _popack(client, 100 if work == "popack100" else 1)
            elif work == "health":
                # On the kept-alive connection, as the API calls: a new
                # connection per call measured the client's TLS context.
                answer = client.get(f"{server.url}/health")
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
    parser.add_argument("--base-port", type=int, default=BASE_PORT, help="the first server's port (then +1...)")
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
        warm = 3 if args.work == "popack100" else 2 if args.work == "push1000" else 30
        with ThreadPoolExecutor(args.concurrency) as pool:
            for round_ in range(args.rounds):
                for server in servers if round_ % 2 == 0 else list(reversed(servers)):
                    _prefill(server, args.work, (warm + per_thread) * args.concurrency)
                    list(pool.map(lambda seed, s=server: _calls(s, args.work, warm, seed), range(args.concurrency)))
                    before, began = _tree_cpu(server.process.pid), time.monotonic()
                    pg_before = server.pg_cpu()
                    list(
                        pool.map(lambda seed, s=server: _calls(s, args.work, per_thread, seed), range(args.concurrency))
                    )
                    elapsed = time.monotonic() - began
                    calls = per_thread * args.concurrency * PER_CALL.get(args.work, 1)
                    cpu = (_tree_cpu(server.process.pid) - before) / calls * 1e6
                    server.runs.append((cpu, calls / elapsed))
                    server.pg_runs.append((server.pg_cpu() - pg_before) / calls * 1e6)
                    server.peak_rss = _tree_peak_rss(server.process.pid)
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
    print(
        "| checkout | CPU us/call (median) | runs | calls/s (median) | CPU vs first | PostgreSQL us/call (runs) | peak RSS MiB |"
    )
    print("|---|---|---|---|---|---|---|")
    first = statistics.median(cpu for cpu, _ in servers[0].runs)
    for server in servers:
        cpus = [cpu for cpu, _ in server.runs]
        median: Any = statistics.median(cpus)
        rate = statistics.median(rate for _, rate in server.runs)
        runs = ", ".join(f"{cpu:.0f}" for cpu in cpus)
        pg = f"{statistics.median(server.pg_runs):.0f} ({', '.join(f'{c:.0f}' for c in server.pg_runs)})"
        print(
            f"| {server.label} | {median:.0f} | {runs} | {rate:.0f} | {median / first:.2f}x | {pg} | {server.peak_rss / 1024:.0f} |"
        )


if __name__ == "__main__":
    main()
