"""Framed pop (``frames=true``) against the JSON pop: pop+ack msgs/s, side by side.

Run on demand (not part of CI)::

    .venv/bin/python bench/frames.py                     # SQLite
    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test .venv/bin/python bench/frames.py

It starts ``manage.py serve`` with ``tests.conftest.run_server`` (and
``QUEENADMIN_FRAMED_POP=1``, off by default) and, per
round, pushes ``--messages`` messages (~80-byte payloads, 8 partitions) to
two queues, then drains one with the official client as it comes
(``Queen(framed_pop=False)``) and the other with ``framed_pop=True``:
``--clients`` consumers each popping ``batch(100)`` and acking every batch,
the order of the two alternating round by round. Prints msgs/s per round and the CPU it cost,
then the medians, the ratio, the CPU per message of the server (its
process tree and, on PostgreSQL, its backends) and of the client (this
process), the answer's bytes per message and what the
rendering and the unpacking cost per message in this process (the server's
``render_claim`` + ``json_dumps`` against ``render_pop_frames``; the
client's ``json.loads`` against ``decode_pop_frames``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import timeit
import uuid
from datetime import UTC, datetime
from pathlib import Path

import httpx
import kv  # bench/kv.py, for its server CPU meter: bench/ is sys.path[0] when a script here runs

ROOT = Path(__file__).resolve().parent.parent
PARTITIONS = 8
BATCH = 1000
POP_BATCH = 100
PAYLOAD_PAD = "x" * 60


def push(url: str, token: str, queue: str, total: int) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, headers=headers, timeout=120) as client:
        for b in range(total // BATCH):
            items = [
                {"queue": queue, "partition": f"p{b % PARTITIONS}", "payload": {"n": b * BATCH + i, "pad": PAYLOAD_PAD}}
                for i in range(BATCH)
            ]
            assert client.post("/api/v1/push", json={"items": items}).status_code == 201


async def drain(url: str, token: str, queue: str, total: int, clients: int, framed: bool) -> float:
    from queen import Queen

    queen = Queen(url=url, bearer_token=token, framed_pop=framed)
    done = 0

    async def consumer() -> None:
        nonlocal done
        while done < total:
            messages = await queen.queue(queue).batch(POP_BATCH).wait(False).pop()
            if not messages:
                await asyncio.sleep(0.005)
                continue
            await queen.ack(messages, True)
            done += len(messages)

    started = time.perf_counter()
    await asyncio.gather(*(consumer() for _ in range(clients)))
    elapsed = time.perf_counter() - started
    await queen.close()
    return total / elapsed


def codec_costs() -> dict[str, float]:
    """Microseconds per message to render and to unpack one answer of
    ``POP_BATCH`` messages, each way, and its bytes per message."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "queenadmin.settings")
    import django

    django.setup()
    from queen.http.pop_frames import decode_pop_frames

    from queenadmin.api.http import json_dumps
    from queenadmin.api.wire import binary
    from queenadmin.api.wire import queues as wire
    from queenadmin.domain import queues

    now = datetime.now(UTC)
    messages = tuple(
        queues.Delivered(
            message_id=str(uuid.uuid4()),
            transaction_id=str(uuid.uuid4()),
            trace_id=None,
            payload_json=json.dumps({"n": i, "pad": PAYLOAD_PAD}, separators=(",", ":")),
            created_at=now,
            partition_id=7,
            partition="p1",
            offset=1000 + i,
            delivery_attempt=1,
        )
        for i in range(POP_BATCH)
    )
    claim = queues.Claim(
        queue="bench", lease_id=str(uuid.uuid4()), group="__QUEUE_MODE__", partitions=((7, "p1"),), messages=messages
    )
    as_json = json_dumps(wire.render_claim(claim, None, 0))
    as_frames = binary.render_pop_frames(claim, None, 0)
    assert as_frames is not None
    n = 200
    per = 1e6 / (n * POP_BATCH)
    return {
        "render json": timeit.timeit(lambda: json_dumps(wire.render_claim(claim, None, 0)), number=n) * per,
        "render frames": timeit.timeit(lambda: binary.render_pop_frames(claim, None, 0), number=n) * per,
        "unpack json": timeit.timeit(lambda: json.loads(as_json), number=n) * per,
        "unpack frames": timeit.timeit(lambda: decode_pop_frames(as_frames), number=n) * per,
        "bytes json": len(as_json) / POP_BATCH,
        "bytes frames": len(as_frames) / POP_BATCH,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=10_000, help="messages per queue and round (multiple of 1000)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", type=int, default=2)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from tests.conftest import run_server

    costs = codec_costs()
    rates: dict[str, list[float]] = {"json": [], "frames": []}
    cpu: dict[str, list[float]] = {f"{side} {mode}": [] for side in ("server", "client") for mode in rates}
    with run_server(extra_env={"QUEENADMIN_FRAMED_POP": "1"}) as server:
        warm = f"warm-{uuid.uuid4().hex[:6]}"
        push(server.url, server.token, warm, 2 * BATCH)
        asyncio.run(drain(server.url, server.token, warm, 2 * BATCH, 1, False))
        db_name = server.env.get("DATABASE_URL", "").rsplit("/", 1)[-1] or "no-postgresql"
        meter = kv.CpuMeter(server.process.pid, db_name)
        for r in range(args.rounds):
            queues = {mode: f"frames-{mode}-{r}-{uuid.uuid4().hex[:6]}" for mode in rates}
            for queue in queues.values():
                push(server.url, server.token, queue, args.messages)
            order = ["json", "frames"] if r % 2 == 0 else ["frames", "json"]
            for mode in order:
                _, server_before, pg_before, _ = meter.snapshot()
                client_before = time.process_time()
                rate = asyncio.run(
                    drain(server.url, server.token, queues[mode], args.messages, args.clients, mode == "frames")
                )
                client_cpu = time.process_time() - client_before
                _, server_after, pg_after, _ = meter.snapshot()
                server_cpu = kv._grown(server_before, server_after) + kv._grown(pg_before, pg_after)
                rates[mode].append(rate)
                cpu[f"server {mode}"].append(server_cpu / args.messages * 1e6)
                cpu[f"client {mode}"].append(client_cpu / args.messages * 1e6)
            print(
                f"round {r + 1}: pop+ack json {rates['json'][-1]:,.0f} msgs/s"
                f" ({cpu['server json'][-1]:.0f}+{cpu['client json'][-1]:.0f} us CPU/msg server+client)"
                f"  frames {rates['frames'][-1]:,.0f} msgs/s"
                f" ({cpu['server frames'][-1]:.0f}+{cpu['client frames'][-1]:.0f})"
                f"  (load {os.getloadavg()[0]:.2f})",
                flush=True,
            )
    med = {mode: statistics.median(v) for mode, v in rates.items()}
    print()
    print(f"{'':<28}{'json':>12}{'frames':>12}")
    print(f"{'pop+ack msgs/s (median)':<28}{med['json']:>12,.0f}{med['frames']:>12,.0f}")
    print(f"{'frames / json':<28}{'':>12}{med['frames'] / med['json']:>12.0%}")
    for side in ("server", "client"):
        label = f"{side} CPU us/msg (pop+ack)"
        print(
            f"{label:<28}{statistics.median(cpu[side + ' json']):>12.1f}{statistics.median(cpu[side + ' frames']):>12.1f}"
        )
    print(f"{'answer bytes per message':<28}{costs['bytes json']:>12.0f}{costs['bytes frames']:>12.0f}")
    print(f"{'server render us/msg':<28}{costs['render json']:>12.2f}{costs['render frames']:>12.2f}")
    print(f"{'client unpack us/msg':<28}{costs['unpack json']:>12.2f}{costs['unpack frames']:>12.2f}")


if __name__ == "__main__":
    main()
