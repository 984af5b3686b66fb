"""Answers of the offset reads, discovery, consumer groups, traces and the
operator reads (``api/messages.py``), closed (``WireOut``). Their requests
are declared once, in ``api/wire/messages.py``: its parsers read the
declarations and the document shows them."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, RootModel

from queenadmin.api.schemas.common import JSONValue, MicrosZTime, WireOut
from queenadmin.api.schemas.queues import MessageCountsOut
from queenadmin.api.wire import queues as queues_wire

# -- answers ------------------------------------------------------------------


class FetchRecordOut(WireOut):
    offset: int
    transactionId: str
    payload: JSONValue
    ts: MicrosZTime


class FetchEntryOut(WireOut):
    queue: str
    partition: str
    records: list[FetchRecordOut]
    highWatermark: int = Field(description="the next offset the partition assigns")
    logStartOffset: int
    error: Literal["OFFSET_OUT_OF_RANGE", "UNKNOWN_TOPIC_OR_PARTITION"] | None


class FetchOut(WireOut):
    entries: list[FetchEntryOut]


class ChangedPartitionOut(WireOut):
    name: str
    id: str
    lastOffset: int = Field(description="-1 when the partition has no record")
    logStart: int
    lastWriteAt: MicrosZTime


class ChangedEntryOut(WireOut):
    queue: str
    partitions: list[ChangedPartitionOut]
    next: str | None
    error: Literal["UNKNOWN_TOPIC_OR_PARTITION"] | None


class ChangedOut(WireOut):
    entries: list[ChangedEntryOut]
    safeTime: MicrosZTime


class GroupDeletedOut(WireOut):
    success: Literal[True]
    consumerGroup: str
    deletedPartitions: int
    metadataDeleted: bool


class GroupQueueDeletedOut(GroupDeletedOut):
    queueName: str


class SubscriptionOut(WireOut):
    success: Literal[True]
    consumerGroup: str
    newTimestamp: str
    rowsUpdated: int = Field(description="queues the group is registered on")
    partitionsMoved: int


class SeekOut(WireOut):
    success: Literal[True]
    consumerGroup: str
    queueName: str
    seekToEnd: bool
    targetTimestamp: MicrosZTime | None
    partitionsUpdated: int


class GroupSummaryOut(WireOut):
    name: str
    topics: list[str]
    queueName: str
    members: int
    partitionsWithLag: int
    totalLag: int
    maxTimeLag: int
    state: Literal["Lagging", "Stable", "Dead"]
    subscriptionMode: Literal["new", "all"] | None
    subscriptionTimestamp: None
    subscriptionCreatedAt: MicrosZTime | None


class GroupPartitionOut(WireOut):
    partition: str
    workerId: str | None
    lastConsumedAt: MicrosZTime | None
    totalConsumed: int
    offsetLag: int
    timeLagSeconds: int
    leaseActive: bool


class GroupQueueOut(WireOut):
    partitions: list[GroupPartitionOut]


class GroupDetailOut(RootModel[dict[str, GroupQueueOut]]):
    """Each queue of the group by name (``{}`` for a group never seen)."""


class LaggingOut(WireOut):
    consumer_group: str
    queue_name: str
    partition_name: str
    partition_id: str
    worker_id: str | None
    offset_lag: int
    time_lag_seconds: int
    lag_hours: float
    oldest_unconsumed_at: MicrosZTime
    last_consumed_at: MicrosZTime | None


class TraceRecordedOut(WireOut):
    success: Literal[True]
    traceId: str


class MessageNotFoundOut(WireOut):
    error: Literal["Message not found"]
    code: Literal["not_found"]


class TraceOut(WireOut):
    id: str
    event_type: str
    data: JSONValue
    consumer_group: str
    worker_id: str | None
    created_at: MicrosZTime
    trace_names: list[str]


class MessageTracesOut(WireOut):
    traces: list[TraceOut]


class NamedTraceOut(TraceOut):
    transaction_id: str
    partition_id: str
    queue_name: str | None
    partition_name: str | None
    message_payload: JSONValue


class PageOut(WireOut):
    limit: int
    offset: int


class TracesPageOut(PageOut):
    hasMore: bool


class TracesByNameOut(WireOut):
    traces: list[NamedTraceOut]
    pagination: TracesPageOut


class TraceNameOut(WireOut):
    trace_name: str
    trace_count: int
    message_count: int
    last_seen: MicrosZTime


class TraceNamesOut(WireOut):
    trace_names: list[TraceNameOut]
    pagination: PageOut


class CountsOut(WireOut):
    total: int
    pending: int


class _GroupingOut(WireOut):
    queues: int
    partitions: int
    messages: CountsOut


class NamespaceOut(_GroupingOut):
    namespace: str


class NamespacesOut(WireOut):
    namespaces: list[NamespaceOut]


class TaskOut(_GroupingOut):
    task: str


class TasksOut(WireOut):
    tasks: list[TaskOut]


class PartitionOut(WireOut):
    id: str
    name: str
    queue: str
    namespace: str | None
    task: str | None
    createdAt: MicrosZTime
    lastActivity: MicrosZTime | None
    messages: MessageCountsOut


class PartitionsOut(WireOut):
    partitions: list[PartitionOut]
    pagination: PageOut


Status = Literal["pending", "processing", "completed", "dead_letter"]
ModeType = Literal["queue", "bus", "hybrid", "none"]


class BusStatusOut(WireOut):
    consumedBy: int
    totalGroups: int


class _MessageOut(WireOut):
    """What a message's list row and its detail both show."""

    id: str
    transactionId: str
    partitionId: str
    offset: int
    queuePath: str
    queue: str
    partition: str
    namespace: str | None
    task: str | None
    status: Status
    traceId: str | None
    producerSub: str | None
    createdAt: MicrosZTime
    leaseExpiresAt: MicrosZTime | None


class MessageListItemOut(_MessageOut):
    queueStatus: Status
    busStatus: BusStatusOut
    queuePriority: int


class ListModeOut(WireOut):
    hasQueueMode: bool
    busGroupsCount: int
    type: ModeType


class MessagesOut(WireOut):
    messages: list[MessageListItemOut]
    mode: ListModeOut
    pagination: PageOut


class QueueConfigOut(WireOut):
    leaseTime: int
    retryLimit: int
    retryDelay: int
    ttl: int
    priority: int


class MessageModeOut(ListModeOut):
    consumedByGroups: int


class MessageGroupOut(WireOut):
    name: str
    consumed: bool
    leaseExpiresAt: MicrosZTime | None


class MessageDetailOut(_MessageOut):
    payload: JSONValue
    isEncrypted: Literal[False]
    errorMessage: str | None
    retryCount: int | None
    queueConfig: QueueConfigOut
    mode: MessageModeOut
    consumerGroups: list[MessageGroupOut]


class MessageDeletedOut(WireOut):
    success: bool = Field(description="false when no such message was stored")
    partitionId: str
    transactionId: str
    message: Literal["Message deleted successfully", "Message not found"]


class MessageRetriedOut(WireOut):
    success: Literal[True]
    result: Literal["moved", "duplicate"]
    queue: str
    partition: str
    partitionId: str
    transactionId: str
    replayedAs: queues_wire.PUSHED.model  # type: ignore[name-defined]
    dlqRowsRemoved: int


class DLQReplayedOut(WireOut):
    """``moved``: the copy was appended and the dead letter removed;
    ``duplicate``: nothing was appended, as the dead letter was replayed
    before (``replayedAs`` and ``queue``/``partition`` name that copy,
    whatever destination this call names) or the destination already held
    ``dlq:<id>`` (the dead letter is kept)."""

    success: Literal[True]
    result: Literal["moved", "duplicate"]
    queue: str
    partition: str
    consumerGroup: str
    dlqId: str
    originalTransactionId: str
    replayedAs: queues_wire.PUSHED.model  # type: ignore[name-defined]
    dlqRowRemoved: bool


class QueueFullOut(WireOut):
    """409: the destination queue's ``maxSize`` would be exceeded; nothing was written."""

    error: str
    code: Literal["queue_full"]


class DeadLetterGoneOut(WireOut):
    """404: no such dead letter and no record of its replay (never was,
    purged, or replayed longer ago than ``QUEENADMIN_DLQ_REPLAY_KEEP_SECONDS``)."""

    success: Literal[False]
    result: Literal["gone"]
    error: Literal["Message not found"]
    code: Literal["gone"]


class NotDeadLetteredOut(WireOut):
    error: Literal["The message is not in the dead-letter queue."]
    code: Literal["not_dead_lettered"]


class MessageDeadLetteredOut(WireOut):
    success: Literal[True]
    queue: str
    partition: str
    partitionId: str
    transactionId: str
    consumerGroup: str
    offset: int


class MessageNotNextOut(WireOut):
    error: str
    code: Literal["message_not_next"]
