"""A stream cycle's state ops, applied inside the caller's transaction.

Apart from ``calls`` because the transaction machinery
(``domain/transactions.py``) runs it, and ``calls`` runs the machinery.
"""

from __future__ import annotations

from datetime import datetime

from django.db import connection

from queenadmin.domain.queues.refs import lock_queue_rows
from queenadmin.domain.streams.ops import StateDelete, StateOp, StateUpsert, StreamStateOps, check_state_op
from queenadmin.domain.streams.store import StateRow, store
from queenadmin.errors import StreamNotFound
from queenadmin.models import Partition, StreamQuery


def stream_state_apply_in_txn(*, ops: StreamStateOps, now: datetime) -> int:
    """Apply ``ops`` inside the caller's transaction (asserted); the ops applied.

    Holds the source queue's row (as every writer of its partitions does)
    and the lock of (query, partition) until the caller commits, so the
    cycles of a partition take turns. An upsert stores its value (``{}``
    when the client sent none), a delete of a missing key is fine; the
    last op of a key decides it. Raises ``StreamNotFound`` for an unknown
    query or partition, ``StreamStateTooLarge`` for a key or value over
    its limit.
    """
    assert connection.in_atomic_block
    for op in ops.ops:
        check_state_op(op)
    source = StreamQuery.objects.filter(pk=ops.query_id).values_list("source_queue", flat=True).first()
    if source is None:
        raise StreamNotFound("query not found")
    # Only a partition of the query's source queue: state elsewhere would be
    # out of reach of the grants that guard the source.
    found = Partition.objects.filter(pk=ops.partition_id, queue__name=source).values_list("queue_id", flat=True).first()
    if found is None or not lock_queue_rows([found]):
        raise StreamNotFound("partition not found")
    store().lock_partition(ops.query_id, ops.partition_id)
    final: dict[str, StateOp] = {}
    for op in ops.ops:
        final.pop(op.key, None)
        final[op.key] = op
    upserts = [
        StateRow(op.key, op.value_json, op.ripe_at_ms, now) for op in final.values() if isinstance(op, StateUpsert)
    ]
    deletes = [op.key for op in final.values() if isinstance(op, StateDelete)]
    store().delete(ops.query_id, ops.partition_id, deletes)
    store().upsert(ops.query_id, ops.partition_id, upserts)
    return len(ops.ops)
