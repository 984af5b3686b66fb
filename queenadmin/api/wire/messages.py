"""The client's remaining routes: offset reads, discovery, consumer groups,
traces and the operator reads (``queen.admin``), parsed and rendered.

Shapes follow Queen: the offset reads as the 2.6 client reads them
(``queen/reads/offset_reads.py``), the rest as Queen's stored procedures
answer (``lib/schema/procedures/008_consumer_groups.sql``, ``010_messages``,
``011_traces``). Refusals are ``InvalidArgument`` (400, engine envelope).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, get_args

from queenadmin.api.wire.queues import Params, check_group, check_name, check_text, json_object, push_item
from queenadmin.api.wire.queues import lookup_group as check_lookup_group
from queenadmin.domain import clock
from queenadmin.domain.queues import browse, groups, reads, traces
from queenadmin.domain.queues import operator as queue_operator
from queenadmin.errors import InvalidArgument, MessageNotFound
from queenadmin.plumbing.db import json_text

#: The broker refuses more than this many entries in one call.
MAX_FETCH_ENTRIES = 1024
#: Bytes of payload one entry (and one call) may read at most.
MAX_FETCH_BYTES = 8 * 1024 * 1024
MAX_CHANGED_PAGE = 1000
MAX_PAGE = 1000
DEFAULT_MESSAGES_PAGE = 200
MAX_OFFSET = 1_000_000_000
MAX_MESSAGES_OFFSET = 100_000
#: The most digits a dead letter id has (a BIGINT).
_MAX_ID_DIGITS = 18


def _iso(raw: Any, name: str) -> datetime:
    if not isinstance(raw, str) or not raw:
        raise InvalidArgument(f"{name} must be an ISO-8601 time")
    try:
        moment = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidArgument(f"{name} must be an ISO-8601 time") from None
    # A time with no offset is UTC, as the broker reads it.
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        raise InvalidArgument(f"{name} is out of range") from None


def _count(value: Any, name: str, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidArgument(f"{name} must be an integer of at least {minimum}")
    return value


def param_int(params: Params, name: str, default: int, *, minimum: int, maximum: int | None = None) -> int:
    raw = params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidArgument(f"{name} must be an integer") from None
    if value < minimum:
        raise InvalidArgument(f"{name} must be at least {minimum}")
    return min(value, maximum) if maximum is not None else value


def _param_bool(params: Params, name: str, default: bool) -> bool:
    raw = params.get(name)
    if raw is None or raw == "":
        return default
    if raw.lower() in ("true", "1"):
        return True
    if raw.lower() in ("false", "0"):
        return False
    raise InvalidArgument(f"{name} must be true or false")


def partition_id(raw: str) -> int:
    """A partition id from a path; one that names no partition is a 404."""
    if not raw.isascii() or not raw.isdigit() or len(raw) > 18:
        raise MessageNotFound()
    return int(raw)


# --------------------------------------------------------------------------
# Offset reads


def _entries(body: dict[str, Any]) -> list[Any]:
    """The ``entries`` of an offset read: 1 to ``MAX_FETCH_ENTRIES``."""
    entries = body.get("entries")
    if not isinstance(entries, list) or not entries:
        raise InvalidArgument("entries must be a non-empty array")
    if len(entries) > MAX_FETCH_ENTRIES:
        raise InvalidArgument(f"at most {MAX_FETCH_ENTRIES} entries per call")
    return entries


def parse_fetch(body: Any) -> tuple[list[reads.FetchEntry], int]:
    body = json_object(body)
    entries = _entries(body)
    call_bytes = body.get("maxBytes", MAX_FETCH_BYTES)
    call_bytes = min(_count(call_bytes, "maxBytes", minimum=1), MAX_FETCH_BYTES)
    parsed = []
    for i, raw in enumerate(entries):
        if not isinstance(raw, dict):
            raise InvalidArgument(f"entries[{i}] must be an object")
        parsed.append(
            reads.FetchEntry(
                queue=check_name(raw.get("queue"), f"entries[{i}].queue"),
                partition=check_name(raw.get("partition"), f"entries[{i}].partition"),
                offset=_count(raw.get("offset", 0), f"entries[{i}].offset", minimum=0),
                max_bytes=min(
                    _count(raw.get("maxBytes", call_bytes), f"entries[{i}].maxBytes", minimum=1), MAX_FETCH_BYTES
                ),
            )
        )
    return parsed, call_bytes


def render_fetch(results: Sequence[reads.FetchedEntry]) -> dict[str, Any]:
    return {
        "entries": [
            {
                "queue": r.queue,
                "partition": r.partition,
                "records": [
                    {
                        "offset": rec.offset,
                        "transactionId": rec.transaction_id,
                        "payload": json.loads(rec.payload_json),
                        "ts": clock.iso_micros_z(rec.created_at),
                    }
                    for rec in r.records
                ],
                "highWatermark": r.high_watermark,
                "logStartOffset": r.log_start,
                "error": r.error,
            }
            for r in results
        ]
    }


def parse_changed(body: Any) -> list[reads.ChangedQuery]:
    entries = _entries(json_object(body))
    parsed = []
    for i, raw in enumerate(entries):
        if not isinstance(raw, dict):
            raise InvalidArgument(f"entries[{i}] must be an object")
        since = raw.get("since")
        after = raw.get("after")
        if after is not None and (
            not isinstance(after, str) or not after.isascii() or not after.isdigit() or len(after) > 18
        ):
            raise InvalidArgument(f"entries[{i}].after must be a cursor this route answered")
        limit = _count(raw.get("limit", MAX_CHANGED_PAGE), f"entries[{i}].limit", minimum=1)
        parsed.append(
            reads.ChangedQuery(
                queue=check_name(raw.get("queue"), f"entries[{i}].queue"),
                since=None if since is None else _iso(since, f"entries[{i}].since"),
                after=None if after is None else int(after),
                limit=min(limit, MAX_CHANGED_PAGE),
            )
        )
    return parsed


def render_changed(pages: Sequence[reads.ChangedPage], safe_time: datetime) -> dict[str, Any]:
    return {
        "entries": [
            {
                "queue": p.queue,
                "partitions": [
                    {
                        "name": c.name,
                        "id": str(c.id),
                        "lastOffset": c.last_offset,
                        "logStart": c.log_start,
                        "lastWriteAt": clock.iso_micros_z(c.last_write_at),
                    }
                    for c in p.partitions
                ],
                "next": None if p.next is None else str(p.next),
                "error": None if p.found else "UNKNOWN_TOPIC_OR_PARTITION",
            }
            for p in pages
        ],
        "safeTime": clock.iso_micros_z(safe_time),
    }


# --------------------------------------------------------------------------
# Consumer groups


def parse_queue(raw: str) -> str:
    return check_name(raw, "queue")


def parse_group(raw: str) -> str:
    group = check_group(raw)
    if not raw:
        raise InvalidArgument("consumer group must be a non-empty string")
    return group


def lookup_queue(raw: str) -> str:
    """A queue to look up or delete: a name stored before the rule of
    stored names (``domain.names``) is still found."""
    if not raw:
        raise InvalidArgument("queue must be a non-empty string")
    return check_text(raw, "queue")  # type: ignore[no-any-return]


def lookup_group(raw: str) -> str:
    """``parse_group`` for a group to look up or delete (``lookup_queue``)."""
    if not raw:
        raise InvalidArgument("consumer group must be a non-empty string")
    return check_lookup_group(raw)


def parse_delete_metadata(params: Params) -> bool:
    return _param_bool(params, "deleteMetadata", True)


def render_group_deleted(result: groups.GroupDeleted) -> dict[str, Any]:
    body: dict[str, Any] = {"success": True, "consumerGroup": result.group}
    if result.queue is not None:
        body["queueName"] = result.queue
    body.update(deletedPartitions=result.cursors, metadataDeleted=result.metadata_deleted)
    return body


def parse_subscription(body: Any) -> datetime:
    body = json_object(body)
    if "subscriptionTimestamp" not in body:
        raise InvalidArgument("Missing subscriptionTimestamp in request body")
    return _iso(body["subscriptionTimestamp"], "subscriptionTimestamp")


def render_resubscribed(result: groups.GroupResubscribed, raw: str) -> dict[str, Any]:
    return {
        "success": True,
        "consumerGroup": result.group,
        "newTimestamp": raw,
        "rowsUpdated": result.queues,
        "partitionsMoved": result.cursors,
    }


def parse_seek(body: Any) -> tuple[bool, datetime | None]:
    body = json_object(body) if body is not None else {}
    to_end = body.get("toEnd", False)
    if not isinstance(to_end, bool):
        raise InvalidArgument("toEnd must be true or false")
    raw = body.get("timestamp")
    if not to_end and not raw:
        raise InvalidArgument("Must specify either 'toEnd': true or 'timestamp'")
    return to_end, None if to_end else _iso(raw, "timestamp")


def render_seek(result: groups.GroupSeek) -> dict[str, Any]:
    return {
        "success": True,
        "consumerGroup": result.group,
        "queueName": result.queue,
        "seekToEnd": result.to_end,
        "targetTimestamp": clock.iso_micros_z(result.timestamp),
        "partitionsUpdated": result.partitions,
    }


def render_group_list(rows: Sequence[browse.GroupSummary]) -> list[dict[str, Any]]:
    return [
        {
            "name": r.name,
            "topics": [r.queue],
            "queueName": r.queue,
            "members": r.members,
            "partitionsWithLag": r.partitions_with_lag,
            "totalLag": r.total_lag,
            "maxTimeLag": r.max_time_lag,
            "state": r.state,
            "subscriptionMode": r.subscription_mode,
            "subscriptionTimestamp": None,
            "subscriptionCreatedAt": clock.iso_micros_z(r.subscription_created_at),
        }
        for r in rows
    ]


def render_group_detail(detail: Mapping[str, Sequence[browse.GroupPartition]]) -> dict[str, Any]:
    now = clock.now()
    oldest = browse.oldest_unfinished([r for rows in detail.values() for r in rows])
    result = {}
    for queue, rows in detail.items():
        result[queue] = {
            "partitions": [
                {
                    "partition": r.partition,
                    "workerId": r.lease_id if r.lease_active(now) else None,
                    "lastConsumedAt": clock.iso_micros_z(r.last_claim_at),
                    "totalConsumed": max(0, r.committed - r.start),
                    "offsetLag": r.lag,
                    "timeLagSeconds": (
                        int((now - oldest[(r.group, r.partition_id)]).total_seconds())
                        if (r.group, r.partition_id) in oldest
                        else 0
                    ),
                    "leaseActive": r.lease_active(now),
                }
                for r in rows
            ]
        }
    return result


def render_lagging(rows: Sequence[browse.LaggingPartition]) -> list[dict[str, Any]]:
    now = clock.now()
    return [
        {
            "consumer_group": x.row.group,
            "queue_name": x.row.queue,
            "partition_name": x.row.partition,
            "partition_id": str(x.row.partition_id),
            "worker_id": x.row.lease_id if x.row.lease_active(now) else None,
            "offset_lag": x.row.lag,
            "time_lag_seconds": x.lag_seconds,
            "lag_hours": round(x.lag_seconds / 3600, 2),
            "oldest_unconsumed_at": clock.iso_micros_z(x.oldest_at),
            "last_consumed_at": clock.iso_micros_z(x.row.last_claim_at),
        }
        for x in rows
    ]


# --------------------------------------------------------------------------
# Traces


def parse_trace(body: Any) -> dict[str, Any]:
    """``POST /traces``: the keyword arguments of ``traces.trace_record``."""
    body = json_object(body)
    txn, pid = body.get("transactionId"), body.get("partitionId")
    if not isinstance(txn, str) or not txn or not isinstance(pid, str) or not pid:
        raise InvalidArgument("transactionId and partitionId are required")
    if "data" not in body:
        raise InvalidArgument("data is required")
    raw_names = body.get("traceNames")
    if raw_names is None:
        names: list[str] = []
    elif isinstance(raw_names, str):
        names = [raw_names] if raw_names else []
    elif isinstance(raw_names, list) and all(isinstance(n, str) for n in raw_names):
        names = [n for n in raw_names if n]
    else:
        raise InvalidArgument("traceNames must be a string or an array of strings")
    for n in names:
        check_name(n, "traceNames[]")
    event_type = body.get("eventType")
    if event_type is not None and not isinstance(event_type, str):
        # Checked before the default: false or {} is not a missing type.
        raise InvalidArgument("eventType must be a string")
    event_type = event_type or "info"
    return {
        "partition_id": partition_id(pid),
        "transaction_id": txn,
        "group": check_group(body.get("consumerGroup")),
        "event_type": event_type,
        "data_json": json_text(body["data"]),
        "names": names,
    }


def _trace(row: traces.TraceRow, *, with_message: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": row.trace_id,
        "event_type": row.event_type,
        "data": json.loads(row.data_json),
        "consumer_group": row.group,
        "worker_id": row.worker_id,
        "created_at": clock.iso_micros_z(row.created_at),
        "trace_names": list(row.names),
    }
    if with_message:
        body.update(
            transaction_id=row.transaction_id,
            partition_id=str(row.partition_id),
            queue_name=row.queue,
            partition_name=row.partition,
            message_payload=None if row.payload_json is None else json.loads(row.payload_json),
        )
    return body


def render_message_traces(rows: Sequence[traces.TraceRow]) -> dict[str, Any]:
    return {"traces": [_trace(r, with_message=False) for r in rows]}


def page_params(params: Params, default: int) -> tuple[int, int]:
    # An offset past any real list answers an empty page; the cap keeps it
    # inside the databases' integers.
    return (
        param_int(params, "limit", default, minimum=1, maximum=MAX_PAGE),
        param_int(params, "offset", 0, minimum=0, maximum=MAX_OFFSET),
    )


def render_traces_by_name(rows: Sequence[traces.TraceRow], more: bool, limit: int, offset: int) -> dict[str, Any]:
    return {
        "traces": [_trace(r, with_message=True) for r in rows],
        "pagination": {"limit": limit, "offset": offset, "hasMore": more},
    }


def render_trace_names(rows: Sequence[traces.TraceNameStats], limit: int, offset: int) -> dict[str, Any]:
    return {
        "trace_names": [
            {
                "trace_name": r.name,
                "trace_count": r.traces,
                "message_count": r.messages,
                "last_seen": clock.iso_micros_z(r.last_seen),
            }
            for r in rows
        ],
        "pagination": {"limit": limit, "offset": offset},
    }


# --------------------------------------------------------------------------
# Namespaces, tasks, partitions


def render_groupings(rows: Sequence[browse.Grouping], key: str) -> dict[str, Any]:
    return {
        f"{key}s": [
            {
                key: r.name,
                "queues": r.queues,
                "partitions": r.partitions,
                "messages": {"total": r.total, "pending": r.pending},
            }
            for r in rows
        ]
    }


def render_partitions(rows: Sequence[browse.PartitionRow], limit: int, offset: int) -> dict[str, Any]:
    return {
        "partitions": [
            {
                "id": str(r.id),
                "name": r.name,
                "queue": r.queue,
                "namespace": r.namespace,
                "task": r.task,
                "createdAt": clock.iso_micros_z(r.created_at),
                "lastActivity": clock.iso_micros_z(r.last_push_at),
                "messages": {
                    "total": r.total,
                    "pending": r.pending,
                    "processing": r.processing,
                    "completed": r.completed,
                    "deadLetter": r.dead_letter,
                },
            }
            for r in rows
        ],
        "pagination": {"limit": limit, "offset": offset},
    }


# --------------------------------------------------------------------------
# Messages


def parse_messages(params: Params) -> browse.MessageQuery:
    status = params.get("status") or None
    if status is not None and status not in get_args(browse.MessageStatus):
        raise InvalidArgument("status must be pending, processing, completed or dead_letter")
    limit, offset = page_params(params, DEFAULT_MESSAGES_PAGE)
    if offset > MAX_MESSAGES_OFFSET:
        # An offset is read past, row by row: narrow the window with from/to instead.
        raise InvalidArgument(f"offset must be at most {MAX_MESSAGES_OFFSET} (narrow the time window with from and to)")
    since, until = params.get("from"), params.get("to")
    return browse.MessageQuery(
        queue=params.get("queue") or None,
        partition=params.get("partition") or None,
        # Queen's console sends ``ns``; the client forwards what it is given.
        namespace=params.get("ns") or params.get("namespace") or None,
        task=params.get("task") or None,
        status=status,  # type: ignore[arg-type]
        since=_iso(since, "from") if since else None,
        until=_iso(until, "to") if until else None,
        limit=limit,
        offset=offset,
    )


def _mode(has_queue_mode: bool, groups_count: int) -> str:
    if has_queue_mode and groups_count:
        return "hybrid"
    if has_queue_mode:
        return "queue"
    return "bus" if groups_count else "none"


def _message(row: browse.MessageRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "transactionId": row.transaction_id,
        "partitionId": str(row.partition_id),
        "offset": row.offset,
        "queuePath": f"{row.queue}/{row.partition}",
        "queue": row.queue,
        "partition": row.partition,
        "namespace": row.namespace,
        "task": row.task,
        "status": row.status,
        "traceId": row.trace_id,
        "producerSub": row.producer_sub,
        "createdAt": clock.iso_micros_z(row.created_at),
        "leaseExpiresAt": clock.iso_micros_z(row.lease_until),
    }


def render_messages(rows: Sequence[browse.MessageRow], query: browse.MessageQuery) -> dict[str, Any]:
    has_queue_mode = any(r.has_queue_mode for r in rows)
    groups_count = max((r.total_groups for r in rows), default=0)
    return {
        "messages": [
            {
                **_message(r),
                "queueStatus": r.queue_status,
                "busStatus": {"consumedBy": r.consumed_by, "totalGroups": r.total_groups},
                "queuePriority": int(r.options.get("priority", 0) or 0),
            }
            for r in rows
        ],
        "mode": {
            "hasQueueMode": has_queue_mode,
            "busGroupsCount": groups_count,
            "type": _mode(has_queue_mode, groups_count),
        },
        "pagination": {"limit": query.limit, "offset": query.offset},
    }


def render_message(row: browse.MessageRow | None) -> dict[str, Any]:
    if row is None:
        raise MessageNotFound()
    options = row.options
    return {
        **_message(row),
        "payload": json.loads(row.payload_json),
        "isEncrypted": False,
        "errorMessage": row.error,
        "retryCount": row.retry_count,
        "queueConfig": {
            "leaseTime": int(options.get("leaseTime", 0) or 0),
            "retryLimit": int(options.get("retryLimit", 0) or 0),
            "retryDelay": int(options.get("retryDelay", 0) or 0),
            "ttl": int(options.get("ttl", 0) or 0),
            "priority": int(options.get("priority", 0) or 0),
        },
        "mode": {
            "hasQueueMode": row.has_queue_mode,
            "busGroupsCount": row.total_groups,
            "consumedByGroups": row.consumed_by,
            "type": _mode(row.has_queue_mode, row.total_groups),
        },
        "consumerGroups": [
            {
                "name": c.group,
                "consumed": row.offset <= c.committed,
                "leaseExpiresAt": clock.iso_micros_z(c.lease_until) if row.offset <= c.batch_last else None,
            }
            for c in row.cursors
        ],
    }


def render_message_deleted(
    result: queue_operator.MessageDeleted | None, partition_id: str, transaction_id: str
) -> dict[str, Any]:
    deleted = result is not None and result.deleted
    return {
        "success": deleted,
        "partitionId": partition_id,
        "transactionId": transaction_id,
        "message": "Message deleted successfully" if deleted else "Message not found",
    }


def render_message_retried(result: queue_operator.MessageRetried) -> dict[str, Any]:
    return {
        "success": True,
        "result": "moved" if result.pushed.status == "queued" else "duplicate",
        "queue": result.queue,
        "partition": result.partition,
        "partitionId": str(result.partition_id),
        "transactionId": result.transaction_id,
        "replayedAs": push_item(result.pushed),
        "dlqRowsRemoved": result.dead_letters_removed,
    }


def parse_move_to_dlq(body: Any) -> tuple[str, str | None]:
    """``POST /messages/{pid}/{txid}/dlq``: the group (default queue mode) and an error text."""
    body = {} if body is None else json_object(body)
    error = body.get("error")
    if error is not None and not isinstance(error, str):
        raise InvalidArgument("error must be a string")
    return check_group(body.get("consumerGroup")), error


def render_dead_lettered(result: queue_operator.MessageDeadLettered) -> dict[str, Any]:
    return {
        "success": True,
        "queue": result.queue,
        "partition": result.partition,
        "partitionId": str(result.partition_id),
        "transactionId": result.transaction_id,
        "consumerGroup": result.group,
        "offset": result.offset,
    }


# --------------------------------------------------------------------------
# Queen's DLQ replay


def dead_letter_id(raw: str) -> int | None:
    """The dead letter id a path names; None when it cannot name one (the
    route answers 404 ``gone``, as Queen does for an id that is no uuid)."""
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= _MAX_ID_DIGITS else None


def parse_replay(body: Any) -> tuple[queue_operator.ReplayDestination, str]:
    """``POST /dlq/{id}/replay``: the destination (no body, ``null`` or an
    absent field: the dead letter's own queue or partition) and the reason
    its audit entry keeps."""
    body = {} if body is None else json_object(body)
    queue, partition, reason = body.get("queue"), body.get("partition"), body.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise InvalidArgument("reason must be a string")
    return (
        queue_operator.ReplayDestination(
            queue=None if queue is None else check_name(queue, "queue"),
            partition=None if partition is None else check_name(partition, "partition"),
        ),
        check_text(reason or "", "reason"),
    )


def render_replayed(result: queue_operator.DLQReplayed) -> dict[str, Any]:
    return {
        "success": True,
        "result": result.result,
        "queue": result.queue,
        "partition": result.partition,
        "consumerGroup": result.group,
        "dlqId": str(result.dead_letter_id),
        "originalTransactionId": result.original_transaction_id,
        "replayedAs": push_item(result.pushed),
        "dlqRowRemoved": result.row_removed,
    }
