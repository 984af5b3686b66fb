"""``bench/peers.py --floor``: our domain called in process, no HTTP.

One long-lived process, started by ``bench/peers.py`` with the environment
``Ours.start`` gives ``serve`` (the same scratch PostgreSQL database, the
same settings), that takes one JSON command per line on stdin and answers
one JSON line on stdout, as the peers' drivers do (``pgboss_driver.mjs``).
Each measuring command runs N threads, each calling the domain functions the
API views call for that work, for the round's seconds, and answers the
operation count and the seconds. What is left out is the request path: the
client, HTTP, the thread hop, Django's request cycle, ninja, the bearer
check, grants and rate limits, the JSON parse of the body and the rendering
of the answer. The threads (persistent, as serve's are, each with its own
connection) are this process's: their CPU counts with ours, as pg-boss's
caller counts with pg-boss.

- ``kv-put``: ``kv.kv_call([KVPut])`` (``api/kv.py``'s ``kv_batch``), each
  thread on its own keys, as ``ours_kv_put`` does over HTTP;
- ``kv-cas``: the same with ``expect`` the version the last put answered;
- ``push``: ``queues.queue_push`` of one item (``api/queues.py``'s
  ``push_messages``), to ``p{i % PARTITIONS}``, with a fresh transaction id
  as the queen client sends;
- ``prefill``: ``queues.queue_push`` of 1,000 items a call, as the HTTP
  prefill's server side;
- ``pop``: ``queues.queue_claim`` of batch 1 from any partition (the pop
  route's claim, without its wake-up hub) and ``queues.queue_ack``
  completed (``ack_message``), until the seconds are up or the prefill is
  drained.

The producer (``by``, ``producer_sub``) is what the bearer check makes of
the scratch API token: ``tokens.token_check``'s ``producer_sub``, read once.

Usage (by ``bench/peers.py`` only)::

    python bench/peers/floor_worker.py CHECKOUT   # BENCH_FLOOR_TOKEN in the environment
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

#: As ``bench/peers.py``'s.
PARTITIONS = 16
PAD = "x" * 60
#: Threads kept across commands, so each keeps its database connection (the
#: rows use 16 at most).
THREADS = 16


def setup(checkout: str) -> str | None:
    """Django against ours' database; the producer the API names for the token."""
    sys.path.insert(0, checkout)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "queenadmin.settings")
    import django

    django.setup()
    from queenadmin.domain import tokens
    from queenadmin.server.loops import settle_gc

    auth = tokens.token_check(os.environ["BENCH_FLOOR_TOKEN"])
    if auth is None:
        raise RuntimeError("the scratch API token is unknown to ours' database")
    # As each serve worker does once started.
    settle_gc()
    return auth.producer_sub


class Worker:
    def __init__(self, producer: str | None) -> None:
        from queenadmin.domain import kv, queues
        from queenadmin.plumbing.db import json_text

        self.kv = kv
        self.queues = queues
        self.json_text = json_text
        self.producer = producer
        self.pool = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="floor")

    def loop(self, seconds: float, concurrency: int, step: Callable[[int, int], int]) -> dict[str, Any]:
        """``concurrency`` threads call ``step(thread, n)`` until ``seconds``
        are up (``bench/peers.py``'s ``_loop_until``)."""
        if concurrency > THREADS:
            raise ValueError(f"at most {THREADS} threads")
        started = time.monotonic()
        stop_at = started + seconds

        def thread(i: int) -> int:
            done = n = 0
            while time.monotonic() < stop_at:
                done += step(i, n)
                n += 1
            return done

        futures = [self.pool.submit(thread, i) for i in range(concurrency)]
        ops = sum(f.result() for f in futures)
        return {"ops": ops, "seconds": time.monotonic() - started}

    def kv_put(self, command: dict[str, Any]) -> dict[str, Any]:
        kv, text, by, r = self.kv, self.json_text, self.producer, command["round"]

        def step(i: int, n: int) -> int:
            put = kv.KVPut("bench", f"r{r}-c{i}-{n % 100}", text({"n": n}), None)
            result = kv.kv_call([put], by=by)[0]
            if not isinstance(result, kv.WriteResult) or not result.applied:
                raise RuntimeError(f"put not applied: {result}")
            return 1

        return self.loop(command["seconds"], command["concurrency"], step)

    def kv_cas(self, command: dict[str, Any]) -> dict[str, Any]:
        kv, text, by, r = self.kv, self.json_text, self.producer, command["round"]
        versions: dict[int, int] = {}

        def step(i: int, n: int) -> int:
            put = kv.KVPut("bench", f"cas-r{r}-c{i}", text({"n": n}), None, versions.get(i))
            result = kv.kv_call([put], by=by)[0]
            if not isinstance(result, kv.WriteResult) or not result.applied:
                raise RuntimeError(f"compare-and-set refused: {result}")
            versions[i] = result.version
            return 1

        return self.loop(command["seconds"], command["concurrency"], step)

    def push(self, command: dict[str, Any]) -> dict[str, Any]:
        queues, text, by, queue = self.queues, self.json_text, self.producer, command["queue"]

        def step(i: int, n: int) -> int:
            item = queues.PushItem(queue, f"p{i % PARTITIONS}", text({"n": n, "pad": PAD}), str(uuid.uuid4()))
            result = queues.queue_push(items=[item], producer_sub=by)[0]
            if result.status != "queued":
                raise RuntimeError(f"push not queued: {result}")
            return 1

        return self.loop(command["seconds"], command["concurrency"], step)

    def prefill(self, command: dict[str, Any]) -> dict[str, Any]:
        queues, text, queue, count = self.queues, self.json_text, command["queue"], command["count"]

        def fill() -> None:
            for first in range(0, count, 1000):
                items = [
                    queues.PushItem(queue, f"p{n % PARTITIONS}", text({"n": n, "pad": PAD}))
                    for n in range(first, min(count, first + 1000))
                ]
                queues.queue_push(items=items, producer_sub=self.producer)

        self.pool.submit(fill).result()
        return {"count": count}

    def pop(self, command: dict[str, Any]) -> dict[str, Any]:
        """``ours_pop`` of batch 1: each consumer pops one message (no
        wait), acks it completed, and sleeps 5 ms after an empty pop."""
        queues, queue, total = self.queues, command["queue"], command["total"]
        request = queues.PopRequest(queue=queue, batch=1, max_partitions=1, conflation_width=1)
        lock = threading.Lock()
        counts = {"done": 0, "empty": 0}
        started = time.monotonic()
        last = [started]
        stop_at = started + command["seconds"]

        def consumer(_i: int) -> None:
            while time.monotonic() < stop_at and counts["done"] < total:
                claim = queues.queue_claim(request=request)
                if not claim.messages:
                    with lock:
                        counts["empty"] += 1
                    time.sleep(0.005)
                    continue
                message = claim.messages[0]
                ack = queues.AckItem(
                    0, message.transaction_id, str(message.partition_id), "completed", claim.lease_id or None
                )
                outcome = queues.queue_ack(items=[ack])[0]
                if not outcome.success:
                    raise RuntimeError(f"ack refused: {outcome}")
                with lock:
                    counts["done"] += 1
                    last[0] = time.monotonic()

        for future in [self.pool.submit(consumer, i) for i in range(command["concurrency"])]:
            future.result()
        return {"ops": counts["done"], "seconds": last[0] - started, "empty": counts["empty"]}


def main() -> int:
    producer = setup(sys.argv[1])
    worker = Worker(producer)
    commands: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
        "version": lambda _command: {"version": "domain in process, no HTTP"},
        "kv-put": worker.kv_put,
        "kv-cas": worker.kv_cas,
        "push": worker.push,
        "prefill": worker.prefill,
        "pop": worker.pop,
    }
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        try:
            answer = commands[command["cmd"]](command)
        except Exception as exc:  # answered, as the drivers do; peers.py raises it
            traceback.print_exc()
            answer = {"error": repr(exc)}
        print(json.dumps(answer), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
