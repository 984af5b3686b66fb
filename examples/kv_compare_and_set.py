"""Compare-and-set on a KV key, and a counter with a ceiling.

Two clerks edit the same cart. Each reads it, and the read answers the
key's version. Each writes with ``expect=<that version>``: the write applies
only if nobody wrote since. The first write applies and moves the version;
the second finds it moved and is refused with ``applied: False``, and the
answer carries the value that is there now, so the loser can decide again
without a second read. Nobody overwrites what they never saw.

Then ``incr`` with ``max``: a rate limit in one call. An increment past the
ceiling does not apply (reason ``limit``) and spends nothing.

Run it against a local server::

    make run                        # in another terminal
    make token NAME=examples        # prints the token on its last line
    QUEEN_TOKEN=qa_... .venv/bin/python examples/kv_compare_and_set.py

``QUEEN_URL`` names another server (default ``http://127.0.0.1:8000``). It
prints::

    alice and bob read customer-7's cart: {'items': 3}
    alice writes {'items': 4} expecting the version she read: applied True
    bob writes {'items': 10} expecting the same version: applied False (version), the cart is {'items': 4}
    bob adds his 6 items to what is there now: applied True, the cart is {'items': 10}
    5 calls against a limit of 3 a minute: admitted 3, refused 2 (limit)
"""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import timedelta

from queen import Queen

CARTS = "shop-carts"
LIMITS = "api-limits"
CUSTOMER = "customer-7"
CALLS_PER_MINUTE = 3


async def demo(url: str, token: str) -> int:
    async with Queen(url=url, bearer_token=token) as queen:
        week = timedelta(days=7)
        # A plain put (no expect) writes whatever is there: the demo's start.
        await queen.kv.put(CARTS, CUSTOMER, {"items": 3}, ttl=week)

        alice = await queen.kv.get(CARTS, CUSTOMER)
        bob = await queen.kv.get(CARTS, CUSTOMER)
        print(f"alice and bob read {CUSTOMER}'s cart: {alice['value']}")

        first = await queen.kv.put(CARTS, CUSTOMER, {"items": 4}, ttl=week, expect=alice["version"])
        print(f"alice writes {{'items': 4}} expecting the version she read: applied {first['applied']}")

        stale = await queen.kv.put(CARTS, CUSTOMER, {"items": 10}, ttl=week, expect=bob["version"])
        print(
            f"bob writes {{'items': 10}} expecting the same version: applied {stale['applied']}"
            f" ({stale.get('reason')}), the cart is {stale['value']}"
        )

        # The refusal carried the current value and version: decide again
        # from those, and write on that version.
        merged = {"items": stale["value"]["items"] + 6}
        again = await queen.kv.put(CARTS, CUSTOMER, merged, ttl=week, expect=stale["version"])
        cart = await queen.kv.get(CARTS, CUSTOMER)
        print(f"bob adds his 6 items to what is there now: applied {again['applied']}, the cart is {cart['value']}")

        # A fresh window for the demo: delete whatever an earlier run counted.
        await queen.kv.delete(LIMITS, CUSTOMER)
        calls = [
            await queen.kv.incr(LIMITS, CUSTOMER, delta=1, max=CALLS_PER_MINUTE, ttl=timedelta(minutes=1))
            for _ in range(5)
        ]
        admitted = sum(1 for call in calls if call["applied"])
        reasons = sorted({call["reason"] for call in calls if not call["applied"]})
        print(
            f"5 calls against a limit of {CALLS_PER_MINUTE} a minute:"
            f" admitted {admitted}, refused {5 - admitted} ({', '.join(reasons)})"
        )
    ok = (
        first["applied"]
        and not stale["applied"]
        and again["applied"]
        and cart["value"] == {"items": 10}
        and (admitted, reasons) == (CALLS_PER_MINUTE, ["limit"])
    )
    return 0 if ok else 1


def main() -> int:
    token = os.environ.get("QUEEN_TOKEN")
    if not token:
        print("QUEEN_TOKEN is not set: make one with `make token NAME=examples`", file=sys.stderr)
        return 2
    return asyncio.run(demo(os.environ.get("QUEEN_URL", "http://127.0.0.1:8000"), token))


if __name__ == "__main__":
    sys.exit(main())
