"""procrastinate's side of bench/peers.py: one process, one App, driven over stdin/stdout.

Each line in is a JSON command, each line out its JSON answer. The jobs are
deferred and run in this process with the library's own API (procrastinate
is an in-process library: this process is its "server"). bench/peers.py runs
it with the Python of its own virtualenv (procrastinate is not a dependency
of queenadmin)::

    python procrastinate_driver.py postgresql://postgres@127.0.0.1:5432/<db>
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import sys
import time
from importlib.metadata import version
from typing import Any

import procrastinate

PAD = "x" * 60
app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=sys.argv[1], min_size=1, max_size=16))
#: Each job's arrival: (monotonic seconds, wall-clock seconds) by job number.
arrived: dict[int, tuple[float, float]] = {}
#: Due instants of the bursts scheduled and not drained yet.
bursts: list[float] = []


@app.task(name="bench", queue="bench")
async def bench(n: int, due: float = 0.0, pad: str = "") -> None:
    arrived[n] = (time.monotonic(), time.time())


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def until(count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while len(arrived) < count and time.monotonic() < deadline:
        await asyncio.sleep(0.005)


async def worker(concurrency: int, polling: float) -> asyncio.Task[None]:
    task = asyncio.create_task(
        app.run_worker_async(
            queues=["bench"],
            concurrency=concurrency,
            fetch_job_polling_interval=polling,
            listen_notify=True,
            install_signal_handlers=False,
            wait=True,
        )
    )
    await asyncio.sleep(0.3)  # the worker's LISTEN is in place
    return task


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def e2e(seconds: float, concurrency: int, polling: float) -> dict[str, Any]:
    """``concurrency`` callers defer one job at a time for ``seconds``; a
    worker of ``concurrency`` runs them. The figure: jobs over the time from
    the first defer to the last job's run."""
    arrived.clear()
    task = await worker(concurrency, polling)
    deferred = 0
    started = time.monotonic()
    stop_at = started + seconds

    async def caller(i: int) -> None:
        nonlocal deferred
        while time.monotonic() < stop_at:
            await bench.defer_async(n=deferred * 64 + i, pad=PAD)
            deferred += 1

    await asyncio.gather(*(caller(i) for i in range(concurrency)))
    await until(deferred, 60)
    last = max((mono for mono, _ in arrived.values()), default=time.monotonic())
    await stop(task)
    return {"ops": len(arrived), "seconds": last - started, "deferred": deferred}


async def burst_schedule(count: int, lead: float) -> dict[str, Any]:
    """``count`` jobs due at one instant ``lead`` seconds ahead (schedule_at)."""
    due = time.time() + lead
    at = datetime.datetime.fromtimestamp(due, datetime.UTC)
    for first in range(0, count, 1000):
        jobs = [{"n": n, "pad": PAD} for n in range(first, min(count, first + 1000))]
        await bench.configure(schedule_at=at).batch_defer_async(*jobs)
    if time.time() > due - 0.2:
        return {"error": f"deferring {count} took longer than the lead of {lead} s"}
    bursts.append(due)
    return {"due": due}


async def burst_drain(count: int, concurrency: int, polling: float) -> dict[str, Any]:
    """A worker runs them; the figure: seconds from the instant to the last job's run."""
    arrived.clear()
    due = bursts.pop()
    task = await worker(concurrency, polling)
    await asyncio.sleep(max(0.0, due - time.time()))
    due_mono = time.monotonic()
    await until(count, 600)
    last = max((mono for mono, _ in arrived.values()), default=time.monotonic())
    await stop(task)
    return {"ops": len(arrived), "seconds": last - due_mono}


async def steady(rate: float, seconds: float, delay_ms: int, concurrency: int, polling: float) -> dict[str, Any]:
    """``rate`` jobs/s for ``seconds``, each due ``delay_ms`` after it is
    deferred (schedule_in, computed to the job's exact due instant); lateness
    = the job's run - due, in ms."""
    arrived.clear()
    task = await worker(concurrency, polling)
    total = round(rate * seconds)
    start = time.time()
    due_of: dict[int, float] = {}
    sent = 0
    k = 0
    while sent < total:
        await asyncio.sleep(max(0.0, start + k * 0.1 - time.time()))
        upto = min(total, round((k + 1) * 0.1 * rate))
        for n in range(sent, upto):
            due = start + delay_ms / 1000 + n / rate
            due_of[n] = due
            await bench.configure(schedule_in={"seconds": due - time.time()}).defer_async(n=n, pad=PAD)
        sent = upto
        k += 1
    await until(sent, delay_ms / 1000 + 30)
    await stop(task)
    late = [(wall - due_of[n]) * 1000 for n, (_, wall) in arrived.items() if n in due_of]
    return {"sent": sent, "received": len(late), "p50": percentile(late, 0.5), "p99": percentile(late, 0.99)}


async def main() -> None:
    async with app.open_async():
        await app.schema_manager.apply_schema_async()
        print(json.dumps({"ready": True}), flush=True)
        loop = asyncio.get_running_loop()
        while True:
            line = await loop.run_in_executor(None, sys.stdin.readline)
            if not line:
                break
            if not line.strip():
                continue
            command = json.loads(line)
            try:
                if command["cmd"] == "version":
                    answer: dict[str, Any] = {"version": version("procrastinate")}
                elif command["cmd"] == "e2e":
                    answer = await e2e(command["seconds"], command["concurrency"], command["pollSeconds"])
                elif command["cmd"] == "burstSchedule":
                    answer = await burst_schedule(command["count"], command["lead"])
                elif command["cmd"] == "burstDrain":
                    answer = await burst_drain(command["count"], command["concurrency"], command["pollSeconds"])
                elif command["cmd"] == "steady":
                    answer = await steady(
                        command["rate"],
                        command["seconds"],
                        command["delayMs"],
                        command["concurrency"],
                        command["pollSeconds"],
                    )
                else:
                    answer = {"error": f"unknown command {command['cmd']}"}
            except Exception as exc:  # the answer carries it; bench/peers.py stops
                answer = {"error": repr(exc)}
            print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
