"""An operator's purge and group seeks racing consumers, in real processes.

Transactions that ack and then push into the partitions being purged, plain
pushes, a named group consuming, an operator seeking that group and two
purgers: no call raises (no deadlock: a purge never waits for a cursor a
claim or an ack holds), and afterwards every partition stores exactly
``log_start..last`` with its retained bytes equal to the payloads stored,
and no cursor stands past the last offset. On SQLite every process queues
for the one write lock.

Every role runs at least ``ROUNDS`` steps, and all of them go on until each
consumer has committed ``COMMITS`` times: a purge that empties the log as
fast as it fills can starve the consumers for a whole fixed-length race (it
did, once in CI, on SQLite), and commits made after the purges stopped
would not be a race at all. The consumers say they are done through a KV
counter, which the others read between steps.
"""

from __future__ import annotations

import random
import time
from typing import Any

from tests.conftest import start_together

QUEUE = "recovered"
GROUP = "audit"
CONSUMERS = ("txn", "group")
ROUNDS = 50
COMMITS = 3
MOST_ROUNDS = 400


def _consumers_done() -> bool:
    from queenadmin.domain import kv

    row = kv.kv_get(namespace="race", key="consumers-done")
    return row is not None and int(row.value) == len(CONSUMERS)


def worker(role: str, seed: int) -> dict[str, Any]:
    from queenadmin.domain import kv, queues, transactions
    from queenadmin.domain.audit import Who
    from queenadmin.domain.queues import operator as queue_operator

    rng = random.Random(seed)
    start_together()
    done: dict[str, Any] = {"role": role, "committed": 0, "deleted": 0, "moved": 0}
    consumer = role in CONSUMERS
    for n in range(MOST_ROUNDS):
        if n >= ROUNDS and (done["committed"] >= COMMITS if consumer else _consumers_done()):
            break
        if role == "purge":
            step = queue_operator.queue_purge(queue=QUEUE, who=Who("ann"), batch=rng.randint(1, 20))
            done["deleted"] += step.deleted
        elif role == "seek":
            to = rng.choice(["start", "end"])
            done["moved"] += queue_operator.queue_group_operator(
                queue=QUEUE, group=GROUP, action="seek", to=to, who=Who("ann")
            ).cursors
        elif role == "push":
            items = [queues.PushItem(QUEUE, f"p{rng.randrange(3)}", "1", f"{seed}-{n}-{i}") for i in range(5)]
            queues.queue_push(items=items)
        else:
            group = GROUP if role == "group" else queues.QUEUE_MODE
            claim = queues.queue_claim(request=queues.PopRequest(queue=QUEUE, group=group, batch=rng.randint(1, 10)))
            acks = tuple(
                queues.AckItem(i, m.transaction_id, str(m.partition_id), "completed", claim.lease_id, None, group)
                for i, m in enumerate(claim.messages)
            )
            pushes = tuple(
                transactions.TxnPush(len(acks) + j, queues.PushItem(QUEUE, m.partition, "2", f"{seed}-{n}-out-{j}"))
                for j, m in enumerate(claim.messages[:2])
            )
            if acks:
                outcome = transactions.txn_commit(bundle=transactions.TxnBundle(acks=acks, pushes=pushes))
                done["committed"] += outcome.success
        time.sleep(rng.uniform(0, 0.005))
    if consumer:
        kv.kv_incr(namespace="race", key="consumers-done", delta=1, ttl=None)
    return done


def test_purges_and_seeks_racing_consumers_keep_the_log_consistent(spawn):
    from queenadmin.domain import queues
    from queenadmin.models import ConsumerCursor, Message, Partition

    queues.queue_push(items=[queues.PushItem(QUEUE, f"p{i}", "0", f"seed-{i}") for i in range(3)])
    queues.queue_claim(request=queues.PopRequest(queue=QUEUE, group=GROUP, auto_ack=True))
    roles = [("txn", 1), ("group", 2), ("push", 3), ("seek", 4), ("purge", 5), ("purge", 6)]
    results = spawn(worker, roles)
    assert sum(r["deleted"] for r in results) > 0
    assert [r["committed"] >= COMMITS for r in results if r["role"] in CONSUMERS] == [True, True]
    last = {}
    for pid, log_start, next_offset, size in Partition.objects.filter(queue__name=QUEUE).values_list(
        "id", "log_start", "next_offset", "retained_bytes"
    ):
        rows = list(Message.objects.filter(partition_id=pid).order_by("offset").values_list("offset", "payload"))
        assert [o for o, _ in rows] == list(range(log_start, next_offset))
        assert size == sum(len(p.encode()) for _, p in rows)
        last[pid] = next_offset - 1
    for pid, committed, batch_last in ConsumerCursor.objects.filter(partition__queue__name=QUEUE).values_list(
        "partition_id", "committed_offset", "batch_last"
    ):
        assert committed <= batch_last <= last[pid]
