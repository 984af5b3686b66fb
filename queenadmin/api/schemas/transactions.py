"""Transaction wire schemas (protocol.md section 5).

The body is declared in ``api/wire/transactions.py`` (its parser reads the
declaration, the KV and timer ops are those concepts' declarations); the
pushes and acks it carries are the message log's, documented here as
``TxnOperationIn``. The ``Out`` models are the exact answers, checked by
``tests/api/test_contract.py``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, RootModel

from queenadmin.api.schemas.common import EngineName, JSONValue, Omit, Text, WireOut
from queenadmin.api.schemas.kv import (
    KVCheckHeldOut,
    KVGetFoundOut,
    KVGetManyOut,
    KVGetMissOut,
    KVWriteAppliedOut,
    KVWriteRefusedOut,
    Reason,
)
from queenadmin.api.schemas.queues import AckIn, PushItemIn
from queenadmin.api.schemas.timers import AbsentOut, CancelledOut, ScheduledOut
from queenadmin.api.wire.fields import SOME_TEXT
from queenadmin.api.wire.queues import MAX_TXN_BYTES


class TxnPushOpIn(BaseModel):
    """A push: ``items``, or one item inline on the op (without ``queue`` and
    ``payload`` it rolls back, 200 ``bad_request``)."""

    type: Literal["push"]
    items: list[PushItemIn] | None = Field(None, description="when absent, the op itself is the one item")
    queue: EngineName = Field(None, description="inline item")  # type: ignore[assignment]
    partition: EngineName | None = Field(None, description="inline item")
    payload: JSONValue = Field(None, description="inline item")
    transactionId: str | None = Field(
        None, min_length=1, max_length=MAX_TXN_BYTES, pattern=SOME_TEXT, description="inline item"
    )
    traceId: Any = Field(None, description="inline item")


class TxnAckOpIn(AckIn):
    """An ack; a ``partitionId`` that is not digits rolls back (200 ``bad_request``)."""

    type: Literal["ack"]
    leaseId: Text | None = Field(None, description="fences it; else the one lease of requiredLeases")


class TxnOperationIn(RootModel[Annotated[TxnPushOpIn | TxnAckOpIn, Field(discriminator="type")]]):
    """A push or an ack (KV and timer ops go in ``kv`` and ``timers``)."""


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


class _KVPart(WireOut):
    type: Literal["kv"]
    opIndex: int


class TxnKVGetFoundOut(KVGetFoundOut, _KVPart):
    pass


class TxnKVGetMissOut(KVGetMissOut, _KVPart):
    pass


class TxnKVGetManyOut(KVGetManyOut, _KVPart):
    pass


class TxnKVWriteAppliedOut(KVWriteAppliedOut, _KVPart):
    pass


class TxnKVCheckHeldOut(KVCheckHeldOut, _KVPart):
    pass


class TxnKVWriteRefusedOut(KVWriteRefusedOut, _KVPart):
    pass


class _TimerPart(WireOut):
    index: int
    type: Literal["timer"]
    opIndex: int


class TxnTimerScheduledOut(ScheduledOut, _TimerPart):
    pass


class TxnTimerCancelledOut(CancelledOut, _TimerPart):
    pass


class TxnTimerAbsentOut(AbsentOut, _TimerPart):
    pass


TxnResultOut = (
    TxnAckOut
    | TxnPushOut
    | TxnPositionOut
    | TxnKVGetFoundOut
    | TxnKVGetMissOut
    | TxnKVGetManyOut
    | TxnKVWriteAppliedOut
    | TxnKVCheckHeldOut
    | TxnKVWriteRefusedOut
    | TxnTimerScheduledOut
    | TxnTimerCancelledOut
    | TxnTimerAbsentOut
)


class TxnCommitOut(WireOut):
    transactionId: str
    success: Literal[True]
    results: list[TxnResultOut] = Field(description="flat: acks and pushed items, then kv, timers, positions")


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
    kvReason: Reason
    version: int
    value: JSONValue
