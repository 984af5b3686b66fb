"""A ``Stream.map().to()`` pipeline against a plain consume-and-push loop: msgs/s, side by side.

Run on demand (not part of CI)::

    .venv/bin/python bench/streams.py                     # SQLite
    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test .venv/bin/python bench/streams.py

It starts ``manage.py serve`` with ``tests.conftest.run_server`` and, per
round, pushes ``--messages`` messages (~80-byte payloads, 4 partitions) to
two source queues. One is drained by the Streams SDK,
``Stream.from_(src).map(f).to(sink)`` (its runner's defaults: pops of 200
from up to 4 partitions, one ``/streams/v1/cycle`` per partition that
pushes the mapped messages and acks the source in one transaction). The
other by the loop a team would write without streams, through the same
client: pop 200, map, push the results, ack (two calls, at-least-once).
Each side's time runs until its sink holds every message; the order of the
two alternates round by round. Prints msgs/s per round, the medians and
the ratio, and the server's CPU per message (its process tree and, on
PostgreSQL, its backends).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import kv  # bench/kv.py, for its server CPU meter: bench/ is sys.path[0] when a script here runs

ROOT = Path(__file__).resolve().parent.parent
PARTITIONS = 4
BATCH = 1000
POP_BATCH = 200
PAYLOAD_PAD = "x" * 60


def mapped(value: dict[str, Any]) -> dict[str, Any]:
    """The work both sides do per message."""
    return {"n": value["n"], "double": value["n"] * 2, "pad": value["pad"]}


def push(http: httpx.Client, queue: str, total: int) -> None:
    for b in range(total // BATCH):
        items = [
            {"queue": queue, "partition": f"p{b % PARTITIONS}", "payload": {"n": b * BATCH + i, "pad": PAYLOAD_PAD}}
            for i in range(BATCH)
        ]
        assert http.post("/api/v1/push", json={"items": items}).status_code == 201


def sink_total(http: httpx.Client, queue: str) -> int:
    answer = http.get(f"/api/v1/resources/queues/{queue}")
    if answer.status_code != 200:
        return 0
    body = answer.json()
    return int(body.get("totals", body.get("messages", {})).get("total", 0))


async def wait_for(http: httpx.Client, queue: str, total: int) -> None:
    while await asyncio.to_thread(sink_total, http, queue) < total:
        await asyncio.sleep(0.02)


async def run_stream(url: str, token: str, http: httpx.Client, src: str, sink: str, total: int) -> float:
    from queen import Queen, Stream

    async with Queen(url=url, bearer_token=token) as queen:
        started = time.perf_counter()
        runner = await (
            Stream.from_(queen.queue(src))
            .map(lambda m: mapped(m["data"]))
            .to(queen.queue(sink))
            .run(query_id=f"bench-{uuid.uuid4().hex[:8]}", url=url, bearer_token=token)
        )
        try:
            await wait_for(http, sink, total)
            elapsed = time.perf_counter() - started
        finally:
            await runner.stop()
    return total / elapsed


async def run_loop(url: str, token: str, http: httpx.Client, src: str, sink: str, total: int) -> float:
    from queen import Queen

    async with Queen(url=url, bearer_token=token) as queen:
        started = time.perf_counter()
        done = 0

        async def worker() -> None:
            nonlocal done
            while done < total:
                messages = await queen.queue(src).group("plain").batch(POP_BATCH).wait(True).timeout_millis(1000).pop()
                if not messages:
                    continue
                out = [mapped(m["data"]) for m in messages]
                by_partition: dict[str, list[dict[str, Any]]] = {}
                for message, value in zip(messages, out, strict=True):
                    by_partition.setdefault(message["partition"], []).append(value)
                for partition, values in by_partition.items():
                    await queen.queue(sink).partition(partition).push([{"data": v} for v in values])
                await queen.ack(messages, True, {"group": "plain"})
                done += len(messages)

        # The runner pops up to 4 partitions a time; four loops do the same.
        await asyncio.gather(*(worker() for _ in range(PARTITIONS)))
        await wait_for(http, sink, total)
        elapsed = time.perf_counter() - started
    return total / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=8000)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from tests.conftest import run_server

    rates: dict[str, list[float]] = {"stream": [], "loop": []}
    cpu: dict[str, list[float]] = {"stream": [], "loop": []}
    with run_server() as server:
        http = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {server.token}"}, timeout=120)
        sides = {"stream": run_stream, "loop": run_loop}
        db_name = server.env.get("DATABASE_URL", "").rsplit("/", 1)[-1] or "no-postgresql"
        meter = kv.CpuMeter(server.process.pid, db_name)
        for r in range(args.rounds):
            order = ["stream", "loop"] if r % 2 == 0 else ["loop", "stream"]
            line = []
            for side in order:
                src, sink = f"bs-src-{uuid.uuid4().hex[:8]}", f"bs-sink-{uuid.uuid4().hex[:8]}"
                push(http, src, args.messages)
                _, server_before, pg_before, _ = meter.snapshot()
                rate = asyncio.run(sides[side](server.url, server.token, http, src, sink, args.messages))
                _, server_after, pg_after, _ = meter.snapshot()
                used = kv._grown(server_before, server_after) + kv._grown(pg_before, pg_after)
                rates[side].append(rate)
                cpu[side].append(used / args.messages * 1e6)
                line.append(f"{side} {rate:,.0f} msgs/s ({cpu[side][-1]:.0f} us server CPU/msg)")
            print(f"round {r + 1}: " + ", ".join(line), flush=True)
        http.close()
    stream, loop = statistics.median(rates["stream"]), statistics.median(rates["loop"])
    print(f"\nmedian msgs/s: stream {stream:,.0f}, loop {loop:,.0f}, stream/loop {stream / loop:.2f}")
    print(
        f"median server CPU per message: stream {statistics.median(cpu['stream']):.0f} us, "
        f"loop {statistics.median(cpu['loop']):.0f} us"
    )


if __name__ == "__main__":
    main()
