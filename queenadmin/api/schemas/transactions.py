"""Transaction wire schemas (protocol.md section 5).

The body is declared in ``api/wire/transactions.py`` (its parser reads the
declaration; its pushes, acks, KV and timer ops are those concepts'
declarations). The ``Out`` models are the exact answers, checked by
``tests/api/test_contract.py``.
"""

from __future__ import annotations

import functools
import operator
from typing import Annotated, Literal

from pydantic import Field

from queenadmin.api.schemas.common import JSONValue, Omit, WireOut
from queenadmin.api.wire import kv as kv_wire
from queenadmin.api.wire import timers as timers_wire

# -- answers ------------------------------------------------------------------


class TxnAckOut(WireOut):
    index: int
    type: Literal["ack"]
    success: Literal[True]
    transactionId: str
    error: None
    dlq: bool


class TxnPushOut(WireOut):
    index: int
    type: Literal["push"]
    success: Literal[True]
    transactionId: str
    messageId: str
    queueName: str
    duplicate: Literal[True] | Omit = Field(None, description="the same transactionId came earlier in this bundle")


class TxnPositionOut(WireOut):
    index: int
    type: Literal["position"]
    success: Literal[True]


#: A KV result inside a commit's results: ``type`` and ``opIndex`` first.
_KV_PARTS = [
    answer.within(f"Txn{answer.name}", type=Literal["kv"], opIndex=int).model
    for answer in (
        kv_wire.GET_FOUND,
        kv_wire.GET_MISS,
        kv_wire.GET_MANY,
        kv_wire.WRITE_APPLIED,
        kv_wire.CHECK_HELD,
        kv_wire.WRITE_REFUSED,
    )
]


#: A timer outcome inside a commit's results: ``index``, ``type`` and ``opIndex`` first.
_TIMER_PARTS = [
    answer.within(f"TxnTimer{answer.name}", index=int, type=Literal["timer"], opIndex=int).model
    for answer in (timers_wire.SCHEDULED, timers_wire.CANCELLED, timers_wire.ABSENT)
]


TxnResultOut = functools.reduce(
    operator.or_,
    [TxnAckOut, TxnPushOut, TxnPositionOut, *_KV_PARTS, *_TIMER_PARTS],
)


class TxnCommitOut(WireOut):
    transactionId: str
    success: Literal[True]
    results: list[TxnResultOut] = Field(  # type: ignore[valid-type]
        description="flat: acks and pushed items, then kv, timers, positions"
    )


class TxnRollbackOut(WireOut):
    """HTTP 200: nothing of the bundle was applied."""

    transactionId: str
    success: Literal[False]
    reason: Literal["rejected_ack", "duplicate", "queue_not_found", "bad_request", "too_large", "queue_full"] = Field(
        description="queue_full: a pushed queue's maxSize would be exceeded (queenadmin; Queen stores maxSize only)"
    )
    error: str
    results: Annotated[list[TxnAckOut], Field(max_length=0)]


class TxnPreconditionOut(WireOut):
    """HTTP 200: a required KV op (a lock's guard, ``once``) did not hold; nothing applied."""

    transactionId: str
    success: Literal[False]
    reason: Literal["kv_precondition"]
    error: str
    results: Annotated[list[TxnAckOut], Field(max_length=0)]
    ok: Literal[False]
    failedIndex: int = Field(description="flat index of the failed op")
    kvReason: kv_wire.Reason
    version: int
    value: JSONValue
