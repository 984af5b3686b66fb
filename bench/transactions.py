"""Guarded transactions per second: the real HTTP stack against raw psycopg.

Run on demand (not part of CI)::

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test .venv/bin/python bench/transactions.py

It creates a scratch PostgreSQL database, starts ``manage.py serve`` on it
(``tests.conftest.run_server``), makes an API token, and at each
concurrency runs, interleaved and in the same session:

- ``http``: ``POST /api/v1/transaction``, each one a guard (a required KV
  ``check`` of the client's lock permit at its token), one pushed message
  and one KV ``put``. Load from ``wrk`` with one thread per connection, so
  each connection has its own lock, partition and keys; the Lua script
  fills a pre-split body template with a fresh ``transactionId``, a key
  and a counter, and counts every answer that is not ``success: true``;
- ``raw``: psycopg, one process per connection, doing the same work in one
  transaction on the same tables: the guard as ``pg_advisory_xact_lock``
  on the permit's key then a SELECT of the permit row at its version, the
  push as lock partition row, insert message, update ``next_offset``, and
  the KV put as the domain's locked upsert (``store/postgres.py``).

Each client holds a lock of its own (acquired through ``POST /api/v1/locks``
before every run, for both sides), pushes to a partition of its own and
puts keys of its own, so the numbers measure the transaction path, not
contention. Every run is checked: the messages in the database must equal
the transactions the load generator saw committed.

The table shows medians of transactions/s and of p50/p99 latency, the
HTTP/raw ratio, CPU per transaction, and the 1-minute load average before
each run (the box is shared).
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import re
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import kv as kvb  # bench/kv.py: the server, CPU meter, wrk parsing (bench/ is sys.path[0] when a script here runs)
import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
LOCKS_NS = "queen-locks"
HTTP_QUEUE = "bench-out"
RAW_QUEUE = "bench-raw-out"
HTTP_NS = "bench"
RAW_NS = "benchraw"
#: KV keys per client; each transaction puts one of them, in turn.
KEYS_PER_CLIENT = 64
TABLE = "queenadmin_kventry"
SEQUENCE = "queenadmin_kv_version"
ADVISORY_CLASS = 0x51AD
PAYLOAD_PAD = "x" * 40

# The guard: the permit key's advisory lock, then its row at the token.
GUARD_LOCK_SQL = "SELECT pg_advisory_xact_lock(%s, hashtext(%s))"
GUARD_SELECT_SQL = (
    f"SELECT version FROM {TABLE} WHERE namespace = %s AND key = %s AND version = %s "
    "AND (expires_at IS NULL OR expires_at > %s)"
)
# The push (domain/queues/store/postgres.py: PostgresStore.lock_partitions,
# write_messages).
PUSH_LOCK_SQL = "SELECT next_offset FROM queenadmin_partition WHERE id = %s FOR NO KEY UPDATE"
PUSH_INSERT_SQL = (
    "INSERT INTO queenadmin_message"
    " (partition_id, msg_offset, transaction_id, message_id, payload, trace_id, created_at)"
    " VALUES (%s, %s, %s, %s, %s, NULL, %s)"
)
#: ``--raw-notify``: the long-poll wake-up the product's push sends (wakeups.py).
PUSH_NOTIFY_SQL = "SELECT pg_notify('queenadmin_queues', %s)"
PUSH_UPDATE_SQL = (
    "UPDATE queenadmin_partition SET next_offset = %s, retained_bytes = retained_bytes + %s,"
    " last_push_at = %s WHERE id = %s"
)
# The KV put: the domain's locked upsert (store/postgres.py, put_fast).
PUT_SQL = (
    "WITH lk AS (SELECT pg_advisory_xact_lock(%s, hashtext(%s)) AS held) "
    f"INSERT INTO {TABLE} (namespace, key, value_json, version, expires_at, created_at, updated_at) "
    f"SELECT %s, %s, %s, nextval('{SEQUENCE}'), NULL, %s, %s FROM lk "
    "ON CONFLICT (namespace, key) DO UPDATE SET "
    "value_json = excluded.value_json, version = excluded.version, "
    "expires_at = excluded.expires_at, updated_at = excluded.updated_at, "
    f"created_at = CASE WHEN {TABLE}.expires_at IS NULL OR {TABLE}.expires_at > %s "
    f"THEN {TABLE}.created_at ELSE excluded.created_at END "
    "RETURNING version"
)


@dataclass
class Cell:
    side: str  # http | raw
    conc: int
    runs: list[Any] = field(default_factory=list)

    def med(self, attr: str) -> float:
        return float(statistics.median(getattr(r, attr) for r in self.runs))

    def spread(self) -> str:
        values = [r.calls_per_s for r in self.runs]
        return f"{min(values):,.0f}-{max(values):,.0f}"


# --------------------------------------------------------------------------
# Setup through the API: locks, queues and partitions


def _post(server: Any, path: str, body: dict[str, Any]) -> Any:
    host, port = server.url.rsplit("/", 1)[-1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("POST", path, body=json.dumps(body).encode(), headers=kvb._headers(server.token))
        response = conn.getresponse()
        data = json.loads(response.read())
    finally:
        conn.close()
    if response.status not in (200, 201):
        raise RuntimeError(f"{path} answered {response.status}: {str(data)[:300]}")
    return data


def acquire_locks(server: Any, names: list[str]) -> list[int]:
    """One lock per client, for 10 minutes (longer than any run); the tokens."""
    ops = [{"op": "acquire", "name": name, "ttlSeconds": 600} for name in names]
    results = _post(server, "/api/v1/locks", {"operations": ops})["results"]
    if not all(r.get("acquired") for r in results):
        raise RuntimeError(f"a lock was not acquired: {results}")
    return [int(r["token"]) for r in results]


def release_locks(server: Any, names: list[str], tokens: list[int]) -> None:
    ops = [{"op": "release", "name": n, "token": t} for n, t in zip(names, tokens, strict=True)]
    _post(server, "/api/v1/locks", {"operations": ops})


def ensure_partitions(server: Any, queue: str, count: int) -> None:
    """Create ``queue`` and its partitions p0.. by pushing one message to each."""
    items = [
        {"queue": queue, "partition": f"p{i}", "payload": {"setup": True}, "transactionId": f"setup-{uuid.uuid4()}"}
        for i in range(count)
    ]
    _post(server, "/api/v1/push", {"items": items})


def partition_ids(db_url: str, queue: str) -> dict[str, int]:
    with psycopg.connect(db_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT p.name, p.id FROM queenadmin_partition p JOIN queenadmin_queue q ON q.id = p.queue_id"
            " WHERE q.name = %s",
            [queue],
        ).fetchall()
    return {name: int(pid) for name, pid in rows}


def message_count(db_url: str, queue: str) -> int:
    with psycopg.connect(db_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM queenadmin_message m JOIN queenadmin_partition p ON p.id = m.partition_id"
            " JOIN queenadmin_queue q ON q.id = p.queue_id WHERE q.name = %s",
            [queue],
        ).fetchone()
    assert row is not None
    return int(row[0])


def txn_body(lock: str, token: int, partition: str, txn_id: str, key: str, n: int) -> str:
    """One guarded transaction: guard, one push, one put (protocol 5)."""
    return json.dumps(
        {
            "operations": [
                {
                    "type": "push",
                    "items": [
                        {
                            "queue": HTTP_QUEUE,
                            "partition": partition,
                            "payload": {"n": n, "pad": PAYLOAD_PAD},
                            "transactionId": txn_id,
                        }
                    ],
                }
            ],
            "requiredLeases": [],
            "kv": [
                {"op": "check", "ns": LOCKS_NS, "key": f"{lock}#0", "expect": token, "required": True},
                {"op": "put", "ns": HTTP_NS, "key": key, "value": {"n": n, "s": "hello world"}, "forever": True},
            ],
        },
        separators=(",", ":"),
    )


def check_answer(server: Any, body: str) -> None:
    data = _post(server, "/api/v1/transaction", json.loads(body))
    if data.get("success") is not True:
        raise RuntimeError(f"the transaction did not commit: {str(data)[:400]}")


# --------------------------------------------------------------------------
# HTTP load: wrk, one thread per connection

# Markers in the body template that the script replaces per request.
_N, _TXN, _KEY = 987654321, "TXNIDXXXXXXXX", "KEYXXXXXXXX"

_LUA = """
local tokens = {%(tokens)s}
local locks = {%(locks)s}
local template = [==[%(template)s]==]
local run = "%(run)s"
local threads = {}
local next_id = 1

function setup(thread)
  thread:set("cid", next_id - 1)
  thread:set("lock", locks[next_id])
  thread:set("token", tokens[next_id])
  table.insert(threads, thread)
  next_id = next_id + 1
end

local parts
local n = 0
failures = 0
responses = 0

function init(args)
  -- The template split at its markers once; per request only concatenation.
  local body = template:gsub("LOCKNAME", lock):gsub("987654322", tostring(token)):gsub("PARTNAME", "p" .. cid)
  local a, b = body:find("%(n)s", 1, true)
  local c, d = body:find("%(txn)s", 1, true)
  local e, f = body:find("%(key)s", 1, true)
  local g, h = body:find("%(n)s", d, true)
  parts = {body:sub(1, a - 1), body:sub(b + 1, c - 1), body:sub(d + 1, e - 1), body:sub(f + 1, g - 1), body:sub(h + 1)}
  wrk.method = "POST"
  wrk.path = "/api/v1/transaction"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Authorization"] = "Bearer %(auth)s"
end

function request()
  n = n + 1
  local body = parts[1] .. n .. parts[2] .. run .. "-" .. cid .. "-" .. n .. parts[3]
    .. "c" .. cid .. "-" .. (n %% %(keys)d) .. parts[4] .. n .. parts[5]
  return wrk.format(nil, nil, nil, body)
end

function response(status, headers, body)
  responses = responses + 1
  if status ~= 200 or not body:find('"success":true', 1, true) then
    failures = failures + 1
  end
end

function done(summary, latency, requests)
  local failed, answered = 0, 0
  for _, thread in ipairs(threads) do
    failed = failed + thread:get("failures")
    answered = answered + thread:get("responses")
  end
  io.write(string.format("TXN answered %%d failed %%d\\n", answered, failed))
end
"""


def lua_script(server: Any, names: list[str], tokens: list[int], run_id: str) -> str:
    template = txn_body("LOCKNAME", 987654322, "PARTNAME", _TXN, _KEY, _N)
    assert template.count(str(_N)) == 2
    assert _TXN in template
    assert _KEY in template
    assert template.index(str(_N)) < template.index(_TXN) < template.index(_KEY)
    return _LUA % {
        "tokens": ",".join(str(t) for t in tokens),
        "locks": ",".join(f'"{n}"' for n in names),
        "template": template,
        "run": run_id,
        "n": _N,
        "txn": _TXN,
        "key": _KEY,
        "keys": KEYS_PER_CLIENT,
        "auth": server.token,
    }


def http_run(server: Any, script: Path, conc: int, seconds: float) -> tuple[Any, int, int]:
    """A ``kvb.Run``, the answers wrk read, and how many were not commits."""
    load = kvb.loadavg()
    cmd = ["wrk", f"-t{conc}", f"-c{conc}", f"-d{max(1, round(seconds))}s", "--latency", "--timeout", "10s"]
    out = subprocess.run(
        [*cmd, "-s", str(script), server.url + "/api/v1/transaction"],
        check=True,
        capture_output=True,
        text=True,
        timeout=seconds + 60,
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    p50 = kvb._ms(re.search(r"\s50%\s+(\S+)", out).group(1))  # type: ignore[union-attr]
    p99 = kvb._ms(re.search(r"\s99%\s+(\S+)", out).group(1))  # type: ignore[union-attr]
    answered, failed = (int(x) for x in re.search(r"TXN answered (\d+) failed (\d+)", out).groups())  # type: ignore[union-attr]
    errors = failed
    match = re.search(r"Socket errors:.*?(\d+).*?(\d+).*?(\d+).*?(\d+)", out)
    if match:
        errors += sum(int(g) for g in match.groups())
    return kvb.Run(rps, p50, p99, errors, load, "wrk"), answered, failed


# --------------------------------------------------------------------------
# Raw psycopg: the same statements in one transaction, no HTTP or Django


def _raw_client(args: tuple[str, int, str, int, int, str, float, bool], ready: Any, start: Any, out: Any) -> None:
    db_url, cid, lock, token, pid, run_id, seconds, notify = args
    # psycopg defaults: server-side binding, prepared after 5 executions.
    conn = psycopg.connect(db_url, connect_timeout=10, options="-c lock_timeout=30s")
    conn.autocommit = True
    backend = str(conn.execute("SELECT pg_backend_pid()").fetchone()[0])  # type: ignore[index]
    conn.autocommit = False
    permit = f"{lock}#0"
    permit_lock = f"{LOCKS_NS}/{permit}"
    latencies: list[float] = []
    done = failed = 0
    n = 0
    # Start together once every client is connected (spawning 16
    # interpreters takes seconds on a busy machine).
    ready.wait(timeout=120)
    while start.value == 0.0:
        time.sleep(0.001)
    while time.time() < start.value:
        time.sleep(0.001)
    backend_cpu = kvb._proc_ticks(backend)[1]
    client_cpu = time.process_time()
    end = start.value + seconds
    began = time.time()
    while time.time() < end:
        n += 1
        begin = time.perf_counter()
        now = datetime.now(UTC)
        payload = json.dumps({"n": n, "pad": PAYLOAD_PAD}, separators=(",", ":"))
        key = f"c{cid}-{n % KEYS_PER_CLIENT}"
        value = json.dumps({"n": n, "s": "hello world"}, separators=(",", ":"))
        with conn.transaction() as tx:
            # Push first, then KV: the product's apply order.
            offset = conn.execute(PUSH_LOCK_SQL, [pid]).fetchone()[0]  # type: ignore[index]
            conn.execute(PUSH_INSERT_SQL, [pid, offset, f"{run_id}-{cid}-{n}", str(uuid.uuid4()), payload, now])
            conn.execute(PUSH_UPDATE_SQL, [offset + 1, len(payload), now, pid])
            if notify:
                conn.execute(PUSH_NOTIFY_SQL, [RAW_QUEUE])
            conn.execute(GUARD_LOCK_SQL, [ADVISORY_CLASS, permit_lock])
            if conn.execute(GUARD_SELECT_SQL, [LOCKS_NS, permit, token, now]).fetchone() is None:
                failed += 1
                raise psycopg.Rollback(tx)
            conn.execute(PUT_SQL, [ADVISORY_CLASS, f"{RAW_NS}/{key}", RAW_NS, key, value, now, now, now]).fetchone()
        latencies.append((time.perf_counter() - begin) * 1000)
        done += 1
    client_cpu = time.process_time() - client_cpu
    backend_cpu = kvb._proc_ticks(backend)[1] - backend_cpu
    conn.close()
    committed = done - failed
    out.put((committed, failed, latencies, backend_cpu, committed / max(1e-3, end - began), client_cpu))


def raw_run(
    db_url: str, locks: list[str], tokens: list[int], pids: list[int], run_id: str, seconds: float, notify: bool
) -> Any:
    load = kvb.loadavg()
    conc = len(locks)
    # Spawned, not forked: see kv.py's _start_time.
    ctx = multiprocessing.get_context("spawn")
    ready, start, out = ctx.Barrier(conc + 1), ctx.Value("d", 0.0), ctx.Queue()
    procs = [
        ctx.Process(
            target=_raw_client,
            args=((db_url, i, locks[i], tokens[i], pids[i], run_id, seconds, notify), ready, start, out),
            daemon=True,
        )
        for i in range(conc)
    ]
    for proc in procs:
        proc.start()
    try:
        ready.wait(timeout=120)
        start.value = time.time() + 0.2
        parts = [out.get(timeout=seconds + 60) for _ in procs]
    finally:
        for proc in procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.terminate()
    done = sum(p[0] for p in parts)
    latencies = sorted(x for p in parts for x in p[2])
    run = kvb.Run(
        sum(p[4] for p in parts),
        kvb.percentile(latencies, 0.50),
        kvb.percentile(latencies, 0.99),
        sum(p[1] for p in parts),
        load,
        "psycopg",
    )
    run.pg_us = sum(p[3] for p in parts) / max(1, done) * 1e6
    # The clients' own CPU (Python, psycopg) per transaction: raw's "server".
    run.srv_us = sum(p[5] for p in parts) / max(1, done) * 1e6
    return run, done


# --------------------------------------------------------------------------
# Main


def print_table(cells: list[Cell]) -> None:
    def find(side: str, conc: int) -> Cell:
        return next(c for c in cells if (c.side, c.conc) == (side, conc))

    head = (
        "| conc | HTTP txn/s | HTTP p50 / p99 ms | raw txn/s | raw p50 / p99 ms | HTTP / raw "
        "| HTTP CPU us/txn serve + PG | raw CPU us/txn client + PG | HTTP runs txn/s | raw runs txn/s "
        "| load avg (HTTP runs) | failed |"
    )
    print(head)
    print("|---" * (head.count("|") - 1) + "|")
    for conc in sorted({c.conc for c in cells}):
        h, r = find("http", conc), find("raw", conc)
        loads = "/".join(f"{run.load:.2f}" for run in h.runs)
        print(
            f"| {conc} | {h.med('calls_per_s'):,.0f} | {h.med('p50_ms'):.2f} / {h.med('p99_ms'):.2f} "
            f"| {r.med('calls_per_s'):,.0f} | {r.med('p50_ms'):.2f} / {r.med('p99_ms'):.2f} "
            f"| {h.med('calls_per_s') / r.med('calls_per_s'):.1%} "
            f"| {h.med('srv_us'):,.0f} + {h.med('pg_us'):,.0f} | {r.med('srv_us'):,.0f} + {r.med('pg_us'):,.0f} "
            f"| {h.spread()} | {r.spread()} | {loads} | {sum(run.errors for run in h.runs + r.runs)} |"
        )


def main() -> int:
    signal.signal(signal.SIGTERM, kvb._on_sigterm)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds of warm-up per cell")
    parser.add_argument("--concurrency", default="1,16", help="comma-separated client counts")
    parser.add_argument("--workers", type=int, default=None, help="serve --workers (default: serve's own)")
    parser.add_argument("--only", choices=("both", "http", "raw"), default="both")
    parser.add_argument(
        "--raw-notify", action="store_true", help="raw also sends the push's pg_notify, as the product does"
    )
    parser.add_argument(
        "--env", action="append", default=[], metavar="NAME=VALUE", help="extra environment for the server"
    )
    args = parser.parse_args()

    base_url = os.environ.get("DATABASE_URL", DEFAULT_URL)
    if not base_url.startswith("postgres"):
        print("bench/transactions.py needs PostgreSQL: DATABASE_URL=postgresql://...", file=sys.stderr)
        return 2
    if not shutil.which("wrk"):
        print("bench/transactions.py needs wrk (apt-get install wrk)", file=sys.stderr)
        return 2
    extra_env = dict(item.split("=", 1) for item in args.env)
    concs = [int(c) for c in args.concurrency.split(",")]
    sides = ["http", "raw"] if args.only == "both" else [args.only]
    most = max(concs)
    tmp = Path(tempfile.mkdtemp(prefix="qa-bench-txn-"))
    started = datetime.now(UTC)
    cells = [Cell(side, c) for c in concs for side in ("http", "raw")]
    try:
        with kvb.serve(base_url, args.workers, extra_env) as server:
            ensure_partitions(server, HTTP_QUEUE, most)
            ensure_partitions(server, RAW_QUEUE, most)
            raw_pids = partition_ids(server.db_url, RAW_QUEUE)
            meter = kvb.CpuMeter(server.process.pid, server.db_url.rsplit("/", 1)[1])
            # Sanity: one transaction by hand commits.
            names = [f"txb-check-{secrets.token_hex(3)}"]
            tokens = acquire_locks(server, names)
            check_answer(server, txn_body(names[0], tokens[0], "p0", f"check-{uuid.uuid4()}", "c0-0", 0))
            release_locks(server, names, tokens)

            def one(cell: Cell, seconds: float) -> Any:
                run_id = secrets.token_hex(4)
                names = [f"txb-{cell.side}-{run_id}-{i}" for i in range(cell.conc)]
                tokens = acquire_locks(server, names)
                queue = HTTP_QUEUE if cell.side == "http" else RAW_QUEUE
                before_msgs = message_count(server.db_url, queue)
                before, started_at = meter.snapshot(), time.monotonic()
                if cell.side == "raw":
                    pids = [raw_pids[f"p{i}"] for i in range(cell.conc)]
                    run, committed = raw_run(server.db_url, names, tokens, pids, run_id, seconds, args.raw_notify)
                else:
                    script = tmp / f"txn-{run_id}.lua"
                    script.write_text(lua_script(server, names, tokens, run_id))
                    run, answered, failed = http_run(server, script, cell.conc, seconds)
                    committed = answered - failed
                after, wall = meter.snapshot(), time.monotonic() - started_at
                busy, gen = after[0] - before[0], after[3] - before[3]
                srv, pg = kvb._grown(before[1], after[1]), kvb._grown(before[2], after[2])
                calls = max(1.0, run.calls_per_s * seconds)
                if cell.side == "http":
                    run.srv_us = srv / calls * 1e6
                if cell.side == "raw":
                    pg = run.pg_us * calls / 1e6  # reported by the clients
                else:
                    run.pg_us = pg / calls * 1e6
                run.gen_cores = gen / wall
                run.foreign_cores = max(0.0, busy - srv - pg - gen) / wall
                # Every committed transaction left exactly one message. wrk
                # stops with up to one request per connection in flight: the
                # server may commit those without wrk reading the answer.
                landed = message_count(server.db_url, queue) - before_msgs
                slack = cell.conc if cell.side == "http" else 0
                if not committed <= landed <= committed + slack:
                    print(f"  MISMATCH {cell.side} c{cell.conc}: {landed} messages, {committed} commits", flush=True)
                    run.errors += 1
                release_locks(server, names, tokens)
                return run

            def line(run_no: int, cell: Cell, run: Any) -> str:
                return (
                    f"run {run_no + 1} {cell.side:4} c{cell.conc:<2} {run.calls_per_s:7,.0f} txn/s  "
                    f"p50 {run.p50_ms:6.2f} ms  p99 {run.p99_ms:7.2f} ms  {'srv' if cell.side == 'http' else 'cli'} {run.srv_us:6.0f} us/txn  "
                    f"pg {run.pg_us:5.0f} us/txn  gen {run.gen_cores:.2f}  foreign {run.foreign_cores:.2f} cores  "
                    f"load {run.load:.2f}  errors {run.errors}"
                )

            kvb.run_cells([c for c in cells if c.side in sides], one, args.warmup, args.seconds, args.runs, line)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print(
        f"\n{started:%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs, serve --workers "
        f"{args.workers if args.workers is not None else 'default'}, env {extra_env or '{}'}, "
        f"{args.runs} x {args.seconds:g} s per cell; guard + 1 push + 1 KV put per transaction; "
        f"raw {'with' if args.raw_notify else 'without'} pg_notify; "
        f"server stack {kvb._server_stack(extra_env)}\n"
    )
    if args.only == "both":
        print_table(cells)
        print("\nGoal (issue 10): HTTP >= 40% of raw at c16; HTTP p50 <= 3 ms at c1.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
