"""Conflation (last-value delivery) against plain delivery of the same backlog.

Run on demand (not part of CI)::

    .venv/bin/python bench/conflation.py                     # SQLite
    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test .venv/bin/python bench/conflation.py

It starts ``manage.py serve`` with ``tests.conftest.run_server``, pushes
``--messages`` messages over ``--partitions`` partitions, then drains the
backlog twice with the official client: one consumer group with
``conflation()`` and one without (``batch(100)``), each until the group has
nothing pending. Prints, per group, the messages the handler saw and the
seconds it took; then the latency of single pops (pop and ack, median of
``--pops``) of one partition holding ``--deep`` messages for a conflating
group (a fresh group each time, so each pop reads the whole backlog) and
for a plain one (``batch(1)``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
BATCH = 1000


def push(url: str, token: str, queue: str, total: int, partitions: int) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, headers=headers, timeout=120) as client:
        for b in range(0, total, BATCH):
            items = [
                {"queue": queue, "partition": f"p{(b + i) % partitions}", "payload": {"n": b + i}}
                for i in range(min(BATCH, total - b))
            ]
            assert client.post("/api/v1/push", json={"items": items}).status_code == 201


async def drain(queen: Any, queue: str, group: str, conflation: bool) -> tuple[int, float]:
    seen = 0

    async def handler(messages: list[dict[str, Any]]) -> None:
        nonlocal seen
        seen += len(messages)

    started = time.perf_counter()
    builder = queen.queue(queue).group(group).batch(100).partitions(64).wait(False).idle_millis(300)
    if conflation:
        builder = builder.conflation()
    await builder.consume(handler)
    elapsed = time.perf_counter() - started
    depth = await queen.admin.get_queue_depth(queue, group)
    assert depth["pending"] == 0, depth
    return seen, elapsed


async def pop_latency(queen: Any, queue: str, pops: int, conflation: bool) -> float:
    times = []
    for n in range(pops):
        group = f"lat-{int(conflation)}-{n}"
        builder = queen.queue(queue).group(group).batch(1).wait(False)
        if conflation:
            builder = builder.conflation()
        started = time.perf_counter()
        messages = await builder.pop()
        await queen.ack(messages, True, {"group": group})
        times.append(time.perf_counter() - started)
        assert len(messages) == 1
    return statistics.median(times) * 1000


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--deep", type=int, default=10_000)
    parser.add_argument("--pops", type=int, default=20)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "queenadmin.settings")
    from queen import Queen

    from tests.conftest import run_server

    with run_server() as server:
        push(server.url, server.token, "backlog", args.messages, args.partitions)
        push(server.url, server.token, "deep", args.deep, 1)
        queen = Queen(url=server.url, bearer_token=server.token)
        try:
            for label, conflation in (("conflation", True), ("plain", False)):
                seen, elapsed = await drain(queen, "backlog", label, conflation)
                print(f"drain {label:>10}: {seen:>6} messages handled in {elapsed:6.2f} s")
            for label, conflation in (("conflation", True), ("plain", False)):
                ms = await pop_latency(queen, "deep", args.pops, conflation)
                print(f"pop+ack of a {args.deep}-deep partition, {label:>10}: median {ms:6.1f} ms")
        finally:
            await queen.close()


if __name__ == "__main__":
    asyncio.run(main())
