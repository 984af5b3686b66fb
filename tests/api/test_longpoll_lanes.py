"""Pops that join waiting pops of their shape skip their first claim, safely.

A pop arriving while pops of the same queue, consumer group, partition
filter and namespace/task wait, with no wake-up since their claim found
nothing, waits without a claim of its own (``Hub.known_empty``). These
check that no message is missed by that: one whose lease expires, one of
another consumer group, one pushed while they wait.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

pytestmark = pytest.mark.live


def _client(live_server) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=f"{live_server.url}/api/v1",
        headers={"Authorization": f"Bearer {live_server.token}"},
        timeout=30,
    )


async def _waiting(client: httpx.AsyncClient, queue: str, count: int, **params) -> list[asyncio.Future]:
    """``count`` waiting pops, each started after the previous one's claim."""
    pops = []
    for _ in range(count):
        pops.append(
            asyncio.ensure_future(
                client.get(f"/pop/queue/{queue}", params={"wait": "true", "timeout": 8000, "batch": 1, **params})
            )
        )
        await asyncio.sleep(0.3)
    assert not any(p.done() for p in pops)
    return pops


async def test_a_lease_that_expires_reaches_a_pop_that_skipped_its_claim(live_server, unique):
    queue = unique("lanes-lease")
    async with _client(live_server) as client:
        assert (await client.post("/push", json={"items": [{"queue": queue, "payload": "m"}]})).status_code == 201
        first = await client.get(f"/pop/queue/{queue}", params={"wait": "false", "leaseSeconds": 2})
        assert first.status_code == 200
        started = time.monotonic()
        # Three waiters: the first claims (and sees the lease), the others join it.
        pops = await _waiting(client, queue, 3)
        done, pending = await asyncio.wait(pops, timeout=6, return_when=asyncio.FIRST_COMPLETED)
        assert done, "nobody got the message after its lease expired"
        answer = done.pop().result()
        assert answer.status_code == 200
        assert [m["data"] for m in answer.json()["messages"]] == ["m"]
        # Redelivered when the 2 s lease ran out, not at a pop's timeout.
        assert time.monotonic() - started < 5
        for pop in pending:
            pop.cancel()


async def test_another_consumer_group_still_claims(live_server, unique):
    queue = unique("lanes-group")
    async with _client(live_server) as client:
        assert (await client.post("/push", json={"items": [{"queue": queue, "payload": "m"}]})).status_code == 201
        taken = await client.get(f"/pop/queue/{queue}", params={"wait": "false", "consumerGroup": "a"})
        assert taken.status_code == 200
        # Group a has nothing left: its pops wait (and note the empty claim).
        waiting = await _waiting(client, queue, 2, consumerGroup="a")
        # Group b has not seen the message: it gets it at once.
        other = await client.get(f"/pop/queue/{queue}", params={"wait": "true", "timeout": 5000, "consumerGroup": "b"})
        assert other.status_code == 200
        assert [m["data"] for m in other.json()["messages"]] == ["m"]
        assert not any(p.done() for p in waiting)
        for pop in waiting:
            pop.cancel()


async def test_a_push_reaches_the_waiters_that_skipped_their_claim(live_server, unique):
    queue = unique("lanes-push")
    async with _client(live_server) as client:
        assert (await client.post("/configure", json={"queue": queue})).status_code == 200
        pops = await _waiting(client, queue, 5)
        # One partition each: a pop leases the partition it takes from.
        items = [{"queue": queue, "partition": f"p{n}", "payload": n} for n in range(5)]
        assert (await client.post("/push", json={"items": items})).status_code == 201
        answers = await asyncio.wait_for(asyncio.gather(*pops), 5)
    assert [a.status_code for a in answers] == [200] * 5
    assert sorted(m["data"] for a in answers for m in a.json()["messages"]) == list(range(5))
