"""An operator's writes while consumers and producers run, in real processes.

Seeks, group deletes, message deletes and retries take the queue row and
then cursor rows in the order claims and acks do, so none of them
deadlocks or fails with a foreign-key violation: every call answers.
"""

from __future__ import annotations

import random
import time
from typing import Any

from tests.conftest import start_together

QUEUE = "operated"
GROUP = "billing"


def _worker(role: str, seed: int, rounds: int) -> dict[str, Any]:
    """Push, consume (several partitions a claim), or operate on ``operated``.

    Every call must answer with a domain outcome or refusal, never a
    database error.
    """
    from queenadmin.domain import queues
    from queenadmin.domain.queues import groups
    from queenadmin.domain.queues import operator as queue_operator
    from queenadmin.errors import QueenError
    from queenadmin.models import Message

    rng = random.Random(seed)
    start_together()
    done = {"role": role, "pushed": 0, "acked": 0, "operations": 0}
    for n in range(rounds):
        if role == "push":
            items = [
                queues.PushItem(QUEUE, f"p{rng.randrange(4)}", str(i), f"{seed}-{n}-{i}")
                for i in range(rng.randint(1, 10))
            ]
            done["pushed"] += len(queues.queue_push(items=items))
        elif role == "consume":
            claim = queues.queue_claim(
                request=queues.PopRequest(queue=QUEUE, group=GROUP, batch=10, max_partitions=3, lease_seconds=5)
            )
            acks = [
                queues.AckItem(i, m.transaction_id, str(m.partition_id), "completed", claim.lease_id, None, GROUP)
                for i, m in enumerate(claim.messages)
            ]
            done["acked"] += sum(1 for o in queues.queue_ack(items=acks) if o.success)
        else:
            time.sleep(rng.uniform(0.002, 0.01))
            pick = rng.randrange(4)
            if pick == 0:
                groups.queue_group_seek(group=GROUP, queue=QUEUE, to_end=True)
            elif pick == 1:
                groups.queue_group_delete(group=GROUP, queue=QUEUE, delete_metadata=rng.random() < 0.5)
            else:
                row = (
                    Message.objects.filter(partition__queue__name=QUEUE)
                    .order_by("?")
                    .values_list("partition_id", "transaction_id")
                    .first()
                )
                if row is None:
                    continue
                try:
                    if pick == 2:
                        queue_operator.queue_message_delete(partition_id=row[0], transaction_id=row[1])
                    else:
                        queue_operator.queue_message_dead_letter(
                            partition_id=row[0], transaction_id=row[1], group=GROUP
                        )
                except QueenError:
                    pass  # Not the group's next message: a refusal, not a failure.
            done["operations"] += 1
    return done


def test_operator_writes_never_fail_while_consumers_and_producers_run(spawn):
    """No call raises a database error, and no cursor ever stands past its partition's end."""
    from queenadmin.domain import queues
    from queenadmin.models import ConsumerCursor

    # A backlog first, so the consumers have work from their first claim.
    queues.queue_push(items=[queues.PushItem(QUEUE, f"p{i % 4}", str(i)) for i in range(200)])
    roles = [("push", 1, 120), ("consume", 2, 120), ("consume", 3, 120), ("operate", 4, 120)]
    results = spawn(_worker, roles)
    by_role = {r["role"]: r for r in results}
    assert by_role["operate"]["operations"] > 0
    assert sum(r["acked"] for r in results) > 0
    for cursor in ConsumerCursor.objects.select_related("partition"):
        assert cursor.committed_offset <= cursor.partition.next_offset - 1, cursor
        assert cursor.batch_last >= cursor.committed_offset, cursor
