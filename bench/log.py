"""Message-log speed: push and pop+ack through HTTP against raw psycopg.

Run on demand (not part of CI)::

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test .venv/bin/python bench/log.py

It starts ``manage.py serve`` (uvicorn, a2wsgi, Django) on a scratch
PostgreSQL database with ``tests.conftest.run_server`` and, per run:

- ``push``: ``POST /api/v1/push`` with 1,000-item batches (8 partitions,
  ~80-byte payloads, a transactionId per item so dedup is exercised),
  from ``--clients`` keep-alive connections;
- ``raw``: psycopg doing the same rows by hand in the same database: one
  transaction per 1,000 rows that locks the partition row, bumps its next
  offset and COPYs the messages into the same table (same indexes);
- ``pop+ack``: ``--clients`` consumers draining the pushed messages with
  ``GET /api/v1/pop/queue/<q>?batch=100`` then ``POST /api/v1/ack/batch``
  (every message ``completed`` under its lease).

``--single N`` measures the push of single messages instead (issue 15):
``N`` calls of ``POST /api/v1/push`` with one item each (8 partitions that
exist, a transactionId per item), from ``--clients`` connections, with the
server's CPU per call; then, in a process of its own on the same database,
the statements one ``queue_push`` of one message runs (psycopg's
``execute`` counted, plus BEGIN and COMMIT where it opens a transaction).
Run it from a copy of another
branch's tree to compare side by side.

Prints msgs/s per run, then medians and the ratios; beside each HTTP run,
the CPU it cost per message (the ``serve`` process tree plus its PostgreSQL
backends, from /proc with bench/kv.py's meter): on a shared, loaded machine
the rates swing with the load, the CPU per message much less.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import sys
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import kv  # bench/kv.py, for its server CPU meter: bench/ is sys.path[0] when a script here runs

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
BATCH = 1000
PARTITIONS = 8
PAYLOAD_PAD = "x" * 60


def bodies(queue: str, total: int) -> list[bytes]:
    out = []
    for b in range(total // BATCH):
        items = [
            {
                "queue": queue,
                "partition": f"p{b % PARTITIONS}",
                "payload": {"n": b * BATCH + i, "pad": PAYLOAD_PAD},
                "transactionId": str(uuid.uuid4()),
            }
            for i in range(BATCH)
        ]
        out.append(json.dumps({"items": items}).encode())
    return out


class Client:
    def __init__(self, url: str, token: str) -> None:
        parts = urlsplit(url)
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def call(self, method: str, path: str, body: bytes | None = None) -> tuple[int, Any]:
        self.conn.request(method, path, body=body, headers=self.headers)
        response = self.conn.getresponse()
        data = response.read()
        return response.status, (json.loads(data) if data else None)


def run_parallel(clients: int, work: Any) -> float:
    errors: list[BaseException] = []

    def wrapped(i: int) -> None:
        try:
            work(i)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=wrapped, args=(i,)) for i in range(clients)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - started


def http_push(url: str, token: str, payloads: list[bytes], clients: int, per_call: int = BATCH) -> float:
    """Messages per second pushing ``payloads`` (``per_call`` messages each)."""

    def work(i: int) -> None:
        client = Client(url, token)
        for body in payloads[i::clients]:
            status, answer = client.call("POST", "/api/v1/push", body)
            assert status == 201, (status, answer)
            assert answer[0]["status"] == "queued", answer

    elapsed = run_parallel(clients, work)
    return len(payloads) * per_call / elapsed


def http_pop_ack(url: str, token: str, queue: str, clients: int, expected: int) -> float:
    counts = [0] * clients

    def work(i: int) -> None:
        client = Client(url, token)
        while True:
            status, body = client.call("GET", f"/api/v1/pop/queue/{queue}?batch=100&wait=false")
            if status == 204:
                return
            assert status == 200, (status, body)
            acks = [
                {
                    "transactionId": m["transactionId"],
                    "partitionId": m["partitionId"],
                    "status": "completed",
                    "leaseId": m["leaseId"],
                }
                for m in body["messages"]
            ]
            status, answer = client.call(
                "POST", "/api/v1/ack/batch", json.dumps({"acknowledgments": acks, "consumerGroup": None}).encode()
            )
            assert status == 200
            assert all(a["success"] for a in answer), answer[:1]
            counts[i] += len(acks)

    elapsed = run_parallel(clients, work)
    assert sum(counts) == expected, (sum(counts), expected)
    return expected / elapsed


def raw_insert(dsn: str, queue: str, payloads: list[bytes], clients: int) -> float:
    import psycopg

    now = datetime.now(UTC)
    with psycopg.connect(dsn, autocommit=True) as conn:
        qid = conn.execute(
            "INSERT INTO queenadmin_queue (name, options, created_at) VALUES (%s, '{}', %s) RETURNING id", [queue, now]
        ).fetchone()[0]
        for p in range(PARTITIONS):
            conn.execute(
                "INSERT INTO queenadmin_partition (queue_id, name, next_offset, log_start, retained_bytes, created_at)"
                " VALUES (%s, %s, 0, 0, 0, %s)",
                [qid, f"p{p}", now],
            )
        pids = {
            name: pid
            for pid, name in conn.execute("SELECT id, name FROM queenadmin_partition WHERE queue_id = %s", [qid])
        }
    batches = [json.loads(b)["items"] for b in payloads]

    def work(i: int) -> None:
        with psycopg.connect(dsn) as conn:
            for items in batches[i::clients]:
                pid = pids[items[0]["partition"]]
                with conn.transaction():
                    (start,) = conn.execute(
                        "SELECT next_offset FROM queenadmin_partition WHERE id = %s FOR UPDATE", [pid]
                    ).fetchone()
                    conn.execute(
                        "UPDATE queenadmin_partition SET next_offset = %s, last_push_at = %s WHERE id = %s",
                        [start + len(items), now, pid],
                    )
                    with conn.cursor().copy(
                        "COPY queenadmin_message (partition_id, msg_offset, transaction_id, message_id, payload,"
                        " created_at) FROM STDIN"
                    ) as copy:
                        for n, item in enumerate(items):
                            copy.write_row(
                                (pid, start + n, item["transactionId"], str(uuid.uuid4()),
                                 json.dumps(item["payload"], separators=(",", ":")), now)
                            )  # fmt: skip

    elapsed = run_parallel(clients, work)
    return len(payloads) * BATCH / elapsed


def single_bodies(queue: str, total: int) -> list[bytes]:
    return [
        json.dumps(
            {
                "items": [
                    {
                        "queue": queue,
                        "partition": f"p{n % PARTITIONS}",
                        "payload": {"n": n, "pad": PAYLOAD_PAD},
                        "transactionId": str(uuid.uuid4()),
                    }
                ]
            }
        ).encode()
        for n in range(total)
    ]


#: Run in a child process (``--count-statements``) on the server's database.
def count_statements(queue: str, pushes: int) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "queenadmin.settings")
    import django

    django.setup()
    from queenadmin.domain import queues
    from queenadmin.plumbing import db
    from tests.unit.test_push_statements import counted

    def push(n: int) -> None:
        item = queues.PushItem(queue, f"p{n % PARTITIONS}", db.json_text({"n": n}), str(uuid.uuid4()))
        queues.queue_push(items=[item])

    from django.db import connection
    from django.db.transaction import Atomic

    for n in range(PARTITIONS):  # partitions exist, connection warm
        push(n)
    # BEGIN and COMMIT do not go through Cursor.execute: two per outermost
    # atomic block (a lone push on PostgreSQL runs in none, autocommit).
    began: list[bool] = []
    enter = Atomic.__enter__

    def entering(self: Atomic) -> None:
        if not connection.in_atomic_block:
            began.append(True)
        enter(self)

    Atomic.__enter__ = entering  # type: ignore[method-assign]
    try:
        with counted() as seen:
            for n in range(pushes):
                push(n)
    finally:
        Atomic.__enter__ = enter  # type: ignore[method-assign]
    per_push = (len(seen) + 2 * len(began)) / pushes
    print(json.dumps({"per_push": per_push, "sample": seen[: len(seen) // pushes]}))


def statements_per_push(dsn: str, queue: str) -> tuple[float, list[str]]:
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["DATABASE_URL"] = dsn
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--count-statements", queue],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    data = json.loads(out.strip().splitlines()[-1])
    return float(data["per_push"]), list(data["sample"])


def main_single(args: argparse.Namespace) -> None:
    from tests.conftest import run_server

    rates: list[float] = []
    cpus: list[float] = []
    with run_server(workers=args.workers) as server:
        dsn = server.env["DATABASE_URL"]
        meter = kv.CpuMeter(server.process.pid, dsn.rsplit("/", 1)[1])
        warm = f"warm-{uuid.uuid4().hex[:6]}"
        http_push(server.url, server.token, single_bodies(warm, 200), 1, 1)
        for run in range(args.runs):
            queue = f"single-{run}-{uuid.uuid4().hex[:6]}"
            http_push(server.url, server.token, single_bodies(queue, PARTITIONS), 1, 1)  # the partitions
            payloads = single_bodies(queue, args.single)
            load = os.getloadavg()[0]
            rate, cpu = metered(meter, args.single, http_push, server.url, server.token, payloads, args.clients, 1)
            rates.append(rate)
            cpus.append(cpu)
            print(
                f"run {run + 1}: single push {rate:,.0f} calls/s ({cpu:.0f} us CPU/call)  (load {load:.2f})", flush=True
            )
        per_push, sample = statements_per_push(dsn, warm)
    print()
    print(f"{'single push (HTTP)':<26}{statistics.median(rates):>12,.0f} calls/s")
    print(f"{'CPU us/call (serve + PG)':<26}{statistics.median(cpus):>12.0f}")
    print(f"{'statements per push':<26}{per_push:>12.1f}  (queue_push in process, with BEGIN and COMMIT)")
    for sql in sample:
        print(f"    {sql[:110]}")


def metered(meter: Any, messages: int, run: Any, *args: Any) -> tuple[float, float]:
    """``run(*args)``'s rate and the server's CPU microseconds per message."""
    _, server_before, pg_before, _ = meter.snapshot()
    rate = run(*args)
    _, server_after, pg_after, _ = meter.snapshot()
    cpu = kv._grown(server_before, server_after) + kv._grown(pg_before, pg_after)
    return rate, cpu / messages * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=20_000, help="messages per run (multiple of 1000)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--workers", type=int, default=1, help="serve processes")
    parser.add_argument("--single", type=int, default=0, help="push N single messages per run instead")
    parser.add_argument("--count-statements", metavar="QUEUE", help=argparse.SUPPRESS)
    args = parser.parse_args()

    os.environ.setdefault("DATABASE_URL", DEFAULT_URL)
    if not os.environ["DATABASE_URL"].startswith("postgres"):
        sys.exit("bench/log.py needs PostgreSQL (DATABASE_URL)")
    sys.path.insert(0, str(ROOT))
    if args.count_statements:
        count_statements(args.count_statements, 50)
        return
    if args.single:
        main_single(args)
        return
    from tests.conftest import run_server

    rows: dict[str, list[float]] = {"push": [], "raw": [], "pop+ack": [], "push cpu": [], "pop+ack cpu": []}
    with run_server(workers=args.workers) as server:
        dsn = server.env["DATABASE_URL"]
        meter = kv.CpuMeter(server.process.pid, dsn.rsplit("/", 1)[1])
        warm = f"warm-{uuid.uuid4().hex[:6]}"
        http_push(server.url, server.token, bodies(warm, 2 * BATCH), 1)
        http_pop_ack(server.url, server.token, warm, 1, 2 * BATCH)
        for run in range(args.runs):
            queue = f"bench-{run}-{uuid.uuid4().hex[:6]}"
            payloads = bodies(queue, args.messages)
            load = os.getloadavg()[0]
            rate, cpu = metered(meter, args.messages, http_push, server.url, server.token, payloads, args.clients)
            rows["push"].append(rate)
            rows["push cpu"].append(cpu)
            rows["raw"].append(raw_insert(dsn, f"raw-{queue}", payloads, args.clients))
            rate, cpu = metered(
                meter, args.messages, http_pop_ack, server.url, server.token, queue, args.clients, args.messages
            )
            rows["pop+ack"].append(rate)
            rows["pop+ack cpu"].append(cpu)
            print(
                f"run {run + 1}: push {rows['push'][-1]:,.0f}/s ({rows['push cpu'][-1]:.0f} us CPU/msg)"
                f"  raw {rows['raw'][-1]:,.0f}/s"
                f"  pop+ack {rows['pop+ack'][-1]:,.0f}/s ({rows['pop+ack cpu'][-1]:.0f} us CPU/msg)"
                f"  (load {load:.2f})",
                flush=True,
            )
    med = {k: statistics.median(v) for k, v in rows.items()}
    print()
    print(f"{'measure':<22}{'median msgs/s':>16}{'goal':>12}")
    print(f"{'push (HTTP, 1000/batch)':<22}{med['push']:>16,.0f}{'>= 10,000':>12}")
    print(f"{'raw COPY (psycopg)':<22}{med['raw']:>16,.0f}{'':>12}")
    print(f"{'pop+ack (batch 100)':<22}{med['pop+ack']:>16,.0f}{'>= 3,000':>12}")
    print(f"{'push / raw':<22}{med['push'] / med['raw']:>16.0%}{'>= 30%':>12}")
    print(f"{'push CPU us/msg':<22}{med['push cpu']:>16.1f}")
    print(f"{'pop+ack CPU us/msg':<22}{med['pop+ack cpu']:>16.1f}")


if __name__ == "__main__":
    main()
