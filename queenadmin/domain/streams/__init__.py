"""Streams: the broker side of ``queen-mq``'s Streams SDK (``/streams/v1``).

``ops`` holds the commands, results and rules (of a registration, a cycle
and its state ops), ``calls`` the register, the atomic cycle and the state
rows' reads, ``state`` their writes inside a cycle's transaction, ``store`` every statement, one class per database.
Callers import this package.
"""

from __future__ import annotations

from queenadmin.domain.streams.calls import (
    stream_cycle,
    stream_queues,
    stream_register,
    stream_require,
    stream_state_get,
)
from queenadmin.domain.streams.ops import (
    Cycle,
    CycleAck,
    CycleAcked,
    CycleOutcome,
    CyclePushed,
    Registration,
    StateDelete,
    StateOp,
    StateUpsert,
    StreamStateOps,
    check_state_op,
    ripe_at_ms,
)
from queenadmin.domain.streams.state import stream_state_apply_in_txn
from queenadmin.domain.streams.store import StateFilter, StateRow

__all__ = [
    "Cycle",
    "CycleAck",
    "CycleAcked",
    "CycleOutcome",
    "CyclePushed",
    "Registration",
    "StateDelete",
    "StateFilter",
    "StateOp",
    "StateRow",
    "StateUpsert",
    "StreamStateOps",
    "check_state_op",
    "ripe_at_ms",
    "stream_cycle",
    "stream_queues",
    "stream_register",
    "stream_require",
    "stream_state_apply_in_txn",
    "stream_state_get",
]
