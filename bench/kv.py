"""KV speed benchmark: the real HTTP stack against raw psycopg, side by side.

Run on demand (not part of CI)::

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test .venv/bin/python bench/kv.py

It creates a scratch PostgreSQL database, starts ``manage.py serve`` on it
(the production entry point: uvicorn, a2wsgi, Django), makes an API token,
then for every cell (single-op ``put`` calls and 100-op ``put`` batches, at
each concurrency) runs, interleaved and in the same session:

- ``http``: ``POST /api/v1/kv`` through the server, load from Debian's
  ``wrk`` replaying pre-built JSON bodies (so the load generator costs
  little of the 2 cores), or from a Python client when ``wrk`` is missing;
- ``raw``: psycopg in one process per connection doing the same upserts on
  the same table with the same advisory-lock SQL the domain uses: one
  autocommit statement per single op, and one transaction per 100-op batch.

Each cell runs ``--runs`` times after a warm-up; the table shows medians of
ops/s and of p50/p99 call latency, the HTTP/raw ratio of ops/s, and the
1-minute load average sampled before each run (the box is shared).

``--pooler`` (issue 25) compares the server with itself instead: a second
``serve`` on a database of its own through a PgBouncer in transaction
pooling (bench/pooler.py), and every cell runs on both, interleaved:
``http`` directly on PostgreSQL, ``pooled`` through PgBouncer, and their
ratio (no raw side).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import multiprocessing
import os
import random
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
NAMESPACE = "bench"
RAW_NAMESPACE = "benchraw"
KEYSPACE = 10_000
TABLE = "queenadmin_kventry"
SEQUENCE = "queenadmin_kv_version"
ADVISORY_CLASS = 0x51AD

# The domain's single-put statement (domain/kv/store/postgres.py, PostgresStore.put_fast).
SINGLE_SQL = (
    "WITH lk AS (SELECT pg_advisory_xact_lock(%s, hashtext(%s)) AS held) "
    f"INSERT INTO {TABLE} (namespace, key, value_json, version, expires_at, created_at, updated_at) "
    f"SELECT %s, %s, %s, nextval('{SEQUENCE}'), NULL, %s, %s FROM lk "
    "ON CONFLICT (namespace, key) DO UPDATE SET "
    "value_json = excluded.value_json, version = excluded.version, "
    "expires_at = excluded.expires_at, updated_at = excluded.updated_at "
    "RETURNING version"
)
# A batch, set-based: sorted per-key advisory locks in one statement, then
# one multi-row upsert drawing each version after the locks are held.
BATCH_LOCK_SQL = (
    "SELECT count(pg_advisory_xact_lock(%s, h)) FROM "
    "(SELECT DISTINCT hashtext(n) AS h FROM unnest(%s::text[]) AS n ORDER BY 1) AS s"
)
BATCH_UPSERT_SQL = (
    f"INSERT INTO {TABLE} (namespace, key, value_json, version, expires_at, created_at, updated_at) "
    f"SELECT %s, k, v, nextval('{SEQUENCE}'), NULL, %s, %s FROM unnest(%s::text[], %s::text[]) AS u(k, v) "
    "ON CONFLICT (namespace, key) DO UPDATE SET "
    "value_json = excluded.value_json, version = excluded.version, "
    "expires_at = excluded.expires_at, updated_at = excluded.updated_at "
    "RETURNING version"
)


# --------------------------------------------------------------------------
# Workload: the same keys and values for both sides


def _value(rng: random.Random) -> dict[str, Any]:
    return {"n": rng.randrange(1_000_000), "s": "hello world"}


def make_calls(batch: int, count: int, seed: int) -> list[list[tuple[str, dict[str, Any]]]]:
    """``count`` calls of ``batch`` distinct random keys each."""
    rng = random.Random(seed)
    calls = []
    for _ in range(count):
        keys = rng.sample(range(KEYSPACE), batch)
        calls.append([(f"k{k}", _value(rng)) for k in keys])
    return calls


def call_body(call: list[tuple[str, dict[str, Any]]]) -> str:
    ops = [{"op": "put", "ns": NAMESPACE, "key": k, "value": v, "forever": True} for k, v in call]
    return json.dumps({"operations": ops}, separators=(",", ":"))


# --------------------------------------------------------------------------
# Results


@dataclass
class Run:
    calls_per_s: float
    p50_ms: float
    p99_ms: float
    errors: int
    load: float
    generator: str
    #: CPU per call (µs) of the serve process tree and of our database's
    #: PostgreSQL backends; cores used by the load generator and by anything
    #: else on the machine (other people's work: the noise) during the run.
    srv_us: float = 0.0
    pg_us: float = 0.0
    #: PgBouncer's CPU per call (``--pooler``, the pooled side).
    bouncer_us: float = 0.0
    gen_cores: float = 0.0
    foreign_cores: float = 0.0


@dataclass
class Cell:
    side: str  # http | raw | pooled
    batch: int
    conc: int
    runs: list[Run] = field(default_factory=list)

    def med(self, attr: str) -> float:
        return float(statistics.median(getattr(r, attr) for r in self.runs))

    @property
    def ops_per_s(self) -> float:
        return self.med("calls_per_s") * self.batch

    def spread(self) -> str:
        values = [r.calls_per_s * self.batch for r in self.runs]
        return f"{min(values):.0f}-{max(values):.0f}"


def loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


_TICK = os.sysconf("SC_CLK_TCK")


def _proc_ticks(pid: str) -> tuple[int, float]:
    """(parent pid, utime + stime in seconds) of one process, or (-1, 0)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return -1, 0.0
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICK


class CpuMeter:
    """CPU seconds of: the whole machine, the server tree, our PG backends."""

    def __init__(self, server_pid: int, db_name: str) -> None:
        self.server_pid = server_pid
        self.db_name = db_name.encode()

    def snapshot(self) -> tuple[float, dict[int, float], dict[int, float], float]:
        with open("/proc/stat") as f:
            parts = [int(x) for x in f.readline().split()[1:]]
        busy = (sum(parts[:8]) - parts[3] - parts[4]) / _TICK  # minus idle and iowait
        parents: dict[int, int] = {}
        cpu: dict[int, float] = {}
        pg: dict[int, float] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            ppid, seconds = _proc_ticks(entry)
            parents[int(entry)] = ppid
            cpu[int(entry)] = seconds
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if cmdline.startswith(b"postgres: ") and self.db_name in cmdline:
                pg[int(entry)] = seconds
        server: dict[int, float] = {}
        for pid, seconds in cpu.items():
            walk = pid
            while walk > 1 and walk != self.server_pid:
                walk = parents.get(walk, -1)
            if walk == self.server_pid:
                server[pid] = seconds
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return busy, server, pg, children.ru_utime + children.ru_stime


def _cpu_of(pid: int) -> float:
    return _proc_ticks(str(pid))[1]


def _grown(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds gained by the processes alive at the end."""
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(q * len(sorted_values)) - 1))
    return sorted_values[index]


# --------------------------------------------------------------------------
# The server under test


@dataclass
class Server:
    url: str
    token: str
    db_url: str
    process: subprocess.Popen[bytes]
    log_path: Path


@contextlib.contextmanager
def serve(base_url: str, workers: int | None, extra_env: dict[str, str]) -> Iterator[Server]:
    """The test suite's ``run_server`` on a scratch database of ``base_url``'s server.

    ``workers=None``: ``QUEENADMIN_WORKERS`` or 1 (not serve's own default).
    """
    from tests.conftest import run_server

    if base_url.startswith("postgres"):
        os.environ["DATABASE_URL"] = base_url
    else:  # --sqlite: serve's embedded default, a file in a scratch folder
        os.environ.pop("DATABASE_URL", None)
    count = (
        workers
        if workers is not None
        else int(extra_env.get("QUEENADMIN_WORKERS", os.environ.get("QUEENADMIN_WORKERS", "1")))
    )
    with run_server(extra_env=extra_env, workers=count) as live:
        yield Server(live.url, live.token, live.env.get("DATABASE_URL", "sqlite:///"), live.process, live.log_path)


def _drop_template() -> None:
    """The migrated database the servers' databases were copied from
    (pytest drops it at the end of a session; a benchmark has none)."""
    if "tests.conftest" in sys.modules:
        sys.modules["tests.conftest"].drop_live_template()


def server_check(server: Server, body: str) -> None:
    """One call by hand: the bodies are accepted and every put applies."""
    host, port = server.url.rsplit("/", 1)[-1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("POST", "/api/v1/kv", body=body.encode(), headers=_headers(server.token))
    response = conn.getresponse()
    data = json.loads(response.read())
    if response.status != 200 or not all(r.get("applied") for r in data["results"]):
        raise RuntimeError(f"unexpected answer {response.status}: {str(data)[:300]}")


def _headers(token: str) -> dict[str, str]:
    return {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}


# --------------------------------------------------------------------------
# HTTP load: wrk, or a Python client


_LUA = """
local bodies = {}
local f = io.open("%(bodies)s", "r")
for line in f:lines() do bodies[#bodies + 1] = line end
f:close()
local n = #bodies
local i = 0
wrk.method = "POST"
wrk.path = "/api/v1/kv"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer %(token)s"
function setup(thread) end
function init(args)
  i = math.random(0, n - 1)
end
function request()
  i = i %% n + 1
  return wrk.format(nil, nil, nil, bodies[i])
end
"""

_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0, "m": 60000.0}


def _ms(text: str) -> float:
    match = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text)
    if not match:
        raise ValueError(text)
    return float(match.group(1)) * _UNITS[match.group(2)]


def wrk_run(server: Server, script: Path, conc: int, seconds: float) -> Run:
    load = loadavg()
    cmd = [
        "wrk",
        "-t1",
        f"-c{conc}",
        f"-d{max(1, round(seconds))}s",
        "--latency",
        "--timeout",
        "10s",
        "-s",
        str(script),
    ]
    out = subprocess.run(
        [*cmd, server.url + "/api/v1/kv"], check=True, capture_output=True, text=True, timeout=seconds + 60
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    p50 = _ms(re.search(r"\s50%\s+(\S+)", out).group(1))  # type: ignore[union-attr]
    p99 = _ms(re.search(r"\s99%\s+(\S+)", out).group(1))  # type: ignore[union-attr]
    errors = 0
    for pattern in (r"Non-2xx or 3xx responses:\s+(\d+)", r"Socket errors:.*?(\d+).*?(\d+).*?(\d+).*?(\d+)"):
        match = re.search(pattern, out)
        if match:
            errors += sum(int(g) for g in match.groups())
    return Run(rps, p50, p99, errors, load, "wrk")


def _py_client(args: tuple[str, int, str, list[str], float, float]) -> tuple[int, int, list[float], float]:
    host, port, token, bodies, start_at, seconds = args
    conn = http.client.HTTPConnection(host, port, timeout=30)
    headers = _headers(token)
    payloads = [b.encode() for b in bodies]
    random.shuffle(payloads)
    latencies: list[float] = []
    errors = 0
    i = 0
    while time.time() < start_at:
        time.sleep(0.001)
    end = start_at + seconds
    began = time.time()
    while time.time() < end:
        now = time.perf_counter()
        conn.request("POST", "/api/v1/kv", body=payloads[i % len(payloads)], headers=headers)
        response = conn.getresponse()
        response.read()
        latencies.append((time.perf_counter() - now) * 1000)
        if response.status != 200:
            errors += 1
        i += 1
    return i, errors, latencies, i / max(1e-3, end - began)


def python_run(server: Server, bodies: list[str], conc: int, seconds: float) -> Run:
    """Fallback load generator: one process per connection (costs CPU)."""
    load = loadavg()
    host, port = server.url.rsplit("/", 1)[-1].split(":")
    start_at, ctx = _start_time(conc), multiprocessing.get_context("spawn")
    with ctx.Pool(conc) as pool:
        pending = pool.map_async(_py_client, [(host, int(port), server.token, bodies, start_at, seconds)] * conc)
        parts = pending.get(timeout=seconds + 120)
    latencies = sorted(x for p in parts for x in p[2])
    return Run(
        sum(p[3] for p in parts),  # each client's rate over its own window
        percentile(latencies, 0.50),
        percentile(latencies, 0.99),
        sum(p[1] for p in parts),
        load,
        "python",
    )


# --------------------------------------------------------------------------
# Raw psycopg: the same upserts without HTTP or Django


def _start_time(conc: int) -> float:
    """When the clients start together: after every one of them is ready.

    Spawned, not forked: forking a process that has threads (the previous
    pool's handlers) can leave a child stuck on a lock it copied (seen here:
    one run hung for minutes). Spawning 16 interpreters takes a second or two.
    """
    return time.time() + 2.0 + 0.15 * conc


def _raw_client(
    args: tuple[str, int, list[list[tuple[str, str]]], float, float],
) -> tuple[int, list[float], float, float]:
    db_url, batch, calls, start_at, seconds = args
    # psycopg defaults: server-side binding, prepared after 5 executions. A
    # lock timeout turns a stuck run into an error instead of a hang.
    conn = psycopg.connect(db_url, autocommit=True, connect_timeout=10, options="-c lock_timeout=30s")
    backend = str(conn.execute("SELECT pg_backend_pid()").fetchone()[0])  # type: ignore[index]
    backend_cpu = _proc_ticks(backend)[1]
    random.shuffle(calls)
    latencies: list[float] = []
    i = 0
    while time.time() < start_at:
        time.sleep(0.001)
    end = start_at + seconds
    began = time.time()
    while time.time() < end:
        call = calls[i % len(calls)]
        begin = time.perf_counter()
        stamp = datetime.now(UTC)
        if batch == 1:
            key, value = call[0]
            conn.execute(
                SINGLE_SQL,
                [ADVISORY_CLASS, f"{RAW_NAMESPACE}/{key}", RAW_NAMESPACE, key, value, stamp, stamp],
            ).fetchone()
        else:
            keys = [k for k, _ in call]
            values = [v for _, v in call]
            with conn.transaction():
                conn.execute(BATCH_LOCK_SQL, [ADVISORY_CLASS, [f"{RAW_NAMESPACE}/{k}" for k in keys]]).fetchone()
                conn.execute(BATCH_UPSERT_SQL, [RAW_NAMESPACE, stamp, stamp, keys, values]).fetchall()
        latencies.append((time.perf_counter() - begin) * 1000)
        i += 1
    # The backend exits with the connection, before the run's last CPU
    # snapshot, so each client reports its own backend's CPU.
    backend_cpu = _proc_ticks(backend)[1] - backend_cpu
    conn.close()
    return i, latencies, backend_cpu, i / max(1e-3, end - began)


def raw_run(db_url: str, calls: list[list[tuple[str, dict[str, Any]]]], conc: int, seconds: float) -> Run:
    load = loadavg()
    batch = len(calls[0])
    prepared = [[(k, json.dumps(v, separators=(",", ":"))) for k, v in call] for call in calls]
    start_at, ctx = _start_time(conc), multiprocessing.get_context("spawn")
    with ctx.Pool(conc) as pool:
        pending = pool.map_async(_raw_client, [(db_url, batch, prepared, start_at, seconds)] * conc)
        parts = pending.get(timeout=seconds + 120)
    done = sum(p[0] for p in parts)
    latencies = sorted(x for p in parts for x in p[1])
    run = Run(sum(p[3] for p in parts), percentile(latencies, 0.50), percentile(latencies, 0.99), 0, load, "psycopg")
    run.pg_us = sum(p[2] for p in parts) / max(1, done) * 1e6
    return run


# --------------------------------------------------------------------------
# Main


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.2f}"


def run_cells(
    cells: list[Any],
    one: Callable[[Any, float], Any],
    warmup: float,
    seconds: float,
    runs: int,
    line: Callable[[int, Any, Any], str],
) -> None:
    """A warm-up of every cell, then ``runs`` rounds of every cell in turn
    (interleaved, so drift in the machine's load falls on each side alike),
    each run appended to its cell and printed by ``line``."""
    if warmup > 0:
        for cell in cells:
            one(cell, warmup)
    for run_no in range(runs):
        for cell in cells:
            run = one(cell, seconds)
            cell.runs.append(run)
            print(line(run_no, cell, run), flush=True)


def print_table(cells: list[Cell], generator: str) -> None:
    def find(side: str, batch: int, conc: int) -> Cell:
        return next(c for c in cells if (c.side, c.batch, c.conc) == (side, batch, conc))

    head = (
        "| work | conc | HTTP ops/s (calls/s) | HTTP p50 / p99 ms | raw ops/s | raw p50 / p99 ms "
        "| HTTP / raw | HTTP CPU us/call serve + PG | raw PG us/call | HTTP runs ops/s | load avg (HTTP runs) | errors |"
    )
    print(head)
    print("|---" * (head.count("|") - 1) + "|")
    for batch, conc in sorted({(c.batch, c.conc) for c in cells}):
        h, r = find("http", batch, conc), find("raw", batch, conc)
        work = "put x1" if batch == 1 else f"put x{batch} batch"
        loads = "/".join(f"{run.load:.2f}" for run in h.runs)
        print(
            f"| {work} | {conc} | {_fmt(h.ops_per_s)} ({_fmt(h.med('calls_per_s'))}) "
            f"| {h.med('p50_ms'):.2f} / {h.med('p99_ms'):.2f} | {_fmt(r.ops_per_s)} "
            f"| {r.med('p50_ms'):.2f} / {r.med('p99_ms'):.2f} | {h.ops_per_s / r.ops_per_s:.1%} "
            f"| {h.med('srv_us'):,.0f} + {h.med('pg_us'):,.0f} | {r.med('pg_us'):,.0f} "
            f"| {h.spread()} | {loads} | {sum(run.errors for run in h.runs)} |"
        )
    print(f"\nHTTP load generator: {generator}. Medians of each cell's runs; latency is per call.")


def print_pooler_table(cells: list[Cell], generator: str) -> None:
    def find(side: str, batch: int, conc: int) -> Cell:
        return next(c for c in cells if (c.side, c.batch, c.conc) == (side, batch, conc))

    head = (
        "| work | conc | direct ops/s | through PgBouncer ops/s | PgBouncer / direct "
        "| direct p50 / p99 ms | PgBouncer p50 / p99 ms | CPU us/call direct serve + PG "
        "| CPU us/call PgBouncer serve + PG + bouncer | runs ops/s direct; PgBouncer | load avg | errors |"
    )
    print(head)
    print("|---" * (head.count("|") - 1) + "|")
    for batch, conc in sorted({(c.batch, c.conc) for c in cells}):
        d, p = find("http", batch, conc), find("pooled", batch, conc)
        work = "put x1" if batch == 1 else f"put x{batch} batch"
        loads = "/".join(f"{run.load:.2f}" for run in d.runs + p.runs)
        print(
            f"| {work} | {conc} | {_fmt(d.ops_per_s)} | {_fmt(p.ops_per_s)} | {p.ops_per_s / d.ops_per_s:.1%} "
            f"| {d.med('p50_ms'):.2f} / {d.med('p99_ms'):.2f} | {p.med('p50_ms'):.2f} / {p.med('p99_ms'):.2f} "
            f"| {d.med('srv_us'):,.0f} + {d.med('pg_us'):,.0f} "
            f"| {p.med('srv_us'):,.0f} + {p.med('pg_us'):,.0f} + {p.med('bouncer_us'):,.0f} "
            f"| {d.spread()}; {p.spread()} | {loads} | {sum(run.errors for run in d.runs + p.runs)} |"
        )
    print(f"\nHTTP load generator: {generator}. Medians of each cell's runs, the two sides interleaved.")


def _server_stack(env: dict[str, str]) -> str:
    """Which event loop and HTTP parser uvicorn's "auto" picks for the server."""
    code = (
        "import importlib.util as u;"
        "print(('uvloop' if u.find_spec('uvloop') else 'asyncio') + ' + ' "
        "+ ('httptools' if u.find_spec('httptools') else 'h11'))"
    )
    full = {**os.environ, **env}
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True).stdout.strip()


class Scraper:
    """GET /metrics every ``every`` seconds in a thread, as a Prometheus would."""

    def __init__(self, server: Server, every: float) -> None:
        import threading

        self.server, self.every = server, every
        self.scrapes = self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        host, port = self.server.url.rsplit("/", 1)[-1].split(":")
        while not self._stop.wait(self.every):
            conn = http.client.HTTPConnection(host, int(port), timeout=10)
            try:
                conn.request("GET", "/metrics", headers={"Authorization": f"Bearer {self.server.token}"})
                response = conn.getresponse()
                response.read()
                self.scrapes += 1
                self.failures += response.status != 200
            except OSError:
                self.failures += 1
            finally:
                conn.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def _on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # run the finally blocks: stop serve, drop the DB


def main() -> int:
    signal.signal(signal.SIGTERM, _on_sigterm)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds of warm-up before each cell's runs")
    parser.add_argument("--concurrency", default="1,16", help="comma-separated connection counts")
    parser.add_argument("--batch", default="1,100", help="comma-separated ops per call")
    parser.add_argument("--workers", type=int, default=None, help="serve --workers (default: serve's own)")
    parser.add_argument("--generator", choices=("auto", "wrk", "python"), default="auto")
    parser.add_argument("--only", choices=("both", "http", "raw"), default="both")
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="extra environment for the server (repeatable), e.g. QUEENADMIN_HTTP_THREADS=8",
    )
    parser.add_argument(
        "--scrape-every",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="GET /metrics this often while the cells run, as a Prometheus would (0: never)",
    )
    parser.add_argument(
        "--pooler",
        action="store_true",
        help="run every cell on a second server through PgBouncer in transaction pooling too (no raw side)",
    )
    parser.add_argument(
        "--sqlite",
        action="store_true",
        help="serve on SQLite instead (with --only http), e.g. to compare QUEENADMIN_SQLITE_SYNCHRONOUS",
    )
    args = parser.parse_args()

    base_url = "sqlite:///" if args.sqlite else os.environ.get("DATABASE_URL", DEFAULT_URL)
    if args.sqlite and args.only != "http":
        print("bench/kv.py --sqlite measures the server only: add --only http", file=sys.stderr)
        return 2
    if not args.sqlite and not base_url.startswith("postgres"):
        print("bench/kv.py needs PostgreSQL: DATABASE_URL=postgresql://... (or --sqlite --only http)", file=sys.stderr)
        return 2
    if args.pooler and args.sqlite:
        print("bench/kv.py --pooler runs on PostgreSQL", file=sys.stderr)
        return 2
    if args.pooler:
        import pooler

        pooler.prepare()
    generator = args.generator
    if generator == "auto":
        generator = "wrk" if shutil.which("wrk") else "python"
    extra_env = dict(item.split("=", 1) for item in args.env)
    concs = [int(c) for c in args.concurrency.split(",")]
    batches = [int(b) for b in args.batch.split(",")]
    sides = ["http", "raw"] if args.only == "both" else [args.only]
    if args.pooler:
        sides = ["http", "pooled"]

    tmp = Path(tempfile.mkdtemp(prefix="qa-bench-lua-"))
    workload: dict[int, list[list[tuple[str, dict[str, Any]]]]] = {}
    scripts: dict[tuple[str, int], Path] = {}
    bodies: dict[int, list[str]] = {}
    for batch in batches:
        workload[batch] = make_calls(batch, 2000 if batch == 1 else 300, seed=batch)
        bodies[batch] = [call_body(c) for c in workload[batch]]

    scraping = f"every {args.scrape_every:g} s" if args.scrape_every > 0 else "never"
    started = datetime.now(UTC)
    with contextlib.ExitStack() as stack:
        stack.callback(_drop_template)
        server = stack.enter_context(serve(base_url, args.workers, extra_env))
        servers = {"http": server, "raw": server}
        bouncer = None
        if args.pooler:
            import pooler

            bouncer = stack.enter_context(pooler.bouncer())
            workers = args.workers if args.workers is not None else int(os.environ.get("QUEENADMIN_WORKERS", "1"))
            live = stack.enter_context(pooler.pooled_server(bouncer, workers, extra_env))
            servers["pooled"] = Server(live.url, live.token, live.env["DATABASE_URL"], live.process, live.log_path)
        for batch in batches:
            body_file = tmp / f"bodies-{batch}.jsonl"
            body_file.write_text("\n".join(bodies[batch]) + "\n")
            # A script per server: each database minted its own token.
            for side in {"http", "pooled"} & set(sides):
                scripts[side, batch] = tmp / f"kv-{side}-{batch}.lua"
                scripts[side, batch].write_text(_LUA % {"bodies": body_file, "token": servers[side].token})
                server_check(servers[side], bodies[batch][0])
        cells = [Cell(side, b, c) for b in batches for c in concs for side in sides]

        meters = {
            side: CpuMeter(s.process.pid, s.db_url.rsplit("/", 1)[1]) for side, s in servers.items() if side in sides
        }
        scraper = Scraper(server, args.scrape_every) if args.scrape_every > 0 else None

        def one(cell: Cell, seconds: float) -> Run:
            meter, target = meters[cell.side], servers[cell.side]
            bouncer_cpu = _cpu_of(bouncer.pid) if bouncer is not None else 0.0
            before, started_at = meter.snapshot(), time.monotonic()
            if cell.side == "raw":
                run = raw_run(server.db_url, workload[cell.batch], cell.conc, seconds)
            elif generator == "wrk":
                run = wrk_run(target, scripts[cell.side, cell.batch], cell.conc, seconds)
            else:
                run = python_run(target, bodies[cell.batch], cell.conc, seconds)
            after, wall = meter.snapshot(), time.monotonic() - started_at
            busy, gen = after[0] - before[0], after[3] - before[3]
            # Per process, so one that exits (a connection past CONN_MAX_AGE)
            # loses its own CPU instead of making the sum negative.
            srv = _grown(before[1], after[1])
            pg = _grown(before[2], after[2])
            calls = max(1.0, run.calls_per_s * seconds)
            run.srv_us = srv / calls * 1e6
            if cell.side == "raw":
                pg = run.pg_us * calls / 1e6  # reported by the clients
            else:
                run.pg_us = pg / calls * 1e6
            bounced = 0.0
            if bouncer is not None:
                bounced = _cpu_of(bouncer.pid) - bouncer_cpu
                if cell.side == "pooled":
                    run.bouncer_us = bounced / calls * 1e6
            run.gen_cores = gen / wall
            run.foreign_cores = max(0.0, busy - srv - pg - gen - bounced) / wall
            return run

        def line(run_no: int, cell: Cell, run: Run) -> str:
            return (
                f"run {run_no + 1} {cell.side:6} put x{cell.batch:<3} c{cell.conc:<2} "
                f"{run.calls_per_s * cell.batch:9,.0f} ops/s  p50 {run.p50_ms:6.2f} ms  "
                f"p99 {run.p99_ms:7.2f} ms  srv {run.srv_us:6.0f} us/call  pg {run.pg_us:6.0f} us/call  "
                + (f"bouncer {run.bouncer_us:5.0f} us/call  " if cell.side == "pooled" else "")
                + f"gen {run.gen_cores:.2f}  foreign {run.foreign_cores:.2f} cores  "
                f"load {run.load:.2f}  errors {run.errors}"
            )

        run_cells([c for c in cells if c.side in sides], one, args.warmup, args.seconds, args.runs, line)
        if scraper is not None:
            scraper.stop()
            print(f"scraped /metrics {scraper.scrapes} times, {scraper.failures} failed", flush=True)
    shutil.rmtree(tmp, ignore_errors=True)

    print(
        f"\n{started:%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs, serve --workers "
        f"{args.workers if args.workers is not None else 'default'}, env {extra_env or '{}'}, "
        f"{args.runs} x {args.seconds:g} s per cell, "
        f"/metrics scraped {scraping}, {KEYSPACE} keys, values ~40 bytes, forever; "
        f"server stack {_server_stack(extra_env)}"
        + (
            ", pooled: PgBouncer 1.18 transaction pooling (.ci/pgbouncer), DATABASE_LISTEN_URL direct"
            if args.pooler
            else ""
        )
        + "\n"
    )
    if args.pooler:
        print_pooler_table(cells, generator)
    elif args.only == "both":
        print_table(cells, generator)
    return 0


if __name__ == "__main__":
    sys.exit(main())
