"""Message-log wire schemas (protocol.md sections 6 to 11).

The routes parse bodies by hand (the engine envelope names the field that
is wrong), so the ``In`` models document the requests; the ``Out`` models
are the exact answers, checked by ``tests/api/test_contract.py``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from queenadmin.api.schemas.common import JSONNumber, JSONValue, MicrosZTime, Omit, WireOut


class PushItemIn(BaseModel):
    queue: str
    partition: str | None = Field(None, description='default "Default"')
    payload: JSONValue
    transactionId: str | None = Field(None, description="dedup key, at most 65535 bytes")
    traceId: str | None = Field(None, description="a UUID; anything else is ignored")


class PushIn(BaseModel):
    items: list[PushItemIn]


class AckIn(BaseModel):
    transactionId: str
    partitionId: str
    status: Literal["completed", "failed", "retry", "dlq"] | None = "completed"
    leaseId: str | None = None
    error: str | None = None
    consumerGroup: str | None = Field(None, description="null = queue mode")


class AckBatchIn(BaseModel):
    acknowledgments: list[AckIn]
    consumerGroup: str | None = None


class LeaseExtendIn(BaseModel):
    seconds: int | None = Field(None, ge=1, description="default 60")


class QueueOptionsIn(BaseModel):
    """Every option is optional; ``null`` restores its default."""

    leaseTime: int | None = None
    retryLimit: int | None = None
    retryDelay: int | None = None
    priority: int | None = Field(None, description="only 0: any other value is refused (unsupported)")
    maxSize: int | None = Field(None, description="most unconsumed messages; 0 = no cap; a push past it answers failed")
    ttl: int | None = None
    delayedProcessing: int | None = None
    windowBuffer: int | None = Field(None, description="seconds a partition must go without a push before it delivers")
    retentionSeconds: int | None = Field(None, description="with retentionEnabled: delete messages this old")
    completedRetentionSeconds: int | None = Field(
        None, description="with retentionEnabled: delete messages this old that every consumer is past"
    )
    maxWaitTimeSeconds: int | None = Field(None, description="delete messages this old, retentionEnabled or not")
    minPopWaitTime: int | None = None
    dedupWindowSeconds: int | None = None
    retentionSinkHoldMaxSeconds: int | None = None
    maxQueueSize: int | None = None
    deadLetterQueue: bool | None = None
    dlqAfterMaxRetries: bool | None = None
    retentionEnabled: bool | None = None
    encryptionEnabled: bool | None = None
    retentionSinkHold: bool | None = None


class ConfigureIn(BaseModel):
    queue: str
    namespace: str | None = None
    task: str | None = None
    options: QueueOptionsIn | None = Field(None, description="options may also be sent flat at the top level")
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
    producerSub: None
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
    conflation: Literal[False]
    effectivePending: int
    effectiveReady: int
    deadLetter: int
    oldestReadyAgeSeconds: JSONNumber | None
    partitions: list[PartitionDepthOut]


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
    createdAt: MicrosZTime
    failedAt: MicrosZTime


class DeadLettersOut(WireOut):
    messages: list[DeadLetterOut] = Field(description="newest first")
    total: int = Field(description="rows matching the filters, all pages")


class QueueBusyOut(WireOut):
    """409: the queue was deleted again and again while the push ran; retry."""

    error: str
    code: Literal["queue_busy"]
