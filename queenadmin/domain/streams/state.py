"""Stream state: rows of (query, source partition, key), and the state part of a cycle.

``stream_state_apply_in_txn`` is the in-transaction form a cycle's bundle
runs (``domain/transactions.py``); ``stream_state_get`` the read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import connection

from queenadmin.conf import settings
from queenadmin.domain.queues.refs import lock_queue_rows
from queenadmin.domain.streams.store import StateFilter, StateRow, store
from queenadmin.errors import StreamNotFound, StreamStateTooLarge
from queenadmin.models import Partition, StreamQuery


@dataclass(frozen=True, slots=True)
class StateUpsert:
    key: str
    #: The value as compact JSON text.
    value_json: str
    #: ``ripe_at_ms(value)``: when its window ends, if it is one.
    ripe_at_ms: int | None = None


@dataclass(frozen=True, slots=True)
class StateDelete:
    key: str


StateOp = StateUpsert | StateDelete


@dataclass(frozen=True)
class StreamStateOps:
    """The state part of one cycle: ``ops`` in order, on one source partition."""

    query_id: UUID
    partition_id: int
    ops: tuple[StateOp, ...] = ()
    #: The cycle's ack completes the lease's whole batch (Queen's log
    #: engine): the runner sends the last message in its own order, which
    #: need not be the batch's last offset.
    release_lease: bool = False


def ripe_at_ms(value: Any) -> int | None:
    """``value.windowEnd`` when it is a JSON number, rounded up to a whole ms."""
    if not isinstance(value, dict):
        return None
    end = value.get("windowEnd")
    if isinstance(end, bool) or not isinstance(end, int | float) or not math.isfinite(end):
        return None
    # Clamped to what a BIGINT holds; a whole number of ms stays exact.
    return int(max(-(2**63), min(2**63 - 1, math.ceil(end))))


def check_state_op(op: StateOp) -> None:
    """Raise ``StreamStateTooLarge`` for a key or value over its limit."""
    if len(op.key.encode()) > settings.STREAMS_MAX_STATE_KEY_BYTES:
        raise StreamStateTooLarge(f"a state key is over {settings.STREAMS_MAX_STATE_KEY_BYTES} bytes")
    if isinstance(op, StateUpsert) and len(op.value_json.encode()) > settings.STREAMS_MAX_STATE_VALUE_BYTES:
        raise StreamStateTooLarge(
            f"the state value of {op.key[:64]!r} is over {settings.STREAMS_MAX_STATE_VALUE_BYTES} bytes"
        )


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


def stream_state_get(*, query_id: UUID, partition_id: int, which: StateFilter) -> list[StateRow]:
    """The state rows of (query, partition) that ``which`` selects, by key.

    An unknown query or partition has no rows. Never locks.
    """
    return store().read(query_id, partition_id, which)
