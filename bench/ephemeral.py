"""Ephemeral queues against the durable log, side by side in one run.

Run on demand (not part of CI)::

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test .venv/bin/python bench/ephemeral.py

It starts one ``manage.py serve`` on a scratch PostgreSQL database
(``tests.conftest.run_server``) and, per round, for both kinds in turn:

- ``push``: 1,000 messages per call (8 partitions, ~80-byte payloads)
  from ``--clients`` keep-alive connections: ``POST /api/v1/push`` (with a
  transactionId per item, as ``bench/log.py``) against
  ``POST /api/v1/ephemeral/push``;
- ``pop+ack``: ``--clients`` consumers draining what was pushed, batch
  100, every message acked ``completed``: ``GET /api/v1/pop/queue/<q>`` +
  ``POST /api/v1/ack/batch`` against ``GET /api/v1/ephemeral/pop`` +
  ``POST /api/v1/ephemeral/ack``.

The kinds alternate within each round, so a load swing on the shared
machine hits both. Prints msgs/s and the server's CPU per message (the
``serve`` tree plus its PostgreSQL backends, bench/kv.py's meter) per
round, then medians and the ephemeral/durable ratios (goal: >= 2x).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent


def _load(name: str) -> Any:
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, Path(__file__).with_name(f"{name.removeprefix('bench_')}.py")
        )
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


log = _load("bench_log")
BATCH = log.BATCH
POP_BATCH = 100


def eph_bodies(queue: str, total: int) -> list[bytes]:
    return [
        json.dumps(
            {
                "queue": queue,
                "partition": f"p{b % log.PARTITIONS}",
                "messages": [{"payload": {"n": b * BATCH + i, "pad": log.PAYLOAD_PAD}} for i in range(BATCH)],
            }
        ).encode()
        for b in range(total // BATCH)
    ]


def eph_push(url: str, token: str, payloads: list[bytes], clients: int) -> float:
    def work(i: int) -> None:
        client = log.Client(url, token)
        for body in payloads[i::clients]:
            status, answer = client.call("POST", "/api/v1/ephemeral/push", body)
            assert status == 201, (status, answer)
            assert answer == {"pushed": BATCH}, answer

    return len(payloads) * BATCH / log.run_parallel(clients, work)


def eph_pop_ack(url: str, token: str, queue: str, clients: int, expected: int) -> float:
    counts = [0] * clients

    def work(i: int) -> None:
        client = log.Client(url, token)
        while True:
            status, body = client.call("GET", f"/api/v1/ephemeral/pop?queue={quote(queue)}&batch={POP_BATCH}")
            assert status == 200, (status, body)
            if not body["messages"]:
                return
            acks = [{"id": m["id"]} for m in body["messages"]]
            status, answer = client.call(
                "POST", "/api/v1/ephemeral/ack", json.dumps({"queue": queue, "acks": acks}).encode()
            )
            assert status == 200, answer
            assert all(r["outcome"] == "acked" for r in answer["results"]), answer["results"][:1]
            counts[i] += len(acks)

    elapsed = log.run_parallel(clients, work)
    assert sum(counts) == expected, (sum(counts), expected)
    return expected / elapsed


def metered(meter: Any, messages: int, run: Any, *args: Any) -> tuple[float, float, float]:
    """``run(*args)``'s rate, and CPU microseconds per message of the
    ``serve`` tree and of its PostgreSQL backends."""
    kv = log._kv_bench()
    _, server_before, pg_before, _ = meter.snapshot()
    rate = run(*args)
    _, server_after, pg_after, _ = meter.snapshot()
    server = kv._grown(server_before, server_after) / messages * 1e6
    return rate, server, kv._grown(pg_before, pg_after) / messages * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--messages",
        type=int,
        default=10_000,
        help="messages per run (multiple of 1000; an ephemeral queue holds 10,000)",
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--workers", type=int, default=1, help="serve processes")
    args = parser.parse_args()

    os.environ.setdefault("DATABASE_URL", log.DEFAULT_URL)
    if not os.environ["DATABASE_URL"].startswith("postgres"):
        sys.exit("bench/ephemeral.py needs PostgreSQL (DATABASE_URL)")
    sys.path.insert(0, str(ROOT))
    from tests.conftest import run_server

    rows: dict[str, list[float]] = {}

    def note(name: str, value: float) -> None:
        rows.setdefault(name, []).append(value)

    with run_server(workers=args.workers) as server:
        url, token = server.url, server.token
        meter = log._kv_bench().CpuMeter(server.process.pid, server.env["DATABASE_URL"].rsplit("/", 1)[1])
        warm = f"warm-{uuid.uuid4().hex[:6]}"
        log.http_push(url, token, log.bodies(warm, 2 * BATCH), 1)
        log.http_pop_ack(url, token, warm, 1, 2 * BATCH)
        eph_push(url, token, eph_bodies(warm, 2 * BATCH), 1)
        eph_pop_ack(url, token, warm, 1, 2 * BATCH)
        n = args.messages
        for run in range(args.runs):
            tag = f"{run}-{uuid.uuid4().hex[:6]}"
            load = os.getloadavg()[0]
            durable, eph = f"log-{tag}", f"eph-{tag}"
            for kind, queue, push, pop, make in (
                ("log", durable, log.http_push, log.http_pop_ack, log.bodies),
                ("eph", eph, eph_push, eph_pop_ack, eph_bodies),
            ):
                for what, fn, arg in (("push", push, make(queue, n)), ("pop+ack", pop, queue)):
                    extra = (args.clients,) if what == "push" else (args.clients, n)
                    rate, server_cpu, pg_cpu = metered(meter, n, fn, url, token, arg, *extra)
                    note(f"{kind} {what}", rate)
                    note(f"{kind} {what} cpu", server_cpu + pg_cpu)
                    note(f"{kind} {what} server", server_cpu)
                    note(f"{kind} {what} pg", pg_cpu)
            print(
                f"run {run + 1}: push log {rows['log push'][-1]:,.0f}/s eph {rows['eph push'][-1]:,.0f}/s"
                f" ({rows['eph push'][-1] / rows['log push'][-1]:.2f}x);"
                f" pop+ack log {rows['log pop+ack'][-1]:,.0f}/s eph {rows['eph pop+ack'][-1]:,.0f}/s"
                f" ({rows['eph pop+ack'][-1] / rows['log pop+ack'][-1]:.2f}x)  (load {load:.2f})",
                flush=True,
            )
    med = {k: statistics.median(v) for k, v in rows.items()}
    print()
    print(f"{'median':<24}{'durable log':>14}{'ephemeral':>14}{'ratio':>8}{'goal':>8}")
    for what in ("push", "pop+ack"):
        ratio = med[f"eph {what}"] / med[f"log {what}"]
        print(
            f"{what + ' msgs/s':<24}{med[f'log {what}']:>14,.0f}{med[f'eph {what}']:>14,.0f}{ratio:>7.2f}x{'>= 2x':>8}"
        )
        for part in ("cpu", "server", "pg"):
            label = f"{what} {'CPU' if part == 'cpu' else part + ' CPU'} us/msg"
            print(f"{label:<24}{med[f'log {what} {part}']:>14.1f}{med[f'eph {what} {part}']:>14.1f}")


if __name__ == "__main__":
    main()
