"""Message-log routes: configure, push, pop, ack, lease extend, resources, DLQ.

Pops are ``async def`` (``asgi.ASYNC_PREFIXES`` sends ``/api/v1/pop`` to
Django's ASGI handler): a long-poll waits on ``wakeups.hub`` without a
thread, and its database work runs on ``dbthreads``.
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja import Router

from queenadmin.api import BearerToken, dbthreads
from queenadmin.api.http import json_response, read_json
from queenadmin.api.openapi import body_of
from queenadmin.api.schemas.common import EngineBadRequestOut, NameTooLongOut
from queenadmin.api.schemas.queues import (
    AckBatchIn,
    AckIn,
    AckOut,
    ConfigureIn,
    ConfigureOut,
    DeadLettersOut,
    LeaseExtendIn,
    LeaseExtendOut,
    OverviewOut,
    PopOut,
    PushIn,
    PushItemOut,
    QueueDeletedOut,
    QueueDepthOut,
    QueueDetailOut,
    QueueLanesOut,
    QueueListOut,
    QueueNotDeletedOut,
    QueueNotFoundOut,
)
from queenadmin.conf import settings
from queenadmin.domain import clock, kv, tokens
from queenadmin.domain import queues as log
from queenadmin.domain.queues import wakeups
from queenadmin.domain.queues.common import STATUSES, check_group, check_name, is_int, is_uuid
from queenadmin.errors import InvalidArgument, QueueNotFound

router = Router(tags=["queues"])

_ERRORS: dict[int | str, Any] = {400: EngineBadRequestOut, 413: NameTooLongOut}
#: Largest batch one pop hands out.
MAX_BATCH = 10_000
MAX_TIMEOUT_MS = 60_000
DEFAULT_BATCH = 200


class AsyncBearerToken(BearerToken):
    """The API's bearer check for async views, run on a database thread."""

    async def __call__(self, request: HttpRequest) -> Any:
        if settings.OPEN_API:
            return "open"
        header = request.headers.get(self.header) or ""
        scheme, _, token = header.partition(" ")
        if scheme.lower() != self.openapi_scheme or not token:
            return None
        return await dbthreads.run(tokens.token_check, token.strip())


def _body_object(request: HttpRequest, *, empty: Any = ...) -> Any:
    body = read_json(request, InvalidArgument, "bad_request", empty=empty)
    if body is None and empty is not ...:
        # A JSON null counts as no body where no body is allowed.
        return empty
    if not isinstance(body, dict):
        raise InvalidArgument("the body must be a JSON object")
    return body


# --------------------------------------------------------------------------
# Configure


@router.post(
    "/configure",
    response={200: ConfigureOut, **_ERRORS},
    openapi_extra=body_of(ConfigureIn),
    summary="Create a queue or change its options",
)
def configure_queue(request: HttpRequest) -> HttpResponse:
    body = _body_object(request)
    name = check_name(body.get("queue"), "queue")
    mode = body.get("mode")
    if mode not in (None, "merge", "replace"):
        raise InvalidArgument("mode must be merge or replace")
    options = body.get("options")
    if options is None:
        options = {}
    if not isinstance(options, dict):
        raise InvalidArgument("options must be an object")
    # Options may also come flat at the top level (protocol section 10).
    flat = {k: v for k, v in body.items() if k not in ("queue", "namespace", "task", "options", "mode")}
    config = log.queue_configure(
        name=name,
        namespace=body.get("namespace"),
        task=body.get("task"),
        options={**flat, **options},
        replace=mode == "replace",
    )
    return json_response(
        {
            "configured": True,
            "queueId": str(config.id),
            "partitionId": None,
            "queue": config.name,
            "namespace": config.namespace,
            "task": config.task,
            "storage": "segments",
            "options": config.options,
        }
    )


# --------------------------------------------------------------------------
# Push


@router.post(
    "/push",
    response={201: list[PushItemOut], **_ERRORS},
    openapi_extra=body_of(PushIn),
    summary="Append messages (201, one result per item)",
)
def push_messages(request: HttpRequest) -> HttpResponse:
    body = _body_object(request)
    if "items" not in body:
        raise InvalidArgument("items is required")
    items = log.parse_push_items(body["items"])
    results = log.queue_push(items=items) if items else []
    return json_response(
        [
            {
                "index": r.index,
                "message_id": r.message_id,
                "transaction_id": r.transaction_id,
                "queueName": r.queue,
                "status": r.status,
                "offset": r.offset,
            }
            for r in results
        ],
        201,
    )


# --------------------------------------------------------------------------
# Pop


def _flag(params: Any, name: str, default: bool = False) -> bool:
    raw = params.get(name)
    if raw is None or raw == "":
        return default
    value = raw.lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise InvalidArgument(f"{name} must be true or false")


def _number(params: Any, name: str) -> int | None:
    raw = params.get(name)
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise InvalidArgument(f"{name} must be an integer") from None


def _pop_request(request: HttpRequest, **target: Any) -> tuple[log.PopRequest, bool, float, dict[str, int] | None]:
    params = request.GET
    if _flag(params, "conflation"):
        raise InvalidArgument("conflation is not supported by this broker", reason=None)
    autopilot = _flag(params, "autopilot")
    batch = _number(params, "batch")
    if batch is not None and batch < 1:
        raise InvalidArgument("batch must be at least 1")
    partitions = _number(params, "partitions")
    if partitions is not None and partitions < 1:
        raise InvalidArgument("partitions must be from 1 to 64")
    echo = None
    if autopilot:
        echo = {
            "batch": batch or settings.AUTOPILOT_BATCH,
            "partitions": partitions or settings.AUTOPILOT_PARTITIONS,
        }
        batch, partitions = echo["batch"], echo["partitions"]
    batch = min(batch or DEFAULT_BATCH, MAX_BATCH)
    partitions = min(partitions or 1, 64)
    timeout_ms = _number(params, "timeout")
    timeout_ms = 30_000 if timeout_ms is None else max(0, min(timeout_ms, MAX_TIMEOUT_MS))
    lease = _number(params, "leaseSeconds")
    if lease is not None and lease < 1:
        raise InvalidArgument("leaseSeconds must be at least 1")
    mode = params.get("subscriptionMode") or None
    if mode is not None and mode not in ("new", "all"):
        raise InvalidArgument("subscriptionMode must be new or all")
    since: datetime | str | None = params.get("subscriptionFrom") or None
    if isinstance(since, str) and since != "now":
        try:
            since = datetime.fromisoformat(since.replace("Z", "+00:00"))
        except ValueError:
            raise InvalidArgument("subscriptionFrom must be an ISO time or now") from None
        if since.tzinfo is None:
            raise InvalidArgument("subscriptionFrom must carry a time zone")
    auto_ack = _flag(params, "autoAck") or _flag(params, "commitOnDelivery")
    pop = log.PopRequest(
        group=check_group(params.get("consumerGroup")),
        batch=batch,
        max_partitions=partitions,
        lease_seconds=lease,
        subscription_mode=mode,
        subscription_from=since,
        auto_ack=auto_ack,
        **target,
    )
    return pop, _flag(params, "wait"), timeout_ms / 1000, echo


def _render_claim(claim: log.Claim, echo: dict[str, int] | None, waited_ms: int) -> HttpResponse:
    messages = [
        {
            "id": m.message_id,
            "transactionId": m.transaction_id,
            "traceId": m.trace_id,
            "data": json.loads(m.payload_json),
            "producerSub": None,
            "createdAt": clock.iso_micros_z(m.created_at),
            "partitionId": str(m.partition_id),
            "partition": m.partition,
            "leaseId": claim.lease_id,
            "consumerGroup": claim.group,
            "deliveryAttempt": m.delivery_attempt,
            "offset": m.offset,
        }
        for m in claim.messages
    ]
    body: dict[str, Any] = {
        "success": True,
        "queue": claim.queue,
        "partition": claim.partition,
        "partitionId": str(claim.partition_id),
        "leaseId": claim.lease_id,
        "consumerGroup": claim.group,
        "partitionsClaimed": len(claim.partitions),
        "messages": messages,
    }
    if echo is not None:
        body["autopilot"] = {**echo, "waitMs": waited_ms}
    return json_response(body)


async def _pop(request: HttpRequest, **target: Any) -> HttpResponse:
    pop, wait, timeout, echo = _pop_request(request, **target)
    loop = asyncio.get_running_loop()
    started = loop.time()
    deadline = started + timeout
    key = pop.queue if pop.queue is not None else wakeups.ANY
    hub = wakeups.hub
    hub.bind()
    while True:
        # Read the wake-up generation before claiming, so a push that lands
        # between the claim and the wait is not missed.
        token = hub.token(key)
        claim = await dbthreads.run(log.queue_claim, request=pop)
        if claim.messages:
            return _render_claim(claim, echo, int((loop.time() - started) * 1000))
        remaining = deadline - loop.time()
        if not wait or remaining <= 0:
            return HttpResponse(status=204)
        pause = min(remaining, settings.POP_RECHECK_SECONDS)
        if claim.retry_at is not None:
            until_free = (claim.retry_at - clock.now()).total_seconds() + 0.01
            pause = min(pause, max(0.01, until_free))
        await hub.wait(key, token, pause)


_POP_RESPONSES: dict[int | str, Any] = {200: PopOut, 204: None, **_ERRORS}


@router.get(
    "/pop/queue/{queue}",
    auth=AsyncBearerToken(),
    response=_POP_RESPONSES,
    summary="Lease messages from any partition of a queue (204 when none)",
)
async def pop_queue(request: HttpRequest, queue: str) -> HttpResponse:
    return await _pop(request, queue=check_name(queue, "queue"))


@router.get(
    "/pop/queue/{queue}/partition/{partition}",
    auth=AsyncBearerToken(),
    response=_POP_RESPONSES,
    summary="Lease messages from one partition (204 when none)",
)
async def pop_partition(request: HttpRequest, queue: str, partition: str) -> HttpResponse:
    return await _pop(request, queue=check_name(queue, "queue"), partition=check_name(partition, "partition"))


@router.get(
    "/pop",
    auth=AsyncBearerToken(),
    response=_POP_RESPONSES,
    summary="Lease messages from the queues of a namespace and/or task (204 when none)",
)
async def pop_discovery(request: HttpRequest) -> HttpResponse:
    namespace = request.GET.get("namespace") or None
    task = request.GET.get("task") or None
    if namespace is None and task is None:
        raise InvalidArgument("namespace or task is required")
    return await _pop(request, namespace=namespace, task=task)


# --------------------------------------------------------------------------
# Ack and lease


def _ack_item(index: int, raw: Any, group: Any) -> log.AckItem:
    if not isinstance(raw, dict):
        raise InvalidArgument(f"acknowledgment {index} must be an object")
    txn = raw.get("transactionId")
    if not isinstance(txn, str) or not txn:
        raise InvalidArgument("transactionId must be a non-empty string")
    pid = raw.get("partitionId")
    if is_int(pid):
        pid = str(pid)
    if not isinstance(pid, str) or not pid:
        raise InvalidArgument("partitionId must be a non-empty string")
    status = raw.get("status")
    if status is not None and not isinstance(status, str):
        raise InvalidArgument("status must be a string")
    # Any other status reads as completed (protocol section 5.1).
    status = status if status in STATUSES else "completed"
    lease = raw.get("leaseId")
    if lease is not None and not isinstance(lease, str):
        raise InvalidArgument("leaseId must be a string")
    error = raw.get("error")
    if error is not None and not isinstance(error, str):
        error = json.dumps(error)
    return log.AckItem(index, txn, pid, status, lease or None, error, check_group(group))  # type: ignore[arg-type]


def _render_acks(outcomes: list[log.AckOutcome]) -> HttpResponse:
    return json_response(
        [
            {
                "index": o.index,
                "transactionId": o.transaction_id,
                "success": o.success,
                "error": o.error,
                "leaseReleased": o.lease_released,
                "dlq": o.dlq,
                "noop": o.noop,
            }
            for o in outcomes
        ]
    )


@router.post(
    "/ack",
    response={200: list[AckOut], **_ERRORS},
    openapi_extra=body_of(AckIn),
    summary="Acknowledge one message (answers an array)",
)
def ack_message(request: HttpRequest) -> HttpResponse:
    body = _body_object(request)
    item = _ack_item(0, body, body.get("consumerGroup"))
    return _render_acks(log.queue_ack(items=[item]))


@router.post(
    "/ack/batch",
    response={200: list[AckOut], **_ERRORS},
    openapi_extra=body_of(AckBatchIn),
    summary="Acknowledge several messages",
)
def ack_batch(request: HttpRequest) -> HttpResponse:
    body = _body_object(request)
    raw = body.get("acknowledgments")
    if not isinstance(raw, list):
        raise InvalidArgument("acknowledgments must be an array")
    group = body.get("consumerGroup")
    items = [
        _ack_item(i, a, a.get("consumerGroup", group) if isinstance(a, dict) else group) for i, a in enumerate(raw)
    ]
    return _render_acks(log.queue_ack(items=items) if items else [])


@router.post(
    "/lease/{lease_id}/extend",
    response={200: LeaseExtendOut, 400: EngineBadRequestOut},
    openapi_extra=body_of(LeaseExtendIn, required=False),
    summary="Extend every partition lease of a pop (200 success:false when gone)",
)
def extend_lease(request: HttpRequest, lease_id: str) -> HttpResponse:
    body = _body_object(request, empty=None) or {}
    seconds = body.get("seconds")
    if seconds is None:
        seconds = 60
    if not is_int(seconds) or seconds < 1:
        raise InvalidArgument("seconds must be an integer of at least 1")
    result = log.queue_lease_extend(lease_id=lease_id, seconds=seconds) if is_uuid(lease_id) else None
    expires = clock.iso_micros_z(result.expires_at) if result else None
    renewed = result.renewed if result else 0
    return json_response(
        {
            "leaseId": lease_id,
            "success": renewed > 0,
            "renewed": renewed,
            "newExpiresAt": expires,
            "expiresAt": expires,
            "lease_expires_at": expires,
        }
    )


# --------------------------------------------------------------------------
# Resources


def _messages(totals: dict[str, int]) -> dict[str, int]:
    return {k: totals.get(k, 0) for k in ("total", "pending", "processing", "completed", "deadLetter")}


def _queue_summary(stats: log.QueueStats) -> dict[str, Any]:
    retained = sum(p.total for p in stats.partitions)
    return {
        "id": str(stats.id),
        "name": stats.name,
        "queue": stats.name,
        "namespace": stats.namespace,
        "task": stats.task,
        "storage": "segments",
        "partitions": len(stats.partitions),
        "segments": {"segments": 0, "messages": retained},
        "messages": _messages(stats.totals),
        "retainedBytes": stats.retained_bytes,
        "options": stats.options,
        "createdAt": clock.iso_micros_z(stats.created_at),
    }


@router.get(
    "/resources/queues",
    response={200: QueueListOut | QueueLanesOut},
    summary="Every queue with its depth, newest first",
)
def list_queues(request: HttpRequest) -> HttpResponse:
    queues = log.queue_list()
    if request.GET.get("stats") == "lanes":
        lanes = [
            {
                "id": str(q.id),
                "name": q.name,
                "queue": q.name,
                "partitions": len(q.partitions),
                "createdAt": clock.iso_micros_z(q.created_at),
            }
            for q in queues
        ]
        return json_response({"queues": lanes, "stats": "lanes"})
    kv_rows, kv_bytes = kv.kv_totals()
    return json_response(
        {
            "queues": [_queue_summary(q) for q in queues],
            "kvRows": kv_rows,
            "kvBytes": kv_bytes,
            "timerRows": 0,
            "timerBytes": 0,
        }
    )


def _stats_or_404(
    name: str, group: str | None = None, *, with_age: bool = False, with_messages: bool = False
) -> log.QueueStats:
    stats = log.queue_stats(name=name, group=group, with_age=with_age, with_messages=with_messages)
    if stats is None:
        raise QueueNotFound()
    return stats


@router.get(
    "/resources/queues/{queue}",
    response={200: QueueDetailOut, 404: QueueNotFoundOut},
    summary="One queue with its partitions",
)
def get_queue(request: HttpRequest, queue: str) -> HttpResponse:
    # oldestMessage is the push time of the oldest message still pending for
    # the cursor behind the counts (the slowest named group); see
    # log.queue_stats.
    stats = _stats_or_404(queue, with_messages=True)
    partitions = []
    for p in stats.partitions:
        counts = {
            "total": p.total,
            "pending": p.pending,
            "processing": p.processing,
            "completed": p.completed,
            "failed": None,
            "deadLetter": p.dead_letter,
        }
        partitions.append(
            {
                "id": str(p.id),
                "name": p.name,
                "createdAt": clock.iso_micros_z(p.created_at),
                "messages": counts,
                "stats": counts,
                "cursor": {"totalConsumed": p.completed + p.dead_letter, "batchesConsumed": 0},
                "lastActivity": clock.iso_micros_z(p.last_push_at),
                "oldestMessage": clock.iso_micros_z(p.oldest_message_at),
                "newestMessage": clock.iso_micros_z(p.newest_message_at),
                "retainedBytes": p.retained_bytes,
            }
        )
    return json_response(
        {
            "id": str(stats.id),
            "name": stats.name,
            "namespace": stats.namespace,
            "task": stats.task,
            "createdAt": clock.iso_micros_z(stats.created_at),
            "options": stats.options,
            "partitions": partitions,
            "segments": {"segments": 0, "messages": stats.totals.get("total", 0)},
            "totals": _messages(stats.totals),
            "retainedBytes": stats.retained_bytes,
        }
    )


@router.get(
    "/resources/queues/{queue}/depth",
    response={200: QueueDepthOut, 404: QueueNotFoundOut, **_ERRORS},
    summary="Pending, in flight and ready, per partition (arithmetic on cursors)",
)
def queue_depth(request: HttpRequest, queue: str) -> HttpResponse:
    group = request.GET.get("group") or None
    stats = _stats_or_404(queue, check_group(group) if group else None, with_age=True)
    t = stats.totals
    return json_response(
        {
            "queue": stats.name,
            "group": group,
            "pending": t["pending"],
            "processing": t["processing"],
            "ready": t["ready"],
            "partitionsPending": t["partitionsPending"],
            "partitionsReady": t["partitionsReady"],
            "conflation": False,
            "effectivePending": t["pending"],
            "effectiveReady": t["ready"],
            "deadLetter": t["deadLetter"],
            "oldestReadyAgeSeconds": stats.oldest_ready_age,
            "partitions": [
                {"partition": p.name, "pending": p.pending, "processing": p.processing, "ready": p.ready}
                for p in stats.partitions
            ],
        }
    )


@router.delete(
    "/resources/queues/{queue}",
    response={200: QueueDeletedOut | QueueNotDeletedOut},
    summary="Delete a queue and everything in it",
)
def delete_queue(request: HttpRequest, queue: str) -> HttpResponse:
    if log.queue_delete(name=queue):
        return json_response({"deleted": True, "existed": True, "queue": queue})
    return json_response({"deleted": False, "existed": False, "queue": queue, "message": "Queue not found"})


@router.get("/resources/overview", response=OverviewOut, summary="Counts across every queue")
def overview(request: HttpRequest) -> HttpResponse:
    queues = log.queue_list()
    partitions = [p for q in queues for p in q.partitions]
    lags = sorted(p.pending for p in partitions)
    ages = [a for a in (log.queue_stats(name=q.name, with_age=True) for q in queues) if a is not None]
    times = [a.oldest_ready_age or 0.0 for a in ages]
    totals = {
        k: sum(q.totals.get(k, 0) for q in queues)
        for k in ("total", "pending", "processing", "completed", "deadLetter")
    }
    return json_response(
        {
            "queues": len(queues),
            "partitions": len(partitions),
            "namespaces": len({q.namespace for q in queues if q.namespace}),
            "tasks": len({q.task for q in queues if q.task}),
            "messages": {**totals, "failed": 0},
            "lag": {
                "time": {
                    "avg": sum(times) / len(times) if times else 0,
                    "median": 0,
                    "min": 0,
                    "max": max(times, default=0),
                },
                "offset": {
                    "avg": sum(lags) / len(lags) if lags else 0,
                    "median": lags[len(lags) // 2] if lags else 0,
                    "min": lags[0] if lags else 0,
                    "max": lags[-1] if lags else 0,
                },
            },
            "timestamp": clock.iso_micros_z(clock.now()),
            "statsAge": 0,
        }
    )


def _iso_param(params: Any, name: str) -> datetime | None:
    raw = params.get(name)
    if not raw:
        return None
    try:
        moment = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidArgument(f"{name} must be an ISO time") from None
    if moment.tzinfo is None:
        raise InvalidArgument(f"{name} must carry a time zone")
    return moment


@router.get("/dlq", response={200: DeadLettersOut, 400: EngineBadRequestOut}, summary="Dead letters, newest first")
def list_dlq(request: HttpRequest) -> HttpResponse:
    params = request.GET
    limit = _number(params, "limit")
    offset = _number(params, "offset")
    if (limit is not None and limit < 1) or (offset is not None and offset < 0):
        raise InvalidArgument("limit must be positive and offset not negative")
    rows, total = log.dlq_list(
        queue=params.get("queue") or None,
        group=params.get("consumerGroup") or None,
        partition=params.get("partition") or None,
        since=_iso_param(params, "from"),
        until=_iso_param(params, "to"),
        limit=min(limit or 100, 1000),
        offset=offset or 0,
    )
    messages = [
        {
            "id": str(r.id),
            "queue": r.queue,
            "partition": r.partition,
            "partitionId": str(r.partition_id),
            "consumerGroup": r.group,
            "transactionId": r.transaction_id,
            "messageId": r.message_id,
            "offset": r.offset,
            "data": json.loads(r.payload_json),
            "errorMessage": r.error,
            "retryCount": r.retry_count,
            "createdAt": clock.iso_micros_z(r.created_at),
            "failedAt": clock.iso_micros_z(r.failed_at),
        }
        for r in rows
    ]
    return json_response({"messages": messages, "total": total})
