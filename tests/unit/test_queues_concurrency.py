"""Claims and acks from several processes at once, on either database.

Four consumer processes drain one queue of 2,000 messages (1,000 at
``QA_SCALE=ci``, tests/scale.py) over 8 partitions. Some batches are abandoned (the worker "crashes"), so their
leases expire and the messages come back. Afterwards: every message was
acked exactly once, no message was out under two live leases at once, and
each partition was consumed in offset order. On PostgreSQL claims skip
locked rows; on SQLite the processes queue for the database's one write
lock; the invariants are the same.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from datetime import timedelta
from typing import Any

from tests.conftest import start_together
from tests.scale import scaled, sized

pytestmark = scaled

QUEUE = "race"
PARTITIONS = 8
MESSAGES = sized(ci=1000, full=2000)
LEASE_SECONDS = 1


# Workers run in spawned processes that import this module before Django is
# set up, so the domain is imported inside the functions.
def _push(partition: str, count: int) -> None:
    """Append ``count`` messages to ``partition``, each with its own id."""
    from queenadmin.domain import queues

    items = [queues.PushItem(QUEUE, partition, str(i), f"{partition}-{i}") for i in range(count)]
    queues.queue_push(items=items)


def _claim(batch: int) -> Any:
    from queenadmin.domain import queues

    return queues.queue_claim(request=queues.PopRequest(queue=QUEUE, batch=batch, lease_seconds=LEASE_SECONDS))


def _ack_all(claim: Any) -> list[Any]:
    """Ack every message of ``claim`` as completed; one outcome each."""
    from queenadmin.domain import queues

    items = [
        queues.AckItem(i, m.transaction_id, str(m.partition_id), "completed", claim.lease_id)
        for i, m in enumerate(claim.messages)
    ]
    return queues.queue_ack(items=items)


def _pending() -> int | None:
    """Messages of the queue not yet acked; None before it exists."""
    from queenadmin.domain import queues

    stats = queues.queue_stats(name=QUEUE)
    return None if stats is None else stats.totals.pending


def consume(worker: int, seed: int) -> dict[str, Any]:
    """Drain the queue; abandon about one batch in 15. Returns a record."""
    from queenadmin.domain import clock
    from queenadmin.models import ConsumerCursor

    rng = random.Random(seed)
    claims: list[dict[str, Any]] = []
    acks: list[tuple[int, int, bool, bool]] = []  # partition, offset, success, noop
    idle_since = None
    start_together()
    while True:
        claim = _claim(rng.randint(5, 40))
        returned_at = clock.now()
        if not claim.messages:
            if _pending() == 0:
                break
            idle_since = idle_since or time.monotonic()
            if time.monotonic() - idle_since > 60:
                raise AssertionError("no progress for 60 s")
            time.sleep(0.02)
            continue
        idle_since = None
        leased_until = ConsumerCursor.objects.filter(lease_id=claim.lease_id).values_list("leased_until", flat=True)[0]
        record: dict[str, Any] = {
            "worker": worker,
            "partition": claim.partition_id,
            "offsets": [m.offset for m in claim.messages],
            "claimed_at": leased_until - timedelta(seconds=LEASE_SECONDS),
            "leased_until": leased_until,
            "returned_at": returned_at,
            "ack_started": None,
        }
        claims.append(record)
        if rng.random() < 1 / 15:
            continue  # Crash: leave the lease to expire.
        record["ack_started"] = clock.now()
        outcomes = _ack_all(claim)
        for m, outcome in zip(claim.messages, outcomes, strict=True):
            acks.append((m.partition_id, m.offset, outcome.success, outcome.noop))
        # An ack that came after its lease expired and another worker had
        # acked the same offsets answers success as a no-op: that batch did
        # not move the cursor, so it does not count as acked here.
        record["acked"] = all(a[2] and not a[3] for a in acks[-len(outcomes) :])
    return {"claims": claims, "acks": acks}


def test_four_consumers_ack_every_message_exactly_once_in_order(spawn):
    """Every message is acked exactly once, never under two live leases,
    and each partition is consumed in offset order."""
    for p in range(PARTITIONS):
        _push(f"p{p}", MESSAGES // PARTITIONS)

    records = spawn(consume, [(w, 1000 + w) for w in range(4)])

    acked: dict[tuple[int, int], int] = defaultdict(int)
    for record in records:
        for partition, offset, success, noop in record["acks"]:
            if success and not noop:
                acked[(partition, offset)] += 1
    assert len(acked) == MESSAGES
    assert set(acked.values()) == {1}

    by_partition: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        for c in record["claims"]:
            by_partition[c["partition"]].append(c)
    assert len(by_partition) == PARTITIONS
    redelivered = 0
    for claims in by_partition.values():
        # In claim order: each claim starts at the cursor, so by first offset;
        # a redelivery starts where the expired batch did, after it.
        claims.sort(key=lambda c: (c["offsets"][0], c["claimed_at"]))
        acked_upto = -1  # offsets start at 0
        previous = None
        for c in claims:
            offsets = c["offsets"]
            # FIFO: every batch is the next run of offsets after the cursor.
            assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))
            assert offsets[0] == acked_upto + 1
            if previous is not None:
                # Never two live leases. The claim's own time is read when its
                # transaction begins, before it may wait on the cursor row:
                # so an expiry is judged by that time (the claim decided with
                # it), and an ack by when the claim returned, which is after
                # the ack that freed the partition committed, so after it started.
                if previous["ack_started"] is not None and previous.get("acked"):
                    assert c["returned_at"] >= previous["ack_started"]
                else:
                    assert c["claimed_at"] >= previous["leased_until"]
                if previous["ack_started"] is None:
                    redelivered += 1
            if c.get("acked"):
                acked_upto = offsets[-1]
            previous = c
        assert acked_upto == MESSAGES // PARTITIONS - 1
    assert redelivered > 0


BUSY = "busy"


def _busy_worker(role: str, seed: int, rounds: int) -> dict[str, Any]:
    """Push batches to ``busy`` and claim/ack from it, or delete it now and then.

    Every call must answer (a domain outcome), never raise: a foreign-key
    violation or a deadlock would surface here as an exception.
    """
    from queenadmin.domain import queues

    rng = random.Random(seed)
    start_together()
    done = {"role": role, "pushed": 0, "deleted": 0, "acked": 0}
    for n in range(rounds):
        if role == "delete":
            time.sleep(rng.uniform(0.005, 0.03))
            done["deleted"] += int(queues.queue_delete(name=BUSY))
        elif role == "push":
            items = [
                queues.PushItem(BUSY, f"p{rng.randrange(3)}", str(i), f"{seed}-{n}-{i}")
                for i in range(rng.randint(1, 20))
            ]
            done["pushed"] += len(queues.queue_push(items=items))
        else:
            claim = queues.queue_claim(request=queues.PopRequest(queue=BUSY, batch=10, lease_seconds=5))
            acks = [
                queues.AckItem(i, m.transaction_id, str(m.partition_id), "completed", claim.lease_id)
                for i, m in enumerate(claim.messages)
            ]
            done["acked"] += sum(1 for o in queues.queue_ack(items=acks) if o.success)
    return done


def test_a_busy_queue_can_be_deleted_while_pushes_claims_and_acks_run(spawn):
    """Deletes serialize with pushes, claims and acks on the queue row: no
    call fails, later pushes recreate the queue, and every surviving
    partition's offsets run 0..n-1 without a gap."""
    from queenadmin.models import Message, Partition

    rounds, deletes = sized(ci=(80, 15), full=(150, 25))
    roles = [("push", 1, rounds), ("push", 2, rounds), ("consume", 3, rounds), ("delete", 4, deletes)]
    results = spawn(_busy_worker, roles)
    by_role = {r["role"]: r for r in results}
    assert by_role["delete"]["deleted"] > 0
    assert sum(r["pushed"] for r in results) > 0
    for partition in Partition.objects.all():
        offsets = sorted(Message.objects.filter(partition=partition).values_list("offset", flat=True))
        assert offsets == list(range(partition.next_offset)), partition
