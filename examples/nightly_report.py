"""One worker at a time: three replicas start the nightly report, one builds it.

Every replica of a service runs the same scheduler, so at night three
workers start the same job together. Each asks for the lock
``nightly-report`` (a 30 s lease the client renews while the work runs) and
waits up to a second for it; the one that gets it builds the report, and the
others skip. The report goes out in a transaction with two fences:

- ``.guard(lock)``: it commits only while the lock is still this worker's.
  A worker paused past its lease, whose lock somebody else took meanwhile,
  commits nothing and answers "lost the lock".
- the ``transactionId`` carries the day: a second report for the same day is
  a duplicate the broker refuses, so a worker that took the lock after the
  report was written (or a second run of this script) answers "already
  written".

Run it against a local server::

    make run                        # in another terminal
    make token NAME=examples        # prints the token on its last line
    QUEEN_TOKEN=qa_... .venv/bin/python examples/nightly_report.py

``QUEEN_URL`` names another server (default ``http://127.0.0.1:8000``). It
prints one line per worker (which one wins changes from run to run), then
what the queue holds::

    worker-1: skipped
    worker-2: done
    worker-3: skipped
    nightly-reports: 1 report for 2026-10-24

``run_worker`` is the worker, importable on its own.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from queen import Lock, Queen

LOCK_NAME = "nightly-report"
QUEUE = "nightly-reports"
DAY = "2026-10-24"
WORKERS = ("worker-1", "worker-2", "worker-3")
#: How long building the report takes here: longer than the others wait for
#: the lock, so they skip instead of taking it once it is free.
BUILD_SECONDS = 2.0

Build = Callable[[str, Lock], Awaitable[dict[str, Any]]]


async def build_report(day: str, lock: Lock) -> dict[str, Any]:
    """Stand in for the real work. A long build would watch ``lock.lost``
    and stop early once it is set: nothing it made could commit."""
    await asyncio.sleep(BUILD_SECONDS)
    return {"day": day, "bookings": 412}


async def run_worker(
    queen: Queen,
    *,
    day: str,
    lock_name: str,
    queue: str,
    build: Build = build_report,
    wait: float = 1.0,
) -> str:
    """Build and push the report of ``day`` if this worker gets the lock.

    Returns "done" (pushed), "skipped" (another worker held the lock for
    all of ``wait`` seconds), "lost the lock" (the lease passed to another
    worker before the commit; nothing was pushed) or "already written" (the
    day's report is in ``queue`` already; nothing was pushed). Raises what
    the client raises for anything else.
    """
    lock = queen.lock(lock_name, ttl_seconds=30)
    if not await lock.acquire(wait=wait):
        return "skipped"
    try:
        report = await build(day, lock)
        try:
            result = await (
                queen.transaction()
                .guard(lock)
                .queue(queue)
                .push([{"transactionId": f"report-{day}", "data": report}])
                .commit()
            )
        except Exception as error:
            # The client raises a refused bundle as a plain Exception whose
            # message starts with the broker's code: QDUP is the day's
            # transactionId, already in the log.
            if str(error).startswith("QDUP "):
                return "already written"
            raise
        # A lost guard is returned, not raised: success False, reason
        # kv_precondition, and the handle now reports the lock lost.
        if not result:
            return "lost the lock"
        return "done"
    finally:
        await lock.release()


async def demo(url: str, token: str) -> int:
    async with Queen(url=url, bearer_token=token) as queen:
        # One client stands for three replicas: each worker's lock handle has
        # an owner of its own, as three processes would.
        outcomes = await asyncio.gather(
            *(run_worker(queen, day=DAY, lock_name=LOCK_NAME, queue=QUEUE) for _ in WORKERS)
        )
        for worker, outcome in zip(WORKERS, outcomes, strict=True):
            print(f"{worker}: {outcome}")
        # Read the log by offset: no lease, nothing consumed.
        read = await queen.queue(QUEUE).fetch(["Default"])
        days = [r["payload"]["day"] for r in read["Default"]["records"] if r["transactionId"] == f"report-{DAY}"]
        print(f"{QUEUE}: {len(days)} report{'' if len(days) == 1 else 's'} for {DAY}")
    wrote = [o for o in outcomes if o != "skipped"]
    return 0 if days == [DAY] and wrote in (["done"], ["already written"]) else 1


def main() -> int:
    token = os.environ.get("QUEEN_TOKEN")
    if not token:
        print("QUEEN_TOKEN is not set: make one with `make token NAME=examples`", file=sys.stderr)
        return 2
    return asyncio.run(demo(os.environ.get("QUEEN_URL", "http://127.0.0.1:8000"), token))


if __name__ == "__main__":
    sys.exit(main())
