"""Streams (Queen's ``/streams/v1``): the commands, results and rules of a
query's registration, its cycle and its state ops (the calls: ``calls``).

Windowing, gates and reduce run in the client; the broker keeps three
things for it. A **query** row per pipeline name with the hash of its
operator config (a changed hash needs ``reset``, which wipes the state). A
**state** row per (query, source partition, key) (``state``), with the
``windowEnd`` of a window's value kept as ``ripe_at_ms`` for the idle
flush. And the **cycle**: a partition's state ops, its sink pushes and the
ack of its source messages, one bundle of the transaction machinery
(``domain/transactions.py``), so a worker that dies mid-cycle leaves
either all of it or none.

The ack is fenced: it must name the live lease, so a cycle sent again after
it committed (a lost answer, a retry) fails with ``invalid or expired
lease`` and rolls back its state and pushes too. A gate's partial ack keeps
the lease, so the same resend would pass the fence; it is refused because
its ack would change nothing, which keeps that case exactly-once as well.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from queenadmin.conf import settings
from queenadmin.domain import queues
from queenadmin.errors import StreamStateTooLarge


@dataclass(frozen=True, slots=True)
class Registration:
    """What ``stream_register`` made of a query: ``conflict`` is a changed
    config hash without ``reset`` (nothing changed then)."""

    query_id: UUID
    name: str
    config_hash: str
    fresh: bool
    reset: bool
    conflict: bool = False
    stored_hash: str = ""


@dataclass(frozen=True, slots=True)
class CycleAck:
    """The ack of a cycle's source messages, through ``transaction_id``."""

    transaction_id: str
    lease_id: str
    count: int


@dataclass(frozen=True)
class Cycle:
    query_id: UUID
    partition_id: int
    group: str
    state_ops: tuple[StateOp, ...] = ()
    pushes: tuple[queues.PushItem, ...] = ()
    ack: CycleAck | None = None
    #: False for a gate's partial ack: the denied tail stays leased.
    release_lease: bool = True


@dataclass(frozen=True, slots=True)
class CycleAcked:
    count: int
    lease_released: bool


@dataclass(frozen=True, slots=True)
class CyclePushed:
    message_id: str
    transaction_id: str
    queue: str


@dataclass(frozen=True)
class CycleOutcome:
    """A committed cycle, or (``success`` false) a rolled-back one and why."""

    success: bool
    state_ops_applied: int = 0
    pushed: tuple[CyclePushed, ...] = ()
    acked: CycleAcked | None = None
    error: str | None = None


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
