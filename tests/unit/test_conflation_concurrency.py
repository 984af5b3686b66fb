"""Conflating consumers of one group in several processes while pushes run.

Two producers append numbered messages to four partitions; three
consumers of one conflating group claim and ack until the producers are
done and nothing is pending. Afterwards: a partition was never out under
two leases at once, each consumer's deliveries of a partition only ever
move forward, the last message of every partition was delivered (the
newest always wins in the end), and the cursor ends at the tail. On
PostgreSQL claims skip locked cursor rows; on SQLite processes take turns
for the write lock; the invariants are the same.
"""

from __future__ import annotations

import itertools
import time
from collections import defaultdict
from typing import Any

from tests.conftest import start_together
from tests.scale import scaled, sized

pytestmark = scaled

QUEUE = "conflate-race"
GROUP = "latest"
PARTITIONS = 4
ROUNDS = sized(ci=40, full=200)
PRODUCERS = 2
#: Every message the producers push, together.
TOTAL = PRODUCERS * sum(1 + n % 3 for n in range(ROUNDS))


def produce(worker: int) -> dict[str, int]:
    """Push ``ROUNDS`` batches of 1..3 messages to each partition in turn."""
    from queenadmin.domain import queues
    from queenadmin.plumbing.db import json_text

    start_together()
    pushed: dict[str, int] = defaultdict(int)
    for n in range(ROUNDS):
        partition = f"p{n % PARTITIONS}"
        items = [
            queues.PushItem(QUEUE, partition, json_text([worker, n, i]), f"{worker}-{n}-{i}") for i in range(1 + n % 3)
        ]
        queues.queue_push(items=items)
        pushed[partition] += len(items)
    return dict(pushed)


def consume(worker: int) -> dict[str, Any]:
    """Claim (conflating) and ack until every push is in and nothing is pending."""
    from queenadmin.domain import clock, queues

    start_together()
    claims: list[dict[str, Any]] = []
    idle_since = None
    while True:
        claim = queues.queue_claim(
            request=queues.PopRequest(queue=QUEUE, group=GROUP, conflation=True, conflation_width=2, lease_seconds=30)
        )
        returned_at = clock.now()
        if not claim.messages:
            stats = queues.queue_stats(name=QUEUE, group=GROUP)
            assert stats is not None
            if stats.totals.total == TOTAL and stats.totals.pending == 0:
                break
            idle_since = idle_since or time.monotonic()
            if time.monotonic() - idle_since > 60:
                raise AssertionError("no progress for 60 s")
            time.sleep(0.01)
            continue
        idle_since = None
        assert len(claim.messages) == len(claim.partitions)
        ack_started = clock.now()
        items = [
            queues.AckItem(i, m.transaction_id, str(m.partition_id), "completed", claim.lease_id, None, GROUP)
            for i, m in enumerate(claim.messages)
        ]
        outcomes = queues.queue_ack(items=items)
        assert all(o.success and not o.noop for o in outcomes)
        for m in claim.messages:
            claims.append(
                {
                    "partition": m.partition,
                    "offset": m.offset,
                    "returned_at": returned_at,
                    "ack_started": ack_started,
                }
            )
    return {"claims": claims}


def _run(spawn: Any) -> tuple[list[dict[str, int]], list[dict[str, Any]]]:
    from queenadmin.domain import queues

    queues.queue_configure(request=queues.ConfigureRequest(QUEUE))
    # Register the group as conflating before anything is pushed.
    queues.queue_claim(request=queues.PopRequest(queue=QUEUE, group=GROUP, conflation=True))
    results = spawn(_either, [("produce", w) for w in range(PRODUCERS)] + [("consume", w) for w in range(3)])
    produced = [r for r in results if "claims" not in r]
    consumed = [r for r in results if "claims" in r]
    return produced, consumed


def _either(role: str, worker: int) -> Any:
    return produce(worker) if role == "produce" else consume(worker)


def test_conflating_consumers_never_share_a_partition_and_end_on_the_newest(spawn):
    """No two leases of a partition overlap, deliveries move forward, and
    every partition's last message is delivered with the cursor at the tail."""
    from queenadmin.models import ConsumerCursor, Partition

    produced, consumed = _run(spawn)
    pushed: dict[str, int] = defaultdict(int)
    for record in produced:
        for partition, count in record.items():
            pushed[partition] += count
    tails = dict(Partition.objects.filter(queue__name=QUEUE).values_list("name", "next_offset"))
    by_partition: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in consumed:
        for c in record["claims"]:
            by_partition[c["partition"]].append(c)
    assert set(by_partition) == set(pushed)
    delivered = 0
    for partition, claims in by_partition.items():
        claims.sort(key=lambda c: c["offset"])
        offsets = [c["offset"] for c in claims]
        # Every delivery of a partition acked past an older one: strictly forward.
        assert offsets == sorted(set(offsets))
        for previous, c in itertools.pairwise(claims):
            # The next lease of the partition came after the previous ack began.
            assert c["returned_at"] >= previous["ack_started"]
        # The newest message always wins in the end.
        assert offsets[-1] == tails[partition] - 1
        delivered += len(offsets)
    committed = dict(
        ConsumerCursor.objects.filter(partition__queue__name=QUEUE, group=GROUP).values_list(
            "partition__name", "committed_offset"
        )
    )
    assert committed == {name: tail - 1 for name, tail in tails.items()}
    assert sum(pushed.values()) == TOTAL
    assert delivered <= TOTAL
