"""The transaction patterns of the examples, through their hard cases, live.

``examples/nightly_report.py`` exports ``run_worker`` (one worker at a
time: a lock, ``.guard(lock)`` and the day in the ``transactionId``), and
``examples/order_reminder.py`` exports ``handle_order_event`` (the ack, the
order's state and its reminder in one transaction, behind a gate on the
event's id). Run as scripts, the examples show the easy path; here the
tests import those functions and take them, with real clients against a
live server, through the hard cases: three workers racing for the report,
a worker paused past its lease, an event delivered twice, the same step
sent again, and a reminder a day later.

A lease here is 30 s and a reminder a day. Instead of waiting, the tests
use the session's ``clock_server``, whose wall clock a test moves forward
(``clock_server.shift``): the broker's clock jumps, the clients' monotonic
clocks do not, exactly as when a worker is paused. ``Wire`` holds a client's
calls on one route until the test lets them go, to pause a worker at the
moment it commits.
"""

from __future__ import annotations

import asyncio
import importlib.util
import re
import time
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from types import ModuleType
from typing import Any

import pytest
from queen import Queen

from tests.conftest import ROOT, LiveServer

pytestmark = pytest.mark.live

TXN_PATH = "/api/v1/transaction"
ACK_PATH = "/api/v1/ack"
DAY = "2026-10-24"


def load_example(stem: str) -> ModuleType:
    """``examples/<stem>.py`` as a module (examples/ is no package)."""
    spec = importlib.util.spec_from_file_location(f"example_{stem}", ROOT / "examples" / f"{stem}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


nightly = load_example("nightly_report")
orders = load_example("order_reminder")


@pytest.fixture
def server(clock_server: LiveServer) -> LiveServer:
    return clock_server


@pytest.fixture
async def clients(server) -> AsyncIterator[Callable[[], Queen]]:
    made: list[Queen] = []

    def make() -> Queen:
        made.append(Queen(url=server.url, bearer_token=server.token, retry_attempts=1))
        return made[-1]

    try:
        yield make
    finally:
        await asyncio.gather(*(c.close() for c in made))


class Wire:
    """The calls one client makes on one route (``path``) and the answers
    it gets; with ``gated`` each waits until the test sets ``gate``."""

    def __init__(self, queen: Queen, *, path: str = TXN_PATH, gated: bool = False) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.answers: list[Any] = []
        self.sending = asyncio.Event()
        self.gate = asyncio.Event()
        if not gated:
            self.gate.set()
        http = queen._http_client
        real_post = http.post

        async def post(route: str, body: Any = None, *args: Any, **kwargs: Any) -> Any:
            if route != path:
                return await real_post(route, body, *args, **kwargs)
            self.bodies.append(body)
            self.sending.set()
            await self.gate.wait()
            answer = await real_post(route, body, *args, **kwargs)
            self.answers.append(answer)
            return answer

        http.post = post  # type: ignore[method-assign]


async def first_to_send(wires: list[Wire]) -> int:
    """The index of the first wire a call goes out on."""
    waits = [asyncio.ensure_future(w.sending.wait()) for w in wires]
    try:
        await asyncio.wait_for(asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED), 10)
    finally:
        for w in waits:
            w.cancel()
    (index,) = [i for i, w in enumerate(wires) if w.sending.is_set()]
    return index


async def pop_all(queen: Queen, queue: str) -> list[dict[str, Any]]:
    return list(await queen.queue(queue).batch(100).wait(False).pop())


async def bookings(day: str, lock: Any) -> dict[str, Any]:
    return {"day": day, "bookings": 412}


# -- nightly_report.run_worker ---------------------------------------------------------


@pytest.mark.parametrize("first_commit", ["quick", "slow"])
async def test_three_workers_at_once_write_one_nightly_report(clients, unique, first_commit):
    """Three replicas start the nightly job at once and one report is
    written; the holder answers ``done``. ``slow``: the holder's commit is
    held on the way out until the others, waiting their 1 s for the lock,
    gave up and answered ``skipped``. ``quick``: the holder commits at once
    and the others (waiting up to 5 s here, so that both surely do) take
    the freed lock one after the other; the second fence stops each, the
    day in the transactionId: the client raises the broker's QDUP refusal
    from ``commit()``, and the worker answers ``already written``."""
    queen = clients()
    names = {"day": DAY, "lock_name": unique("nightly-report"), "queue": unique("nightly-reports")}
    slow = first_commit == "slow"
    workers = [clients() for _ in range(3)]
    wires = [Wire(w, gated=slow) for w in workers]
    runs = [
        asyncio.ensure_future(nightly.run_worker(w, **names, build=bookings, wait=1.0 if slow else 5.0))
        for w in workers
    ]
    if slow:
        holder = await first_to_send(wires)
        others = [r for i, r in enumerate(runs) if i != holder]
        assert await asyncio.wait_for(asyncio.gather(*others), 10) == ["skipped", "skipped"]
        assert [len(w.bodies) for w in wires] == [int(i == holder) for i in range(3)]
        wires[holder].gate.set()
    answers = await asyncio.wait_for(asyncio.gather(*runs), 20)
    if slow:
        assert sorted(answers) == ["done", "skipped", "skipped"]
    else:
        assert sorted(answers) == ["already written", "already written", "done"]
        refused = [w.answers for w, answer in zip(wires, answers, strict=True) if answer == "already written"]
        duplicate = rf"^QDUP a pushed message to {names['queue']}/Default is a duplicate "
        for (answer,) in refused:
            assert answer["success"] is False
            assert re.match(duplicate, answer["error"]), answer
    (report,) = await pop_all(queen, names["queue"])
    assert (report["transactionId"], report["data"]) == (f"report-{DAY}", {"day": DAY, "bookings": 412})
    assert not (await queen.locks.get(names["lock_name"]))["held"]


async def test_a_worker_paused_past_its_lease_commits_nothing(server, clients, unique):
    """Worker A takes the lock for 30 s and is paused past that (its guarded
    transaction waits on the way out while the broker's clock passes the
    lease). B takes the lock. When A goes on, its transaction rolls back
    with ``kv_precondition``, writes nothing, A answers ``lost the lock``
    and its handle reports the lock lost; B's guarded transaction commits,
    under a higher fencing token. There is one report."""
    names = {"day": DAY, "lock_name": unique("nightly-report"), "queue": unique("nightly-reports")}
    handles: dict[str, Any] = {}

    def build_as(worker: str) -> Callable[[str, Any], Any]:
        async def build(day: str, lock: Any) -> dict[str, Any]:
            handles[worker] = lock
            return {"day": day}

        return build

    queen_a, queen_b = clients(), clients()
    wire_a, wire_b = Wire(queen_a, gated=True), Wire(queen_b, gated=True)

    worker_a = asyncio.create_task(nightly.run_worker(queen_a, **names, build=build_as("a")))
    await asyncio.wait_for(wire_a.sending.wait(), 10)
    server.shift(timedelta(seconds=31))
    worker_b = asyncio.create_task(nightly.run_worker(queen_b, **names, build=build_as("b")))
    await asyncio.wait_for(wire_b.sending.wait(), 10)

    wire_a.gate.set()
    assert await asyncio.wait_for(worker_a, 10) == "lost the lock"
    (answer_a,) = wire_a.answers
    assert (answer_a["success"], answer_a["reason"]) == (False, "kv_precondition")
    assert answer_a["value"]["owner"] == handles["b"].owner != handles["a"].owner
    assert handles["a"].lost.is_set()
    assert await pop_all(clients(), names["queue"]) == []

    wire_b.gate.set()
    assert await asyncio.wait_for(worker_b, 10) == "done"
    (answer_b,) = wire_b.answers
    assert answer_b["success"] is True
    assert wire_a.bodies[0]["kv"][0]["expect"] < wire_b.bodies[0]["kv"][0]["expect"]
    (report,) = await pop_all(clients(), names["queue"])
    assert (report["transactionId"], report["data"]) == (f"report-{DAY}", {"day": DAY})
    assert not (await clients().locks.get(names["lock_name"]))["held"]


# -- order_reminder.handle_order_event -------------------------------------------------


async def test_the_order_transaction_commits_once_per_event(clients, unique):
    """One event in two messages (a producer that retried): the first
    delivery's ack, gate, state and reminder commit together. The second
    finds the gate closed (``kv_precondition``, reason ``exists``, at the
    gate's index after the ack) and its whole bundle rolls back, its ack
    too: the message is still leased until the step acks it on its own.
    The state, the reminder and the gate's marker are the first commit's."""
    queen = clients()
    queue, order_id = unique("order-events"), unique("order")
    event = {"eventId": unique("evt"), "orderId": order_id, "event": "placed"}
    await (
        queen.queue(queue)
        .partition(order_id)
        .push([{"data": event, "transactionId": "delivery-1"}, {"data": event, "transactionId": "delivery-2"}])
    )
    # A reminder an hour away, so that it does not arrive while depths are read.
    step = {"queue": queue, "remind_after": timedelta(hours=1)}

    (first,) = await queen.queue(queue).batch(1).wait(False).pop()
    committed = await orders.handle_order_event(queen, first, **step)
    assert committed["success"] is True
    ack, gate, state, reminder = committed["results"]
    assert (ack["type"], ack["transactionId"], ack["success"]) == ("ack", "delivery-1", True)
    assert (gate["op"], gate["applied"], gate["key"]) == ("putIfAbsent", True, f"event:{event['eventId']}")
    assert (state["op"], state["applied"], state["value"]) == ("put", True, {"state": "placed"})
    assert (reminder["type"], reminder["status"], reminder["timerKey"]) == ("timer", "scheduled", f"{order_id}:remind")

    again = clients()
    bundles = Wire(again)
    own_ack = Wire(again, path=ACK_PATH, gated=True)
    (second,) = await again.queue(queue).batch(1).wait(False).pop()
    assert second["transactionId"] == "delivery-2"
    redelivered = asyncio.create_task(orders.handle_order_event(again, second, **step))
    await asyncio.wait_for(own_ack.sending.wait(), 10)
    (rolled_back,) = bundles.answers
    assert (rolled_back["success"], rolled_back["reason"]) == (False, "kv_precondition")
    assert (rolled_back["failedIndex"], rolled_back["kvReason"]) == (1, "exists")
    depth = await queen.admin.get_queue_depth(queue)
    assert (depth["pending"], depth["processing"]) == (1, 1)
    own_ack.gate.set()
    answer = await asyncio.wait_for(redelivered, 10)
    assert (bool(answer), answer["reason"]) == (False, "kv_precondition")
    (acked,) = own_ack.answers
    assert acked[0]["success"] is True
    depth = await queen.admin.get_queue_depth(queue)
    assert (depth["pending"], depth["processing"]) == (0, 0)

    stored = await queen.kv.get(orders.STATE_NS, order_id)
    assert (stored["value"], stored["version"]) == ({"state": "placed"}, state["version"])
    marker = await queen.kv.get(orders.SEEN_NS, f"event:{event['eventId']}")
    assert marker["version"] == gate["version"]
    pending = await queen.timers.peek(queue, f"{order_id}:remind")
    assert (pending["found"], pending["txn"]) == (True, reminder["txn"])


async def test_an_order_step_commits_its_state_and_reminder_together(server, clients, unique):
    """The step stores the order's state and schedules tomorrow's reminder,
    in the order's own partition, with the event's ack. The same step sent
    again is refused at its ack (``QTXN``) and changes neither. A day later
    the reminder arrives in the order's partition, as the message the
    timer named."""
    queen = clients()
    queue, order_id = unique("shop-orders"), unique("order")
    event = {"eventId": unique("evt"), "orderId": order_id, "event": "placed"}
    await queen.queue(queue).partition(order_id).push([{"data": event}])
    (message,) = await queen.queue(queue).batch(1).wait(False).pop()
    step = {"queue": queue, "remind_after": timedelta(days=1)}

    result = await orders.handle_order_event(queen, message, **step)
    assert result["success"] is True
    _ack, _gate, written, reminder = result["results"]
    state = await queen.kv.get(orders.STATE_NS, order_id)
    assert (state["value"], state["version"]) == ({"state": "placed"}, written["version"])
    pending = await queen.timers.peek(queue, f"{order_id}:remind")
    assert (pending["found"], pending["txn"], pending["partition"]) == (True, reminder["txn"], order_id)

    with pytest.raises(Exception, match=r"^QTXN the ack of "):
        await orders.handle_order_event(queen, message, **step)
    assert (await queen.kv.get(orders.STATE_NS, order_id))["version"] == written["version"]
    assert (await queen.timers.peek(queue, f"{order_id}:remind"))["txn"] == reminder["txn"]

    assert await queen.queue(queue).wait(False).pop() == []
    server.shift(timedelta(days=1, seconds=1))
    deadline = time.monotonic() + 10
    arrived: list[dict[str, Any]] = []
    while not arrived and time.monotonic() < deadline:
        arrived = await queen.queue(queue).wait(True).timeout_millis(1000).pop()
    (remind,) = arrived
    assert (remind["data"], remind["partition"]) == ({"orderId": order_id, "remind": "pay"}, order_id)
    assert (remind["id"], remind["transactionId"]) == (reminder["messageId"], reminder["txn"])
