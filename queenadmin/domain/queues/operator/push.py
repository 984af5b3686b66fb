"""An operator's push of one message into an existing queue, audited.

The same append as a client's push (``push.queue_push_in_txn``: dedup by
transactionId, ``maxSize``, wake-ups), stamped with the operator as its
producer (``producerSub``, as a client's push is stamped with its token's
name), with the operator's audit entry in the same transaction. A push
that the partition already held (a duplicate transactionId) writes nothing
and is not audited.
"""

from __future__ import annotations

from datetime import datetime

from django.db import connection, transaction

from queenadmin.domain import clock
from queenadmin.domain.audit import Who
from queenadmin.domain.queues.board import has_nul
from queenadmin.domain.queues.push import PushItem, PushResult, queue_push_in_txn
from queenadmin.domain.queues.refs import lock_queue_rows
from queenadmin.errors import QueueNotFound
from queenadmin.models.queues import Queue


def queue_operator_push_in_txn(*, item: PushItem, who: Who, now: datetime | None = None) -> PushResult:
    """Append ``item`` to its queue, which must exist, on ``who``'s word.

    The message's ``producerSub`` is ``who.actor``. Returns the push's
    result: ``queued`` (audited as ``queue.push`` on the queue, naming the
    message, its partition, offset and transactionId, not its payload) or ``duplicate`` (nothing
    written, nothing audited). Raises ``QueueNotFound`` when there is no
    such queue (an operator pushes into the queue whose page they see; a
    client's push would create it) and ``QueueFull`` when the queue's
    ``maxSize`` refuses the message. Runs inside the caller's transaction.
    """
    assert connection.in_atomic_block
    now = now or clock.now()
    queue_id = (
        None if has_nul(item.queue) else Queue.objects.filter(name=item.queue).values_list("id", flat=True).first()
    )
    # Held FOR KEY SHARE as every writer of the queue holds it: a delete
    # waits for this push, and a push after a delete finds no queue.
    if queue_id is None or not lock_queue_rows([queue_id]):
        raise QueueNotFound(f"no queue {item.queue}")
    (result,) = queue_push_in_txn(items=[item], now=now, producer_sub=who.actor)
    if result.status == "queued":
        size = len(item.payload_json.encode())
        who.record_in_txn(
            now=now,
            action="queue.push",
            target=item.queue,
            after=(
                f"message {result.message_id} in partition {item.partition} at offset {result.offset},"
                f" transactionId {result.transaction_id}, {size:,} bytes of JSON, producerSub {who.actor}"
            ),
        )
    return result


#: ``queue_operator_push_in_txn`` as its own transaction: must be the outermost call.
queue_operator_push = transaction.atomic(durable=True)(queue_operator_push_in_txn)
