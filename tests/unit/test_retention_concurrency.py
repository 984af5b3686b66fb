"""Retention sweeps racing pushes, claims and acks, in real processes.

Two pushers fill three partitions; two queue-mode consumers and one named
group ("audit") drain them; two sweepers delete, as often as they can,
every message both groups are done with (completedRetentionSeconds, with a
clock an hour ahead) and nothing else (retentionSeconds is a day). No call
may fail (a deadlock or a foreign-key violation would raise here); each
group receives every message; afterwards no message row is left and every
partition's log start, depth and retained bytes are exact. On PostgreSQL
the sweepers skip partitions a push or the other sweeper holds; on SQLite
every process queues for the one write lock. Each pusher sends 600
messages at ``QA_SCALE=full``, 200 at ``ci`` (tests/scale.py).
"""

from __future__ import annotations

import random
import time
from datetime import timedelta
from typing import Any

from tests.conftest import start_together
from tests.scale import scaled, sized

QUEUE = "swept"
PARTITIONS = 3
PER_PUSHER = sized(ci=200, full=600)
PUSHERS = 2
GROUPS = ("__QUEUE_MODE__", "audit")


def _all_pushed_and_done() -> bool:
    from django.db.models import Sum

    from queenadmin.domain import queues
    from queenadmin.models import Partition

    # Offsets start at 0: the next offsets sum to the messages pushed.
    pushed = Partition.objects.filter(queue__name=QUEUE).aggregate(n=Sum("next_offset"))["n"] or 0
    if pushed != PUSHERS * PER_PUSHER + PARTITIONS:
        return False
    return all((s := queues.queue_stats(name=QUEUE, group=g)) is not None and s.totals.pending == 0 for g in GROUPS)


def worker(role: str, seed: int) -> dict[str, Any]:
    from queenadmin.domain import clock, queues

    rng = random.Random(seed)
    start_together()
    done: dict[str, Any] = {"role": role, "received": [], "deleted": 0}
    if role == "push":
        sent = 0
        while sent < PER_PUSHER:
            n = min(PER_PUSHER - sent, rng.randint(1, 40))
            items = [
                queues.PushItem(QUEUE, f"p{rng.randrange(PARTITIONS)}", str(i), f"{seed}-{sent + i}") for i in range(n)
            ]
            assert all(r.status == "queued" for r in queues.queue_push(items=items))
            sent += n
        return done
    deadline = time.monotonic() + 240
    while not _all_pushed_and_done():
        assert time.monotonic() < deadline, "no progress"
        if role == "sweep":
            ahead = clock.now() + timedelta(hours=1)
            done["deleted"] += queues.queue_retention_sweep(now=ahead, batch=rng.randint(5, 50)).deleted
            time.sleep(0.005)
            continue
        group = "audit" if role == "audit" else queues.QUEUE_MODE
        claim = queues.queue_claim(
            request=queues.PopRequest(
                queue=QUEUE, group=group, batch=rng.randint(1, 30), lease_seconds=30, subscription_mode="all"
            )
        )
        if not claim.messages:
            time.sleep(0.01)
            continue
        outcomes = queues.queue_ack(
            items=[
                queues.AckItem(i, m.transaction_id, str(m.partition_id), "completed", claim.lease_id, None, group)
                for i, m in enumerate(claim.messages)
            ]
        )
        assert all(o.success for o in outcomes), outcomes
        done["received"] += [m.transaction_id for m in claim.messages]
    return done


@scaled
def test_sweeps_racing_pushes_claims_and_acks_lose_nothing_unexpired(spawn):
    from queenadmin.domain import clock, queues
    from queenadmin.models import Message, Partition

    queues.queue_configure(
        request=queues.ConfigureRequest(
            QUEUE,
            options=queues.QueueOptions(
                (("retentionEnabled", True), ("retentionSeconds", 86400), ("completedRetentionSeconds", 60))
            ),
        )
    )
    # Both groups consume from the start: one message per partition, read
    # and acked by each, gives every partition a cursor of each group.
    queues.queue_push(items=[queues.PushItem(QUEUE, f"p{p}", "0", f"seed-{p}") for p in range(PARTITIONS)])
    for group in GROUPS:
        claim = queues.queue_claim(
            request=queues.PopRequest(queue=QUEUE, group=group, batch=10, max_partitions=PARTITIONS)
        )
        acks = [
            queues.AckItem(i, m.transaction_id, str(m.partition_id), "completed", claim.lease_id, None, group)
            for i, m in enumerate(claim.messages)
        ]
        assert len(acks) == PARTITIONS
        assert all(o.success for o in queues.queue_ack(items=acks))
    roles = [("push", 1), ("push", 2), ("queue", 3), ("queue", 4), ("audit", 5), ("sweep", 6), ("sweep", 7)]
    results = spawn(worker, roles)

    expected = sorted(f"{seed}-{i}" for seed in (1, 2) for i in range(PER_PUSHER))
    queue_mode = sorted(t for r in results if r["role"] == "queue" for t in r["received"])
    audit = sorted(t for r in results if r["role"] == "audit" for t in r["received"])
    assert queue_mode == expected
    assert audit == expected
    swept = sum(r["deleted"] for r in results if r["role"] == "sweep")
    final = queues.queue_retention_sweep(now=clock.now() + timedelta(hours=1)).deleted
    assert swept > 0
    assert swept + final == PUSHERS * PER_PUSHER + PARTITIONS
    assert Message.objects.filter(partition__queue__name=QUEUE).count() == 0
    for log_start, next_offset, size in Partition.objects.filter(queue__name=QUEUE).values_list(
        "log_start", "next_offset", "retained_bytes"
    ):
        assert (log_start, size) == (next_offset, 0)
    for group in GROUPS:
        stats = queues.queue_stats(name=QUEUE, group=group)
        assert stats is not None
        assert (stats.totals.total, stats.totals.pending) == (0, 0)


CAPPED = "capped"
MAX_SIZE = 50


def capped_pusher(seed: int) -> list[str]:
    from queenadmin.domain import queues

    rng = random.Random(seed)
    start_together()
    statuses = []
    for n in range(30):
        items = [queues.PushItem(CAPPED, f"p{rng.randrange(4)}", "0", f"{seed}-{n}")]
        statuses += [r.status for r in queues.queue_push(items=items)]
    return statuses


def test_max_size_holds_exactly_under_racing_pushes(spawn):
    """Four processes push one message at a time to a queue capped at 50
    over four partitions: exactly 50 are queued, the rest refused."""
    from queenadmin.domain import queues
    from queenadmin.models import Message

    queues.queue_configure(
        request=queues.ConfigureRequest(CAPPED, options=queues.QueueOptions((("maxSize", MAX_SIZE),)))
    )
    statuses = [s for result in spawn(capped_pusher, [(seed,) for seed in range(4)]) for s in result]
    assert statuses.count("queued") == MAX_SIZE
    assert statuses.count("failed") == 4 * 30 - MAX_SIZE
    assert Message.objects.filter(partition__queue__name=CAPPED).count() == MAX_SIZE


CHURN = "churn"


def churn_worker(role: str, seed: int) -> dict[str, Any]:
    """Consume with transactions (ack, then push into the same partitions),
    push, or sweep with a 1 s retention and a clock up to 2 s ahead. Every
    call answers; none raises."""
    from queenadmin.domain import clock, queues, transactions

    rng = random.Random(seed)
    start_together()
    done: dict[str, Any] = {"role": role, "committed": 0, "rolled_back": 0, "deleted": 0}
    for n in range(60):
        if role == "sweep":
            ahead = clock.now() + timedelta(seconds=rng.uniform(0, 2))
            done["deleted"] += queues.queue_retention_sweep(now=ahead, batch=rng.randint(1, 20)).deleted
        elif role == "push":
            items = [queues.PushItem(CHURN, f"p{rng.randrange(3)}", "1", f"{seed}-{n}-{i}") for i in range(5)]
            queues.queue_push(items=items)
        else:
            claim = queues.queue_claim(request=queues.PopRequest(queue=CHURN, batch=rng.randint(1, 10)))
            acks = tuple(
                queues.AckItem(i, m.transaction_id, str(m.partition_id), "completed", claim.lease_id)
                for i, m in enumerate(claim.messages)
            )
            pushes = tuple(
                transactions.TxnPush(len(acks) + j, queues.PushItem(CHURN, m.partition, "2", f"{seed}-{n}-out-{j}"))
                for j, m in enumerate(claim.messages[:2])
            )
            if acks:
                outcome = transactions.txn_commit(bundle=transactions.TxnBundle(acks=acks, pushes=pushes))
                done["committed" if outcome.success else "rolled_back"] += 1
        time.sleep(rng.uniform(0, 0.005))
    return done


def test_sweeps_racing_transactions_that_ack_and_push_keep_the_log_consistent(spawn):
    """Transactions that ack and push into the partitions being swept, plain
    pushes and two sweepers: nothing raises (no deadlock, no foreign-key
    error), and every partition stores exactly log_start..last with its
    retained bytes equal to the payloads stored."""
    from queenadmin.domain import queues
    from queenadmin.models import Message, Partition

    queues.queue_configure(
        request=queues.ConfigureRequest(
            CHURN, options=queues.QueueOptions((("retentionEnabled", True), ("retentionSeconds", 1)))
        )
    )
    roles = [("txn", 1), ("txn", 2), ("push", 3), ("sweep", 4), ("sweep", 5)]
    results = spawn(churn_worker, roles)
    assert sum(r["committed"] for r in results) > 0
    for pid, log_start, next_offset, size in Partition.objects.filter(queue__name=CHURN).values_list(
        "id", "log_start", "next_offset", "retained_bytes"
    ):
        rows = list(Message.objects.filter(partition_id=pid).order_by("offset").values_list("offset", "payload"))
        assert [o for o, _ in rows] == list(range(log_start, next_offset))
        assert size == sum(len(p.encode()) for _, p in rows)
