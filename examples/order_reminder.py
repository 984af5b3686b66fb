"""An order step: its state and a reminder, committed with the event's ack.

A worker takes an order event from ``order-events`` and, in ONE transaction:

- acks the event,
- stores the order's state in KV (namespace ``order-state``),
- schedules a reminder: a timer that pushes a message into the order's own
  partition of ``order-events`` later, in order with its other events,
- behind a gate: a marker for the event's id (namespace
  ``order-events-seen``), written only if absent. The same event delivered
  again in another message (a producer that retried its push) finds the
  marker, and the whole bundle rolls back: no second state write, no second
  reminder. The client returns that outcome (``success`` False, reason
  ``kv_precondition``) instead of raising it.

Either all four commit or none does: a state write never outlives a lost
ack, and no reminder exists for a step that did not happen.

Run it against a local server::

    make run                        # in another terminal
    make token NAME=examples        # prints the token on its last line
    QUEEN_TOKEN=qa_... .venv/bin/python examples/order_reminder.py

``QUEEN_URL`` names another server (default ``http://127.0.0.1:8000``). The
same "placed" event of order-42 is pushed twice; the first delivery commits,
the second commits nothing, and the reminder arrives 2 s later::

    order-42 placed, pushed twice
    delivery 1: committed the ack, the state and a reminder in 2 s
    delivery 2: the event was seen before, nothing committed
    order-42 state: {'state': 'placed'}
    reminder in partition order-42, not early: {'orderId': 'order-42', 'remind': 'pay'}

``handle_order_event`` is the step, importable on its own.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from datetime import timedelta
from typing import Any

from queen import Queen, TransactionResult

QUEUE = "order-events"
STATE_NS = "order-state"
SEEN_NS = "order-events-seen"
ORDER_ID = "order-42"
REMIND_AFTER = timedelta(seconds=2)


async def handle_order_event(
    queen: Queen,
    message: dict[str, Any],
    *,
    queue: str,
    remind_after: timedelta = REMIND_AFTER,
    state_ns: str = STATE_NS,
    seen_ns: str = SEEN_NS,
) -> TransactionResult:
    """Commit one order event: ack, state, reminder, behind the event's gate.

    ``message`` is an event popped from ``queue``, with data ``{"eventId",
    "orderId", "event"}``; the reminder goes to the order's partition of
    ``queue`` after ``remind_after``. Returns the transaction's answer:
    truthy when it committed; falsy (reason ``kv_precondition``) when the
    event's id was seen before, and then the message is acked on its own,
    since there is nothing left to do for it. Raises what the client
    raises for anything else, such as an ack whose lease is gone.
    """
    event = message["data"]
    order_id = event["orderId"]
    result = await (
        queen.transaction()
        # The gate goes first, on a key derived from the event.
        .once(seen_ns, f"event:{event['eventId']}", ttl=timedelta(days=7))
        .ack(message)
        .kv.put(state_ns, order_id, {"state": event["event"]}, ttl=timedelta(days=30))
        .timer(queue)
        .key(f"{order_id}:remind")
        .partition(order_id)
        .payload({"orderId": order_id, "remind": "pay"})
        .after(remind_after)
        .schedule()
        .commit()
    )
    if not result:
        await queen.ack(message, True)
    return result


async def demo(url: str, token: str) -> int:
    async with Queen(url=url, bearer_token=token) as queen:
        event = {"eventId": str(uuid.uuid4()), "orderId": ORDER_ID, "event": "placed"}
        # Two messages, one event: each push gets a transactionId of its own.
        await queen.queue(QUEUE).partition(ORDER_ID).push([{"data": event}, {"data": event}])
        print(f"{ORDER_ID} placed, pushed twice")
        started = time.monotonic()
        outcomes = []
        for delivery in (1, 2):
            (message,) = await queen.queue(QUEUE).batch(1).wait(False).pop()
            committed = bool(await handle_order_event(queen, message, queue=QUEUE))
            outcomes.append(committed)
            if committed:
                seconds = f"{REMIND_AFTER.total_seconds():g}"
                print(f"delivery {delivery}: committed the ack, the state and a reminder in {seconds} s")
            else:
                print(f"delivery {delivery}: the event was seen before, nothing committed")
        state = await queen.kv.get(STATE_NS, ORDER_ID)
        print(f"{ORDER_ID} state: {state['value']}")

        # The reminder is a message like any other: pop it (waiting for it),
        # then ack it.
        timeout = REMIND_AFTER + timedelta(seconds=15)
        arrived = await queen.queue(QUEUE).wait(True).timeout_millis(int(timeout.total_seconds() * 1000)).pop()
        waited = time.monotonic() - started
        if not arrived:
            print(f"no reminder arrived within {timeout.total_seconds():g} s")
            return 1
        (reminder,) = arrived
        await queen.ack(reminder, True)
        early = waited < REMIND_AFTER.total_seconds()
        print(f"reminder in partition {reminder['partition']}, {'EARLY' if early else 'not early'}: {reminder['data']}")
    ok = outcomes == [True, False] and not early and reminder["partition"] == ORDER_ID
    return 0 if ok else 1


def main() -> int:
    token = os.environ.get("QUEEN_TOKEN")
    if not token:
        print("QUEEN_TOKEN is not set: make one with `make token NAME=examples`", file=sys.stderr)
        return 2
    return asyncio.run(demo(os.environ.get("QUEEN_URL", "http://127.0.0.1:8000"), token))


if __name__ == "__main__":
    sys.exit(main())
