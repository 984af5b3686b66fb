"""Wire schemas of the offset reads, discovery, consumer groups, traces and
the operator reads (``api/messages.py``). Answers are closed (``WireOut``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel

from queenadmin.api.schemas.common import (
    NAME_BYTES,
    EngineName,
    GroupName,
    JSONValue,
    MicrosZTime,
    Text,
    WireOut,
    nullable,
)
from queenadmin.api.wire.messages import MAX_CHANGED_PAGE, MAX_FETCH_BYTES, MAX_FETCH_ENTRIES
from queenadmin.domain import names

# -- requests -----------------------------------------------------------------


#: A time ``datetime.fromisoformat`` reads; one without an offset is UTC.
IsoTime = Annotated[str, Field(json_schema_extra={"format": "date-time"})]


class FetchEntryIn(BaseModel):
    queue: EngineName
    partition: EngineName
    offset: int = Field(
        0, ge=0, description="next offset to read (offsets start at 0); below the log start: OFFSET_OUT_OF_RANGE"
    )
    maxBytes: int = Field(
        MAX_FETCH_BYTES, ge=1, description=f"payload bytes this entry may read (at most {MAX_FETCH_BYTES})"
    )


class FetchIn(BaseModel):
    entries: list[FetchEntryIn] = Field(min_length=1, max_length=MAX_FETCH_ENTRIES)
    maxBytes: int = Field(
        MAX_FETCH_BYTES, ge=1, description=f"payload bytes the call may read (at most {MAX_FETCH_BYTES})"
    )


class ChangedEntryIn(BaseModel):
    queue: EngineName
    since: IsoTime | None = Field(None, description="ISO-8601; none lists every partition")
    after: str | None = Field(
        None, pattern=r"^[0-9]{1,18}$", description="the page cursor a previous answer gave as next"
    )
    limit: int = Field(MAX_CHANGED_PAGE, ge=1, description=f"clamped to {MAX_CHANGED_PAGE}")


class ChangedIn(BaseModel):
    entries: list[ChangedEntryIn] = Field(min_length=1, max_length=MAX_FETCH_ENTRIES)


class SubscriptionIn(BaseModel):
    subscriptionTimestamp: IsoTime


def _seek_target(schema: dict[str, Any]) -> None:
    """Either ``toEnd: true`` or a ``timestamp``."""
    schema["anyOf"] = [
        {"required": ["toEnd"], "properties": {"toEnd": {"const": True}}},
        {
            "required": ["timestamp"],
            "properties": {"toEnd": {"const": False}, "timestamp": {"type": "string", "format": "date-time"}},
        },
    ]


class SeekIn(BaseModel):
    model_config = ConfigDict(json_schema_extra=_seek_target)

    toEnd: bool = False
    timestamp: Any = Field(None, description="ISO-8601: where to move the group's cursors; ignored with toEnd")


class TraceIn(BaseModel):
    transactionId: str = Field(min_length=1)
    partitionId: str = Field(min_length=1, description="a partition id; one that names none answers 404")
    consumerGroup: GroupName | None = None
    traceNames: (
        list[Annotated[str, Field(max_length=NAME_BYTES, pattern=names.SCHEMA_PATTERN_OR_EMPTY)]]
        | Annotated[str, Field(max_length=NAME_BYTES, pattern=names.SCHEMA_PATTERN_OR_EMPTY)]
        | None
    ) = Field(None, description="names to find the trace by; empty ones are skipped")
    eventType: str | None = Field(None, description='default "info"')
    data: JSONValue


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


class GroupQueueDeletedOut(WireOut):
    success: Literal[True]
    consumerGroup: str
    queueName: str
    deletedPartitions: int
    metadataDeleted: bool


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


class TracesPageOut(WireOut):
    limit: int
    offset: int
    hasMore: bool


class TracesByNameOut(WireOut):
    traces: list[NamedTraceOut]
    pagination: TracesPageOut


class TraceNameOut(WireOut):
    trace_name: str
    trace_count: int
    message_count: int
    last_seen: MicrosZTime


class PageOut(WireOut):
    limit: int
    offset: int


class TraceNamesOut(WireOut):
    trace_names: list[TraceNameOut]
    pagination: PageOut


class CountsOut(WireOut):
    total: int
    pending: int


class NamespaceOut(WireOut):
    namespace: str
    queues: int
    partitions: int
    messages: CountsOut


class NamespacesOut(WireOut):
    namespaces: list[NamespaceOut]


class TaskOut(WireOut):
    task: str
    queues: int
    partitions: int
    messages: CountsOut


class TasksOut(WireOut):
    tasks: list[TaskOut]


class PartitionListCountsOut(WireOut):
    total: int
    pending: int
    processing: int
    completed: int
    deadLetter: int


class PartitionOut(WireOut):
    id: str
    name: str
    queue: str
    namespace: str | None
    task: str | None
    createdAt: MicrosZTime
    lastActivity: MicrosZTime | None
    messages: PartitionListCountsOut


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


class MessageModeOut(WireOut):
    hasQueueMode: bool
    busGroupsCount: int
    consumedByGroups: int
    type: ModeType


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


class ReplayedAsOut(WireOut):
    index: int
    message_id: str
    transaction_id: str
    queueName: str
    status: Literal["queued", "duplicate"]
    offset: int


class MessageRetriedOut(WireOut):
    success: Literal[True]
    result: Literal["moved", "duplicate"]
    queue: str
    partition: str
    partitionId: str
    transactionId: str
    replayedAs: ReplayedAsOut
    dlqRowsRemoved: int


class DLQReplayIn(BaseModel):
    """Optional: no body or ``null`` replays into the dead letter's own queue and partition."""

    model_config = ConfigDict(json_schema_extra=nullable)

    queue: EngineName | None = Field(None, description="the destination queue (created if missing); default its own")
    partition: EngineName | None = Field(None, description="the destination partition; default its own")
    reason: Text | None = Field(None, description="why, kept in the audit trail (ours, not Queen's)")


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
    replayedAs: ReplayedAsOut
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


class MoveToDlqIn(BaseModel):
    """Optional: no body or ``null`` is queue mode and no error text."""

    model_config = ConfigDict(json_schema_extra=nullable)

    consumerGroup: GroupName | None = None
    error: str | None = None


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
