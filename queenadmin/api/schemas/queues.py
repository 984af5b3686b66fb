"""Message-log wire schemas (protocol.md sections 6 to 11).

The routes parse bodies by hand (the engine envelope names the field that
is wrong), so the ``In`` models document the requests; the ``Out`` models
are the exact answers, checked by ``tests/api/test_contract.py``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from queenadmin.api.schemas.common import (
    EngineName,
    GroupName,
    JSONNumber,
    JSONValue,
    MicrosZTime,
    Omit,
    Text,
    WireOut,
    nullable,
)
from queenadmin.api.wire.fields import SOME_TEXT
from queenadmin.api.wire.queues import MAX_LEASE_SECONDS, MAX_TXN_BYTES
from queenadmin.domain.queues.options import BOOL_OPTIONS, CLAMPS, INT_OPTIONS, MAX_INT_OPTION, RANGES, UNSUPPORTED


class PushItemIn(BaseModel):
    queue: EngineName
    partition: EngineName | None = Field(None, description='default "Default"')
    payload: JSONValue
    transactionId: str | None = Field(
        None, min_length=1, max_length=MAX_TXN_BYTES, pattern=SOME_TEXT, description="dedup key, at most 65535 bytes"
    )
    traceId: Any = Field(None, description="a UUID; anything else is ignored")


class PushIn(BaseModel):
    items: list[PushItemIn]


class AckIn(BaseModel):
    transactionId: str = Field(min_length=1, pattern=SOME_TEXT)
    partitionId: Annotated[str, Field(min_length=1, pattern=SOME_TEXT)] | int = Field(
        description="the decimal partition id the pop returned (a JSON integer is read as its digits)"
    )
    status: str | None = Field(
        "completed", description="completed, failed, retry or dlq; any other string is completed"
    )
    leaseId: Text | None = None
    error: Any = Field(None, description="a string; any other JSON is stored as its JSON text")
    consumerGroup: GroupName | None = None


def _batch_group(schema: dict[str, Any]) -> None:
    """The batch's group is read only for an acknowledgment without its own."""
    group = schema["properties"].pop("consumerGroup")
    schema["properties"]["consumerGroup"] = {"description": group["description"]}
    schema["if"] = {
        "properties": {"acknowledgments": {"contains": {"type": "object", "not": {"required": ["consumerGroup"]}}}}
    }
    schema["then"] = {"properties": {"consumerGroup": {k: v for k, v in group.items() if k != "description"}}}


class AckBatchIn(BaseModel):
    model_config = ConfigDict(json_schema_extra=_batch_group)

    acknowledgments: list[AckIn] = Field(description="each may name its own consumerGroup")
    consumerGroup: GroupName | None = Field(None, description="for the acknowledgments that name none")


class LeaseExtendIn(BaseModel):
    """Optional: no body or ``null`` extends by the default."""

    model_config = ConfigDict(json_schema_extra=nullable)

    seconds: int | None = Field(None, ge=1, le=MAX_LEASE_SECONDS, description="default 60")


class PauseIn(BaseModel):
    """Optional: the reason kept in the audit trail (none: no body or ``null``)."""

    model_config = ConfigDict(json_schema_extra=nullable)

    reason: Text | None = Field(None, description="why, for the audit trail (at most 2,000 characters kept)")


def _option_field(name: str) -> Any:
    """An option's field, from the domain's table (``queues/options.py``)."""
    if name in BOOL_OPTIONS:
        return (bool | None, Field(None, description=f"default {str(BOOL_OPTIONS[name]).lower()}"))
    default = INT_OPTIONS[name]
    if name in UNSUPPORTED:
        return (Literal[default] | None, Field(None, description=f"only {default}: {UNSUPPORTED[name]}"))
    if name in CLAMPS:
        low, high = CLAMPS[name]
        return (int | None, Field(None, description=f"default {default}; clamped to {low}..{high}"))
    if name in RANGES:
        low, high = RANGES[name]
        return (int | None, Field(None, ge=low, le=high, description=f"default {default}"))
    return (int | None, Field(None, ge=0, le=MAX_INT_OPTION, description=f"default {default}"))


#: Every option is optional; ``null`` restores its default.
QueueOptionsIn = create_model(
    "QueueOptionsIn",
    __doc__="Every option is optional; ``null`` restores its default; unknown names are dropped.",
    **{name: _option_field(name) for name in (*INT_OPTIONS, *BOOL_OPTIONS)},
)


class ConfigureIn(QueueOptionsIn):
    """The queue and its options; options may also be sent flat, beside ``options``."""

    queue: EngineName
    namespace: Text | None = None
    task: Text | None = None
    options: QueueOptionsIn | None = Field(None, description="wins over a flat option of the same name")
    mode: Literal["merge", "replace"] | None = "merge"


# -- answers ------------------------------------------------------------------


class QueueNotFoundOut(WireOut):
    """404 of the queue detail and depth reads."""

    error: Literal["Queue not found"]


class QueueOptionsOut(WireOut):
    """Every option of a queue, defaults filled in (protocol 10)."""

    leaseTime: int
    retryLimit: int
    retryDelay: int
    priority: int
    maxSize: int
    ttl: int
    delayedProcessing: int
    windowBuffer: int
    retentionSeconds: int
    completedRetentionSeconds: int
    maxWaitTimeSeconds: int
    minPopWaitTime: int
    dedupWindowSeconds: int
    retentionSinkHoldMaxSeconds: int
    maxQueueSize: int
    deadLetterQueue: bool
    dlqAfterMaxRetries: bool
    retentionEnabled: bool
    encryptionEnabled: bool
    retentionSinkHold: bool


class ConfigureOut(WireOut):
    configured: Literal[True]
    queueId: str
    partitionId: None
    queue: str
    namespace: str | None
    task: str | None
    storage: Literal["segments"]
    options: QueueOptionsOut


class PushItemOut(WireOut):
    index: int
    message_id: str
    transaction_id: str
    queueName: str
    status: Literal["queued", "duplicate"] = Field(description="a duplicate carries the original id and offset")
    offset: int


class PushItemFailedOut(WireOut):
    """An item the queue's ``maxSize`` refused (Queen 1.x's answer); nothing written."""

    index: int
    message_id: None
    transaction_id: str
    queueName: str
    status: Literal["failed"]
    offset: None
    error: str


class PopMessageOut(WireOut):
    id: str
    transactionId: str
    traceId: str | None
    data: JSONValue
    producerSub: str | None
    createdAt: MicrosZTime
    partitionId: str = Field(description="a decimal string; acks echo it")
    partition: str
    leaseId: str = Field(description='"" with autoAck')
    consumerGroup: str
    deliveryAttempt: int
    offset: int


class PopAutopilotOut(WireOut):
    batch: int
    partitions: int
    waitMs: int


class PopOut(WireOut):
    success: Literal[True]
    queue: str
    partition: str = Field(description="the first partition claimed")
    partitionId: str
    leaseId: str
    consumerGroup: str
    partitionsClaimed: int
    messages: list[PopMessageOut]
    autopilot: PopAutopilotOut | Omit = Field(None, description="present with autopilot=true")
    conflation: Literal[True] | Omit = Field(None, description="present when the group's stored policy is conflation")
    conflationConflict: Literal[True] | Omit = Field(
        None, description="present when the pop asked for the other policy than the stored one (which applied)"
    )


class PopEmptyOut(WireOut):
    """An empty pop of a group whose conflation policy has to be said (else a 204)."""

    success: Literal[True]
    queue: str | None
    consumerGroup: str
    partitionsClaimed: Literal[0]
    messages: list[PopMessageOut] = Field(max_length=0)
    conflation: Literal[True] | Omit = Field(None, description="present when the group's stored policy is conflation")
    conflationConflict: Literal[True] | Omit = Field(
        None, description="present when the pop asked for the other policy than the stored one"
    )


class ConflationRefusedOut(WireOut):
    """400 of a conflating pop with no consumerGroup, or with autoAck."""

    success: Literal[False]
    error: str
    messages: list[PopMessageOut] = Field(max_length=0)


class AckOut(WireOut):
    index: int
    transactionId: str
    success: bool
    error: str | None
    leaseReleased: bool
    dlq: bool
    noop: bool


class LeaseExtendOut(WireOut):
    """The three times are the same new expiry (null when nothing was renewed)."""

    leaseId: str
    success: bool
    renewed: int
    newExpiresAt: MicrosZTime | None
    expiresAt: MicrosZTime | None
    lease_expires_at: MicrosZTime | None


class MessageCountsOut(WireOut):
    total: int
    pending: int = Field(description="not yet completed, leased ones included")
    processing: int = Field(description="under a live lease")
    completed: int
    deadLetter: int


class SegmentsOut(WireOut):
    segments: int
    messages: int


#: The pause fields (``domain/queues/operator/pause.py``): additive, so the
#: official client, which does not read them, is unaffected.
PAUSED = "every pop of the queue is paused (answers as an empty queue)"
PAUSED_GROUPS = "consumer groups whose pops of the queue are paused"


class QueueSummaryOut(WireOut):
    id: str
    name: str
    queue: str
    namespace: str | None
    task: str | None
    storage: Literal["segments"]
    partitions: int
    segments: SegmentsOut
    messages: MessageCountsOut
    retainedBytes: int
    options: QueueOptionsOut
    createdAt: MicrosZTime
    paused: bool = Field(description=PAUSED)
    pausedGroups: list[str] = Field(description=PAUSED_GROUPS)


class QueueListOut(WireOut):
    queues: list[QueueSummaryOut] = Field(description="newest first")
    kvRows: int
    kvBytes: int
    timerRows: int
    timerBytes: int


class QueueLaneOut(WireOut):
    id: str
    name: str
    queue: str
    partitions: int
    createdAt: MicrosZTime


class QueueLanesOut(WireOut):
    """``?stats=lanes``: the light form."""

    queues: list[QueueLaneOut]
    stats: Literal["lanes"]


class PartitionCountsOut(WireOut):
    total: int
    pending: int
    processing: int
    completed: int
    failed: None
    deadLetter: int


class CursorOut(WireOut):
    totalConsumed: int
    batchesConsumed: int


class PartitionDetailOut(WireOut):
    id: str
    name: str
    createdAt: MicrosZTime
    messages: PartitionCountsOut
    stats: PartitionCountsOut
    cursor: CursorOut
    lastActivity: MicrosZTime | None
    oldestMessage: MicrosZTime | None = Field(description="oldest message still pending for the slowest group")
    newestMessage: MicrosZTime | None
    retainedBytes: int


class QueueDetailOut(WireOut):
    id: str
    name: str
    namespace: str | None
    task: str | None
    createdAt: MicrosZTime
    options: QueueOptionsOut
    partitions: list[PartitionDetailOut]
    segments: SegmentsOut
    totals: MessageCountsOut
    retainedBytes: int
    paused: bool = Field(description=PAUSED)
    pausedGroups: list[str] = Field(description=PAUSED_GROUPS)


class PartitionDepthOut(WireOut):
    partition: str
    pending: int
    processing: int
    ready: int


class QueueDepthOut(WireOut):
    """Arithmetic on cursors; a named group never seen counts -1."""

    queue: str
    group: str | None
    pending: int
    processing: int
    ready: int
    partitionsPending: int
    partitionsReady: int
    conflation: bool = Field(description="the named group's stored policy (false without a group)")
    effectivePending: int
    effectiveReady: int
    deadLetter: int
    oldestReadyAgeSeconds: JSONNumber | None
    partitions: list[PartitionDepthOut]


class PauseOut(WireOut):
    """A pause or resume: what it names is now ``paused`` (``changed`` false
    when it already was), with the queue's whole pause state."""

    success: Literal[True]
    queue: str
    consumerGroup: str | None = Field(description="the group the route names; null for the queue's routes")
    paused: bool
    changed: bool
    queuePaused: bool = Field(description="every pop of the queue is paused")
    pausedGroups: list[str]


class QueueDeletedOut(WireOut):
    deleted: Literal[True]
    existed: Literal[True]
    queue: str


class QueueNotDeletedOut(WireOut):
    """Deleting a queue that does not exist is still a 200."""

    deleted: Literal[False]
    existed: Literal[False]
    queue: str
    message: Literal["Queue not found"]


class OverviewCountsOut(WireOut):
    total: int
    pending: int
    processing: int
    completed: int
    deadLetter: int
    failed: int


class LagOut(WireOut):
    avg: JSONNumber
    median: JSONNumber
    min: JSONNumber
    max: JSONNumber


class LagsOut(WireOut):
    time: LagOut = Field(description="seconds the oldest ready message has waited, across queues")
    offset: LagOut = Field(description="pending messages per partition")


class OverviewOut(WireOut):
    queues: int
    partitions: int
    namespaces: int
    tasks: int
    messages: OverviewCountsOut
    lag: LagsOut
    timestamp: MicrosZTime
    statsAge: int


class DeadLetterOut(WireOut):
    id: str
    queue: str
    partition: str
    partitionId: str
    consumerGroup: str
    transactionId: str
    messageId: str
    offset: int
    data: JSONValue
    errorMessage: str | None
    retryCount: int
    producerSub: str | None
    createdAt: MicrosZTime
    failedAt: MicrosZTime


class DeadLettersOut(WireOut):
    messages: list[DeadLetterOut] = Field(description="newest first")
    total: int = Field(description="rows matching the filters, all pages")


class QueueBusyOut(WireOut):
    """409: the queue was deleted again and again while the push ran; retry."""

    error: str
    code: Literal["queue_busy"]
