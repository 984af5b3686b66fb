"""A semaphore: at most two PDF exports at a time, however many workers ask.

Five workers each want to run an export, and the renderer takes two at
once. Each worker makes its own handle on the semaphore ``pdf-exports``
(limit 2, a 10 s lease the client renews while the export runs) and waits
for a permit. Two get one at once; the others wait, and each takes a permit
as a holder gives one back. While it holds a permit a worker also asks the
broker who holds the semaphore, which lists at most two holders.

Run it against a local server::

    make run                        # in another terminal
    make token NAME=examples        # prints the token on its last line
    QUEEN_TOKEN=qa_... .venv/bin/python examples/semaphore.py

``QUEEN_URL`` names another server (default ``http://127.0.0.1:8000``). It
prints::

    5 workers, semaphore pdf-exports with limit 2
    peak holders at once: 2 (the broker listed at most 2)
    every worker got its turn: worker-1, worker-2, worker-3, worker-4, worker-5
"""

from __future__ import annotations

import asyncio
import os
import sys

from queen import Queen

NAME = "pdf-exports"
LIMIT = 2
WORKERS = tuple(f"worker-{n}" for n in range(1, 6))
#: How long one export holds its permit: long enough that the first two
#: overlap.
EXPORT_SECONDS = 0.5


class Tally:
    """What the workers saw: holders at once, here and on the broker."""

    def __init__(self) -> None:
        self.holding = 0
        self.peak = 0
        self.broker_peak = 0
        self.done: list[str] = []


async def export(queen: Queen, worker: str, tally: Tally) -> None:
    permit = queen.semaphore(NAME, LIMIT, ttl_seconds=10)
    if not await permit.acquire(wait=30):
        return
    try:
        tally.holding += 1
        tally.peak = max(tally.peak, tally.holding)
        holders = (await queen.locks.get(NAME))["holders"]
        tally.broker_peak = max(tally.broker_peak, len(holders))
        await asyncio.sleep(EXPORT_SECONDS)
        tally.done.append(worker)
        tally.holding -= 1
    finally:
        await permit.release()


async def demo(url: str, token: str) -> int:
    tally = Tally()
    async with Queen(url=url, bearer_token=token) as queen:
        print(f"{len(WORKERS)} workers, semaphore {NAME} with limit {LIMIT}")
        await asyncio.gather(*(export(queen, worker, tally) for worker in WORKERS))
        print(f"peak holders at once: {tally.peak} (the broker listed at most {tally.broker_peak})")
        everyone = sorted(tally.done) == sorted(WORKERS)
        if everyone:
            print(f"every worker got its turn: {', '.join(sorted(tally.done))}")
        else:
            print(f"only these workers got a turn: {', '.join(sorted(tally.done))}")
    return 0 if everyone and tally.peak == tally.broker_peak == LIMIT else 1


def main() -> int:
    token = os.environ.get("QUEEN_TOKEN")
    if not token:
        print("QUEEN_TOKEN is not set: make one with `make token NAME=examples`", file=sys.stderr)
        return 2
    return asyncio.run(demo(os.environ.get("QUEEN_URL", "http://127.0.0.1:8000"), token))


if __name__ == "__main__":
    sys.exit(main())
