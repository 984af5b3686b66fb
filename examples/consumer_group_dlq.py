"""A consumer group, a poison message, and the dead-letter queue.

The queue ``payments`` allows two retries (``retry_limit`` 2). The consumer
group ``ledger`` books each payment and acks it. One payment has an amount
that is not a number: booking it fails, and the worker acks it as failed
with the reason. The broker hands it out again at once, until its third
failure, which moves it to the group's dead-letter queue, with the last
error. The payments behind it in the partition were waiting their turn; they
are booked next.

Run it against a local server::

    make run                        # in another terminal
    make token NAME=examples        # prints the token on its last line
    QUEEN_TOKEN=qa_... .venv/bin/python examples/consumer_group_dlq.py

``QUEEN_URL`` names another server (default ``http://127.0.0.1:8000``). It
prints::

    booked p-1: 20
    p-2 failed (delivery 1): amount is not a number
    p-2 failed (delivery 2): amount is not a number
    p-2 failed (delivery 3): amount is not a number, moved to the DLQ
    booked p-3: 5
    DLQ of ledger: p-2 ('amount is not a number')
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from typing import Any

from queen import Queen

QUEUE = "payments"
GROUP = "ledger"
PAYMENTS = [
    {"payment": "p-1", "amount": 20},
    {"payment": "p-2", "amount": "twenty"},
    {"payment": "p-3", "amount": 5},
]


def book(payment: dict[str, Any]) -> int:
    amount = payment["amount"]
    if not isinstance(amount, int):
        raise ValueError("amount is not a number")
    return amount


async def demo(url: str, token: str) -> int:
    async with Queen(url=url, bearer_token=token) as queen:
        await queen.queue(QUEUE).config({"retry_limit": 2}).create()
        # transactionIds of this run, so that a second run's DLQ shows only
        # its own dead letters.
        run = uuid.uuid4().hex[:8]
        ids = {f"{run}-{p['payment']}": p["payment"] for p in PAYMENTS}
        await queen.queue(QUEUE).push([{"transactionId": txn, "data": p} for txn, p in zip(ids, PAYMENTS, strict=True)])
        booked = []
        # Bounded: each payment is delivered at most 1 + retry_limit times.
        for _ in range(3 * len(PAYMENTS)):
            popped = await queen.queue(QUEUE).group(GROUP).batch(1).wait(False).pop()
            if not popped:
                break
            (message,) = popped
            payment = message["data"]
            try:
                amount = book(payment)
            except ValueError as error:
                answer = await queen.ack(message, False, {"group": GROUP, "error": str(error)})
                moved = ", moved to the DLQ" if answer.get("dlq") else ""
                print(f"{payment['payment']} failed (delivery {message['deliveryAttempt']}): {error}{moved}")
                continue
            await queen.ack(message, True, {"group": GROUP})
            booked.append(payment["payment"])
            print(f"booked {payment['payment']}: {amount}")

        dead = await queen.queue(QUEUE).dlq(GROUP).get()
        ours = [(ids[m["transactionId"]], m["errorMessage"]) for m in dead["messages"] if m["transactionId"] in ids]
        print(f"DLQ of {GROUP}: " + ", ".join(f"{payment} ({error!r})" for payment, error in ours))
    ok = booked == ["p-1", "p-3"] and ours == [("p-2", "amount is not a number")]
    return 0 if ok else 1


def main() -> int:
    token = os.environ.get("QUEEN_TOKEN")
    if not token:
        print("QUEEN_TOKEN is not set: make one with `make token NAME=examples`", file=sys.stderr)
        return 2
    return asyncio.run(demo(os.environ.get("QUEEN_URL", "http://127.0.0.1:8000"), token))


if __name__ == "__main__":
    sys.exit(main())
