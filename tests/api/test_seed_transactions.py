"""The seeds' Python transaction examples, run as printed against a live
server (like ``test_readme.py`` does for the README).

Each example is read from its seed file (``shared/seeds``) and run
unchanged inside an ``async def`` whose parameters are the names the
snippet assumes (``queen``, ``message``...); nothing of its own lines is
edited. What the seed promises is then checked on the server. The other
Python blocks are no transactions: the KV example of kv-locks-timers.md,
and flexiq-distributed-locking.txt (another product's locks).

A lease here is 30 s, as printed. Instead of sleeping past it, the server
of this module runs with a wall clock the test moves forward (time-machine
in the server process, shifted on ``SIGUSR1``; see ``_SITECUSTOMIZE``):
the broker's clock jumps, the clients' monotonic clocks do not, exactly as
when a worker is paused.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import io
import os
import re
import signal
import tempfile
import textwrap
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from queen import Queen

from tests.conftest import ROOT, LiveServer, run_server

pytestmark = pytest.mark.live

#: The seed documents: ``shared/seeds`` beside the checkout (where every
#: developer and CI have them), or ``QUEENADMIN_SEEDS``.
SEEDS = Path(os.environ.get("QUEENADMIN_SEEDS", ROOT.parent / "shared" / "seeds"))
TXN_PATH = "/api/v1/transaction"

_SITECUSTOMIZE = '''
"""Test hook: on SIGUSR1 move this process's wall clock forward by the
seconds written in $QA_SERVER_CLOCK, then write the total shift beside it."""
import datetime
import os
import signal

import time_machine

_file = os.environ["QA_SERVER_CLOCK"]
_now = time_machine.travel(datetime.datetime.now(datetime.UTC), tick=True).start()
_total = 0.0


def _shift(signum, frame):
    global _total
    with open(_file) as f:
        seconds = float(f.read())
    _now.shift(datetime.timedelta(seconds=seconds))
    _total += seconds
    with open(_file + ".done", "w") as f:
        f.write(repr(_total))


signal.signal(signal.SIGUSR1, _shift)
'''


class ClockServer:
    def __init__(self, server: LiveServer, clock_file: Path) -> None:
        self.server = server
        self.clock_file = clock_file
        self.total = 0.0

    def client(self) -> Queen:
        return Queen(url=self.server.url, bearer_token=self.server.token, retry_attempts=1)

    def shift(self, delta: timedelta) -> None:
        """Move the server's clock forward by ``delta`` and wait until it has."""
        self.total += delta.total_seconds()
        done = Path(f"{self.clock_file}.done")
        self.clock_file.write_text(repr(delta.total_seconds()))
        self.server.process.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 10
        while not (done.exists() and float(done.read_text() or "nan") == self.total):
            assert time.monotonic() < deadline, "the server did not move its clock"
            time.sleep(0.01)


@pytest.fixture(scope="module")
def clock_server() -> Iterator[ClockServer]:
    with tempfile.TemporaryDirectory(prefix="qa-clock-") as folder:
        hook = Path(folder, "hook")
        hook.mkdir()
        (hook / "sitecustomize.py").write_text(_SITECUSTOMIZE)
        clock_file = Path(folder, "shift")
        path = os.pathsep.join(p for p in (str(hook), os.environ.get("PYTHONPATH", "")) if p)
        with run_server(extra_env={"PYTHONPATH": path, "QA_SERVER_CLOCK": str(clock_file)}) as server:
            yield ClockServer(server, clock_file)


@pytest.fixture
async def clients(clock_server) -> AsyncIterator[Callable[[], Queen]]:
    made: list[Queen] = []

    def make() -> Queen:
        made.append(clock_server.client())
        return made[-1]

    try:
        yield make
    finally:
        await asyncio.gather(*(c.close() for c in made))


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, re.S)


def as_function(snippet: str, params: str, origin: str) -> Callable[..., Awaitable[Any]]:
    """``snippet`` as the body of ``async def example(<params>)``, unchanged
    but for the indent. It answers what the snippet returns, or its local
    names when it runs to its end."""
    source = f"async def example({params}):\n{textwrap.indent(snippet, '    ')}\n    return locals()\n"
    namespace: dict[str, Any] = {}
    exec(compile(source, origin, "exec"), namespace)
    return namespace["example"]  # type: ignore[no-any-return]


class Wire:
    """The transactions one client sends and the answers it gets; a gate
    (set) lets each go out only when the test says so."""

    def __init__(self, queen: Queen, gated: bool = False) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.answers: list[Any] = []
        self.sending = asyncio.Event()
        self.gate = asyncio.Event()
        if not gated:
            self.gate.set()
        http = queen._http_client
        real_post = http.post

        async def post(path: str, body: Any = None, *args: Any, **kwargs: Any) -> Any:
            if path != TXN_PATH:
                return await real_post(path, body, *args, **kwargs)
            self.bodies.append(body)
            self.sending.set()
            await self.gate.wait()
            answer = await real_post(path, body, *args, **kwargs)
            self.answers.append(answer)
            return answer

        http.post = post  # type: ignore[method-assign]


async def pop_all(queen: Queen, queue: str, **group: Any) -> list[dict[str, Any]]:
    builder = queen.queue(queue).batch(100).wait(False)
    if group:
        builder = builder.group(group["group"]).subscription_mode("all")
    return list(await builder.pop())


# -- one-worker-at-a-time.md ----------------------------------------------------------


def nightly_report_example() -> str:
    (block,) = python_blocks((SEEDS / "one-worker-at-a-time.md").read_text())
    assert 'queen.lock("nightly-report", ttl_seconds=30)' in block
    assert ".guard(lock)" in block
    return block


@pytest.mark.parametrize("first_commit", ["quick", "slow"])
async def test_three_workers_at_once_write_one_nightly_report(clients, first_commit):
    """one-worker-at-a-time.md, Python: three replicas start the nightly job
    at once and one report is written. The holder answers ``done``. While it
    holds the lock the others wait their 1 s and skip (``slow``: its commit
    is held on the way out until they gave up, the seed's figure). When it
    is quicker than that wait (``quick``), a late worker gets the free lock
    and is stopped by the second fence, the day in the transactionId: its
    push is a duplicate, which the client raises from ``commit()``."""
    queen = clients()
    await queen.queue("daily-reports").delete()
    example = as_function(nightly_report_example(), "queen", "<one-worker-at-a-time.md>")
    workers = [clients() for _ in range(3)]
    wires = [Wire(w, gated=first_commit == "slow") for w in workers]
    runs = [asyncio.ensure_future(example(w)) for w in workers]
    if first_commit == "slow":
        await asyncio.wait_for(
            asyncio.wait([asyncio.ensure_future(w.sending.wait()) for w in wires], return_when=asyncio.FIRST_COMPLETED),
            10,
        )
        (holder,) = [i for i, w in enumerate(wires) if w.sending.is_set()]
        others = [r for i, r in enumerate(runs) if i != holder]
        assert await asyncio.wait_for(asyncio.gather(*others), 10) == ["skipped", "skipped"]
        wires[holder].gate.set()
    answers = await asyncio.wait_for(asyncio.gather(*runs, return_exceptions=True), 10)
    assert answers.count("done") == 1, answers
    late = [str(a) for a in answers if a not in ("done", "skipped")]
    assert all(re.match(r"QDUP a pushed message to daily-reports/Default is a duplicate", a) for a in late), late
    if first_commit == "slow":
        assert sorted(answers) == ["done", "skipped", "skipped"]
    (report,) = await pop_all(queen, "daily-reports")
    assert (report["transactionId"], report["data"]) == ("report-2026-10-24", {"day": "2026-10-24", "bookings": 412})
    assert not (await queen.locks.get("nightly-report"))["held"]


# -- kv-locks-timers.md ---------------------------------------------------------------


def daily_report_example() -> str:
    blocks = [b for b in python_blocks((SEEDS / "kv-locks-timers.md").read_text()) if ".guard(lock)" in b]
    (block,) = blocks
    assert 'queen.lock("daily-report", ttl_seconds=30)' in block
    return block


async def test_a_worker_paused_past_its_lease_commits_nothing(clock_server, clients):
    """kv-locks-timers.md, Python, and its figure: worker A takes the lock
    for 30 s and is paused past that (its guarded transaction waits on the
    way out while the broker's clock passes the lease). B takes the lock.
    When A goes on, its transaction rolls back with ``kv_precondition`` and
    writes nothing, and A's handle reports the lock lost; B's guarded
    transaction commits. There is one report."""
    example = as_function(daily_report_example(), "queen", "<kv-locks-timers.md>")
    queen_a, queen_b = clients(), clients()
    wire_a, wire_b = Wire(queen_a, gated=True), Wire(queen_b, gated=True)

    worker_a = asyncio.create_task(example(queen_a))
    await asyncio.wait_for(wire_a.sending.wait(), 10)
    clock_server.shift(timedelta(seconds=31))
    worker_b = asyncio.create_task(example(queen_b))
    await asyncio.wait_for(wire_b.sending.wait(), 10)

    wire_a.gate.set()
    ran_a = await asyncio.wait_for(worker_a, 10)
    (answer_a,) = wire_a.answers
    assert (answer_a["success"], answer_a["reason"]) == (False, "kv_precondition")
    assert answer_a["value"]["owner"] != ran_a["lock"].owner
    assert ran_a["lock"].lost.is_set()
    assert await pop_all(clients(), "reports") == []

    wire_b.gate.set()
    ran_b = await asyncio.wait_for(worker_b, 10)
    (answer_b,) = wire_b.answers
    assert answer_b["success"] is True
    assert answer_a["value"]["owner"] == ran_b["lock"].owner
    assert wire_a.bodies[0]["kv"][0]["expect"] < wire_b.bodies[0]["kv"][0]["expect"]
    (report,) = await pop_all(clients(), "reports")
    assert (report["transactionId"], report["data"]) == ("report-2026-10-22", {"day": "2026-10-22"})
    assert not (await clients().locks.get("daily-report"))["held"]


# -- the client's own README: "Inside a transaction" ------------------------------


def inside_a_transaction_example() -> str:
    """The order transaction of the official client's README (the seeds name
    "the transaction above" but print it elsewhere; this is the printed
    Python one). Its one placeholder, ``{...}`` for the order's data, is
    the only text replaced."""
    readme = importlib.metadata.distribution("queen-mq").read_text("METADATA") or ""
    section = readme.split("### Inside a transaction", 1)[1]
    block = python_blocks(section)[0]
    assert ".once('dedup', f\"evt:{event_id}\", ttl_seconds=86400)" in block
    assert block.count("{...}") == 1
    return block.replace("{...}", "{'oid': oid}")


async def test_the_order_transaction_commits_once_per_event(clients):
    """A redelivered event (the same event id in a second message) commits
    nothing: the ``once`` gate rolls its bundle back, which the example
    reads as returned, not raised. The first delivery's push, ack and timer
    committed together."""
    example = as_function(inside_a_transaction_example(), "queen, event_id, message, oid", "<queen-mq README>")
    queen = clients()
    await queen.queue("order-events").push(
        [
            {"data": {"event": "e-1"}, "transactionId": "delivery-1"},
            {"data": {"event": "e-1"}, "transactionId": "delivery-2"},
        ]
    )
    (first,) = await queen.queue("order-events").batch(1).wait(False).pop()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        ran = await example(queen, "e-1", first, "9f1")
    assert ran["result"]["success"] is True
    assert printed.getvalue() == ""

    (second,) = await queen.queue("order-events").batch(1).wait(False).pop()
    with contextlib.redirect_stdout(printed):
        again = await example(queen, "e-1", second, "9f1")
    assert (again["result"]["success"], again["result"]["reason"]) == (False, "kv_precondition")
    # The example prints failedIndex, kvReason, version, value: the gate is
    # kv op 0, after the pushed item and the ack.
    assert printed.getvalue().split()[:2] == ["2", "exists"]

    orders = await pop_all(queen, "orders", group="audit")
    assert [m["data"] for m in orders] == [{"oid": "9f1"}]
    timer = await queen.timers.peek("orders", "order:9f1:expire")
    assert (timer["found"], timer["txn"]) == (True, ran["result"]["results"][3]["txn"])
    depth = await queen.admin.get_queue_depth("order-events")
    # The first delivery was acked with its bundle; the second's ack rolled back.
    assert (depth["pending"], depth["processing"]) == (1, 1)


# -- the order step the seed describes: state and reminder in one commit --------------


async def test_an_order_step_commits_its_state_and_reminder_together(clock_server, clients):
    """kv-locks-timers.md: "``kv.put`` stored the order's state, and
    ``timer()`` scheduled tomorrow's reminder, which arrives as a message",
    in the order's own partition. Both commit with the step's ack; the same
    step sent again changes neither; a day later the reminder arrives."""
    queen = clients()
    await queen.queue("shop-orders").partition("order-42").push([{"data": {"orderId": 42, "event": "placed"}}])
    (event,) = await queen.queue("shop-orders").batch(1).wait(False).pop()

    def step():
        return (
            queen.transaction()
            .ack(event)
            .kv.put("shop-order-state", "order-42", {"state": "placed"}, ttl=timedelta(days=30))
            .timer("shop-orders")
            .key("order-42:remind")
            .partition("order-42")
            .payload({"orderId": 42, "remind": "pay"})
            .after(timedelta(days=1))
            .schedule()
        )

    result = await step().commit()
    assert result["success"] is True
    _ack, written, reminder = result["results"]
    state = await queen.kv.get("shop-order-state", "order-42")
    assert (state["value"], state["version"]) == ({"state": "placed"}, written["version"])
    pending = await queen.timers.peek("shop-orders", "order-42:remind")
    assert (pending["found"], pending["txn"], pending["partition"]) == (True, reminder["txn"], "order-42")

    with pytest.raises(Exception, match=r"^QTXN the ack of "):
        await step().commit()
    assert (await queen.kv.get("shop-order-state", "order-42"))["version"] == written["version"]
    assert (await queen.timers.peek("shop-orders", "order-42:remind"))["txn"] == reminder["txn"]

    clock_server.shift(timedelta(days=1, seconds=1))
    deadline = time.monotonic() + 10
    arrived: list[dict[str, Any]] = []
    while not arrived and time.monotonic() < deadline:
        arrived = await queen.queue("shop-orders").wait(True).timeout_millis(1000).pop()
    (message,) = arrived
    assert (message["data"], message["partition"]) == ({"orderId": 42, "remind": "pay"}, "order-42")
    assert (message["id"], message["transactionId"]) == (reminder["messageId"], reminder["txn"])
