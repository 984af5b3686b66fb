"""Answers of the offset reads, discovery, consumer groups, traces and the
operator reads (``api/messages.py``), closed (``WireOut``). Their requests
are declared once, in ``api/wire/messages.py``: its parsers read the
declarations and the document shows them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from pydantic import RootModel

from queenadmin.api.schemas.common import JSONValue, MicrosZTime
from queenadmin.api.schemas.queues import MESSAGE_COUNTS
from queenadmin.api.wire import queues as queues_wire
from queenadmin.api.wire.answers import Answer, Key, Many, engine_refusal
from queenadmin.domain import clock

# -- answers ------------------------------------------------------------------

_TIME = Key(MicrosZTime, via=clock.iso_micros_z)
_MAYBE_TIME = Key(MicrosZTime | None, via=clock.iso_micros_z)
_PAYLOAD = Key(JSONValue, src="payload_json", via=json.loads)
_ID = Key(str, via=str)
_RECORD = Answer(
    "FetchRecordOut",
    offset=int,
    transactionId=str,
    payload=_PAYLOAD,
    ts=Key(MicrosZTime, src="created_at", via=clock.iso_micros_z),
)
_FETCHED = Answer(
    "FetchEntryOut",
    queue=str,
    partition=str,
    records=Many(_RECORD),
    highWatermark=Key(int, "the next offset the partition assigns"),
    logStartOffset=Key(int, src="log_start"),
    error=Literal["OFFSET_OUT_OF_RANGE", "UNKNOWN_TOPIC_OR_PARTITION"] | None,
)
FETCH = Answer("FetchOut", entries=Key(Many(_FETCHED), src="."))
_CHANGED_PARTITION = Answer(
    "ChangedPartitionOut",
    name=str,
    id=_ID,
    lastOffset=Key(int, "-1 when the partition has no record"),
    logStart=int,
    lastWriteAt=_TIME,
)
_CHANGED_ENTRY = Answer(
    "ChangedEntryOut",
    queue=str,
    partitions=Many(_CHANGED_PARTITION),
    next=Key(str | None, via=lambda after: None if after is None else str(after)),
    error=Key(
        Literal["UNKNOWN_TOPIC_OR_PARTITION"] | None,
        src="found",
        via=lambda found: None if found else "UNKNOWN_TOPIC_OR_PARTITION",
    ),
)
#: Of the pages, and the time below which nothing changes any more.
CHANGED = Answer(
    "ChangedOut",
    args=("safe_time",),
    entries=Key(Many(_CHANGED_ENTRY), src="."),
    safeTime=Key(MicrosZTime, src="safe_time", via=clock.iso_micros_z),
)
_DELETED: dict[str, Any] = {
    "success": Literal[True],
    "consumerGroup": Key(str, src="group"),
    "deletedPartitions": Key(int, src="cursors"),
    "metadataDeleted": bool,
}
GROUP_DELETED = Answer("GroupDeletedOut", **_DELETED)
GROUP_QUEUE_DELETED = Answer(
    "GroupQueueDeletedOut", first=("success", "consumerGroup", "queueName"), **_DELETED, queueName=Key(str, src="queue")
)
#: ``raw``: the new timestamp as it was sent.
RESUBSCRIBED = Answer(
    "SubscriptionOut",
    args=("raw",),
    success=Literal[True],
    consumerGroup=Key(str, src="group"),
    newTimestamp=Key(str, src="raw"),
    rowsUpdated=Key(int, "queues the group is registered on", src="queues"),
    partitionsMoved=Key(int, src="cursors"),
)
SEEK = Answer(
    "SeekOut",
    success=Literal[True],
    consumerGroup=Key(str, src="group"),
    queueName=Key(str, src="queue"),
    seekToEnd=Key(bool, src="to_end"),
    targetTimestamp=Key(MicrosZTime | None, src="timestamp", via=clock.iso_micros_z),
    partitionsUpdated=Key(int, src="partitions"),
)
GROUP_SUMMARY = Answer(
    "GroupSummaryOut",
    name=str,
    topics=Key(list[str], src="queue", via=lambda queue: [queue]),
    queueName=Key(str, src="queue"),
    members=int,
    partitionsWithLag=int,
    totalLag=int,
    maxTimeLag=int,
    state=Literal["Lagging", "Stable", "Dead"],
    subscriptionMode=Literal["new", "all"] | None,
    subscriptionTimestamp=None,
    subscriptionCreatedAt=_MAYBE_TIME,
)


def _time_lag(row: Any, now: datetime, oldest: Mapping[tuple[str, int], datetime]) -> int:
    at = oldest.get((row.group, row.partition_id))
    return 0 if at is None else int((now - at).total_seconds())


def _worker(row: Any, now: datetime) -> str | None:
    return row.lease_id if row.lease_active(now) else None


_NOW = ("now",)
#: ``now``, and the oldest unfinished message of each (group, partition id).
GROUP_QUEUE = Answer(
    "GroupQueueOut",
    args=("now", "oldest"),
    partitions=Key(
        Many(
            Answer(
                "GroupPartitionOut",
                args=("now", "oldest"),
                partition=str,
                workerId=Key(str | None, src=".", via=_worker, with_args=_NOW),
                lastConsumedAt=Key(MicrosZTime | None, src="last_claim_at", via=clock.iso_micros_z),
                totalConsumed=Key(int, src=".", via=lambda row: max(0, row.committed - row.start)),
                offsetLag=Key(int, src="lag"),
                timeLagSeconds=Key(int, src=".", via=_time_lag, with_args=("now", "oldest")),
                leaseActive=Key(bool, src=".", via=lambda row, now: row.lease_active(now), with_args=_NOW),
            )
        ),
        src=".",
    ),
)
GroupDetailOut = type(
    "GroupDetailOut",
    (RootModel[dict[str, GROUP_QUEUE.model]],),  # type: ignore[name-defined]
    {"__doc__": "Each queue of the group by name (``{}`` for a group never seen).", "__module__": __name__},
)
LAGGING = Answer(
    "LaggingOut",
    args=("now",),
    consumer_group=Key(str, src="row.group"),
    queue_name=Key(str, src="row.queue"),
    partition_name=Key(str, src="row.partition"),
    partition_id=Key(str, src="row.partition_id", via=str),
    worker_id=Key(str | None, src="row", via=_worker, with_args=_NOW),
    offset_lag=Key(int, src="row.lag"),
    time_lag_seconds=Key(int, src="lag_seconds"),
    lag_hours=Key(float, src="lag_seconds", via=lambda seconds: round(seconds / 3600, 2)),
    oldest_unconsumed_at=Key(MicrosZTime, src="oldest_at", via=clock.iso_micros_z),
    last_consumed_at=Key(MicrosZTime | None, src="row.last_claim_at", via=clock.iso_micros_z),
)
TRACE_RECORDED = Answer("TraceRecordedOut", args=("trace_id",), success=Literal[True], traceId=str)
MESSAGE_NOT_FOUND = Answer("MessageNotFoundOut", error=Literal["Message not found"], code=Literal["not_found"])
_TRACE: dict[str, Any] = {
    "id": Key(str, src="trace_id"),
    "event_type": str,
    "data": Key(JSONValue, src="data_json", via=json.loads),
    "consumer_group": Key(str, src="group"),
    "worker_id": str | None,
    "created_at": _TIME,
    "trace_names": Key(list[str], src="names", via=list),
}
TRACE = Answer("TraceOut", **_TRACE)
MESSAGE_TRACES = Answer("MessageTracesOut", traces=Key(Many(TRACE), src="."))
NAMED_TRACE = Answer(
    "NamedTraceOut",
    **_TRACE,
    transaction_id=str,
    partition_id=_ID,
    queue_name=Key(str | None, src="queue"),
    partition_name=Key(str | None, src="partition"),
    message_payload=Key(JSONValue, src="payload_json", via=lambda text: None if text is None else json.loads(text)),
)
_PAGE_ARGS = ("limit", "offset")
PAGE = Answer("PageOut", args=_PAGE_ARGS, limit=int, offset=int)
_MORE_PAGE = Answer("TracesPageOut", args=(*_PAGE_ARGS, "more"), limit=int, offset=int, hasMore=Key(bool, src="more"))
#: ``more``: whether a later page has traces.
TRACES_BY_NAME = Answer(
    "TracesByNameOut",
    args=(*_PAGE_ARGS, "more"),
    traces=Key(Many(NAMED_TRACE), src="."),
    pagination=Key(_MORE_PAGE, src="."),
)
_TRACE_NAME = Answer(
    "TraceNameOut",
    trace_name=Key(str, src="name"),
    trace_count=Key(int, src="traces"),
    message_count=Key(int, src="messages"),
    last_seen=_TIME,
)
TRACE_NAMES = Answer(
    "TraceNamesOut", args=_PAGE_ARGS, trace_names=Key(Many(_TRACE_NAME), src="."), pagination=Key(PAGE, src=".")
)
_GROUPING: dict[str, Any] = {
    "queues": int,
    "partitions": int,
    "messages": Key(Answer("CountsOut", total=int, pending=int), src="."),
}
NAMESPACES = Answer(
    "NamespacesOut",
    namespaces=Key(
        Many(Answer("NamespaceOut", first=("namespace",), **_GROUPING, namespace=Key(str, src="name"))), src="."
    ),
)
TASKS = Answer(
    "TasksOut", tasks=Key(Many(Answer("TaskOut", first=("task",), **_GROUPING, task=Key(str, src="name"))), src=".")
)
_PARTITION = Answer(
    "PartitionOut",
    id=_ID,
    name=str,
    queue=str,
    namespace=str | None,
    task=str | None,
    createdAt=_TIME,
    lastActivity=Key(MicrosZTime | None, src="last_push_at", via=clock.iso_micros_z),
    messages=Key(MESSAGE_COUNTS, src="."),
)
PARTITIONS = Answer(
    "PartitionsOut", args=_PAGE_ARGS, partitions=Key(Many(_PARTITION), src="."), pagination=Key(PAGE, src=".")
)


Status = Literal["pending", "processing", "completed", "dead_letter"]
ModeType = Literal["queue", "bus", "hybrid", "none"]


def _mode(has_queue_mode: bool, groups_count: int) -> str:
    if has_queue_mode and groups_count:
        return "hybrid"
    if has_queue_mode:
        return "queue"
    return "bus" if groups_count else "none"


#: What a message's list row and its detail both show.
_MESSAGE: dict[str, Any] = {
    "id": str,
    "transactionId": str,
    "partitionId": _ID,
    "offset": int,
    "queuePath": Key(str, src=".", via=lambda row: f"{row.queue}/{row.partition}"),
    "queue": str,
    "partition": str,
    "namespace": str | None,
    "task": str | None,
    "status": Status,
    "traceId": str | None,
    "producerSub": str | None,
    "createdAt": _TIME,
    "leaseExpiresAt": Key(MicrosZTime | None, src="lease_until", via=clock.iso_micros_z),
}
_LIST_ITEM = Answer(
    "MessageListItemOut",
    **_MESSAGE,
    queueStatus=Status,
    busStatus=Key(Answer("BusStatusOut", consumedBy=int, totalGroups=Key(int, src="total_groups")), src="."),
    queuePriority=Key(int, src="options", via=lambda options: int(options.get("priority", 0) or 0)),
)
#: ``mode``: (whether a row has the queue mode, the most bus groups of a row).
MESSAGES = Answer(
    "MessagesOut",
    args=("mode", *_PAGE_ARGS),
    messages=Key(Many(_LIST_ITEM), src="."),
    mode=Key(
        Answer(
            "ListModeOut",
            hasQueueMode=Key(bool, src="0"),
            busGroupsCount=Key(int, src="1"),
            type=Key(ModeType, src=".", via=lambda mode: _mode(*mode)),
        ),
        src="mode",
    ),
    pagination=Key(PAGE, src="."),
)


def _option(name: str) -> Key:
    return Key(int, src=".", via=lambda options: int(options.get(name, 0) or 0))


_CONFIG: dict[str, Any] = {name: _option(name) for name in ("leaseTime", "retryLimit", "retryDelay", "ttl", "priority")}
_CURSOR: tuple[str, ...] = ("offset",)
MESSAGE_DETAIL = Answer(
    "MessageDetailOut",
    **_MESSAGE,
    payload=_PAYLOAD,
    isEncrypted=Literal[False],
    errorMessage=Key(str | None, src="error"),
    retryCount=int | None,
    queueConfig=Key(Answer("QueueConfigOut", **_CONFIG), src="options"),
    mode=Key(
        Answer(
            "MessageModeOut",
            first=("hasQueueMode", "busGroupsCount", "consumedByGroups"),
            hasQueueMode=bool,
            busGroupsCount=Key(int, src="total_groups"),
            type=Key(ModeType, src=".", via=lambda row: _mode(row.has_queue_mode, row.total_groups)),
            consumedByGroups=Key(int, src="consumed_by"),
        ),
        src=".",
    ),
    consumerGroups=Key(
        Many(
            Answer(
                "MessageGroupOut",
                args=_CURSOR,
                name=Key(str, src="group"),
                consumed=Key(bool, src=".", via=lambda c, offset: offset <= c.committed, with_args=_CURSOR),
                leaseExpiresAt=Key(
                    MicrosZTime | None,
                    src=".",
                    via=lambda c, offset: clock.iso_micros_z(c.lease_until) if offset <= c.batch_last else None,
                    with_args=_CURSOR,
                ),
            ),
            offset="offset",
        ),
        src="cursors",
    ),
)


def _deleted(result: Any) -> bool:
    return result is not None and bool(result.deleted)


#: Of the operator call's result (None: no such message), and the ids asked for.
MESSAGE_DELETED = Answer(
    "MessageDeletedOut",
    args=("partition_id", "transaction_id"),
    success=Key(bool, "false when no such message was stored", src=".", via=_deleted),
    partitionId=Key(str, src="partition_id"),
    transactionId=Key(str, src="transaction_id"),
    message=Key(
        Literal["Message deleted successfully", "Message not found"],
        src=".",
        via=lambda result: "Message deleted successfully" if _deleted(result) else "Message not found",
    ),
)
_MOVED = Literal["moved", "duplicate"]
_REPLAYED_AS = Key(queues_wire.PUSHED, src="pushed")
MESSAGE_RETRIED = Answer(
    "MessageRetriedOut",
    success=Literal[True],
    result=Key(_MOVED, src="pushed.status", via=lambda status: "moved" if status == "queued" else "duplicate"),
    queue=str,
    partition=str,
    partitionId=_ID,
    transactionId=str,
    replayedAs=_REPLAYED_AS,
    dlqRowsRemoved=Key(int, src="dead_letters_removed"),
)
DLQ_REPLAYED = Answer(
    "DLQReplayedOut",
    doc="""``moved``: the copy was appended and the dead letter removed;
    ``duplicate``: nothing was appended, as the dead letter was replayed
    before (``replayedAs`` and ``queue``/``partition`` name that copy,
    whatever destination this call names) or the destination already held
    ``dlq:<id>`` (the dead letter is kept).""",
    success=Literal[True],
    result=_MOVED,
    queue=str,
    partition=str,
    consumerGroup=Key(str, src="group"),
    dlqId=Key(str, src="dead_letter_id", via=str),
    originalTransactionId=str,
    replayedAs=_REPLAYED_AS,
    dlqRowRemoved=Key(bool, src="row_removed"),
)
QUEUE_FULL: Answer = engine_refusal(
    "QueueFullOut",
    "409: the destination queue's ``maxSize`` would be exceeded; nothing was written.",
    code=Literal["queue_full"],
)
DEAD_LETTER_GONE: Answer = Answer(
    "DeadLetterGoneOut",
    doc="""404: no such dead letter and no record of its replay (never was,
    purged, or replayed longer ago than ``QUEENADMIN_DLQ_REPLAY_KEEP_SECONDS``).""",
    success=Literal[False],
    result=Literal["gone"],
    error=Key(Literal["Message not found"], src="detail"),
    code=Key(Literal["gone"], src="code"),
)
NOT_DEAD_LETTERED: Answer = engine_refusal(
    "NotDeadLetteredOut",
    error=Literal["The message is not in the dead-letter queue."],
    code=Literal["not_dead_lettered"],
)
DEAD_LETTERED = Answer(
    "MessageDeadLetteredOut",
    success=Literal[True],
    queue=str,
    partition=str,
    partitionId=_ID,
    transactionId=str,
    consumerGroup=Key(str, src="group"),
    offset=int,
)
MESSAGE_NOT_NEXT: Answer = engine_refusal("MessageNotNextOut", code=Literal["message_not_next"])
