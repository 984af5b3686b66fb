"""The client's remaining routes: offset reads (``queue.fetch()``), partition
discovery (``changed_since()``), consumer groups, message traces, the
operator reads and writes of ``queen.admin`` and Queen's DLQ replay.

Each route parses with ``api/wire/messages.py``, calls the domain
(``domain/queues``: ``reads``, ``groups``, ``traces``, ``browse``) and
renders the result with the same wire module.
"""

from __future__ import annotations

from typing import TypedDict

from django.http import HttpRequest, HttpResponse

from queenadmin.api import grants
from queenadmin.api.audit import who_of
from queenadmin.api.errors import ENGINE_BAD_REQUEST, ENGINE_ERRORS
from queenadmin.api.http import json_response, read_engine_json
from queenadmin.api.openapi import parameters
from queenadmin.api.schemas import messages as out
from queenadmin.api.schemas.common import EngineName, json_schema_of
from queenadmin.api.scopes import ScopedRouter
from queenadmin.api.wire import messages as wire
from queenadmin.api.wire.answers import list_of
from queenadmin.domain import clock
from queenadmin.domain.queues import browse, groups, reads, traces
from queenadmin.domain.queues import operator as queue_operator
from queenadmin.errors import DeadLetterGone, MessageNotFound

#: A group or queue name a route stores (the rule of names, ``domain.names``).
_NAME = json_schema_of(EngineName)

router = ScopedRouter(tags=["client routes"], errors=ENGINE_ERRORS)

# --------------------------------------------------------------------------
# Offset reads


@router.with_body(
    "POST", "/fetch", wire.FETCH, {200: out.FETCH.model}, summary="Read partitions by offset (no lease, no cursor)"
)
def fetch_records(request: HttpRequest) -> HttpResponse:
    entries, max_bytes = wire.parse_fetch(read_engine_json(request))
    grants.require_queues(grants.limits(request), {e.queue for e in entries}, grants.READ)
    return json_response(out.FETCH.render(reads.queue_fetch(entries=entries, max_bytes=max_bytes)))


@router.with_body(
    "POST",
    "/partitions/changed",
    wire.CHANGED,
    {200: out.CHANGED.model},
    summary="Partitions written since a time, in creation order, paged",
)
def partitions_changed(request: HttpRequest) -> HttpResponse:
    queries = wire.parse_changed(read_engine_json(request))
    grants.require_queues(grants.limits(request), {q.queue for q in queries}, grants.READ)
    # Read the safe time before the partitions, so it never runs ahead of them.
    safe = reads.safe_time()
    pages = reads.partitions_changed_each(queries=queries)
    return json_response(out.CHANGED.render(pages, safe))


# --------------------------------------------------------------------------
# Consumer groups


@router.get("/consumer-groups", response=list_of(out.GROUP_SUMMARY), summary="Every consumer group per queue")
def list_groups(request: HttpRequest) -> HttpResponse:
    rows = grants.readable(request, "queue", browse.group_list(), lambda g: g.queue)
    return json_response([out.GROUP_SUMMARY.render(r) for r in rows])


@router.get(
    "/consumer-groups/lagging",
    response={200: list_of(out.LAGGING), 400: ENGINE_BAD_REQUEST.model},
    summary="Partitions whose oldest unfinished message is older than minLagSeconds",
    openapi_extra=parameters(query=wire.LAGGING.schemas()),
)
def lagging_groups(request: HttpRequest) -> HttpResponse:
    seconds = wire.read_query(request.GET, wire.LAGGING)["minLagSeconds"]
    rows = browse.group_lagging(min_lag_seconds=seconds)
    now = clock.now()
    return json_response(
        [out.LAGGING.render(x, now) for x in grants.readable(request, "queue", rows, lambda x: x.row.queue)]
    )


@router.with_body(
    "POST",
    "/consumer-groups/{group}/subscription",
    wire.SUBSCRIPTION,
    {200: out.RESUBSCRIBED.model},
    summary="Start a group at a time where it has not read yet",
    openapi_extra=parameters(path={"group": _NAME}),
)
def resubscribe_group(request: HttpRequest, group: str) -> HttpResponse:
    body = read_engine_json(request)
    timestamp = wire.parse_subscription(body)
    grants.require_every(request, "queue", grants.WRITE)
    result = groups.queue_group_resubscribe(group=wire.parse_group(group), timestamp=timestamp, who=who_of(request))
    return json_response(out.RESUBSCRIBED.render(result, body["subscriptionTimestamp"]))


@router.with_body(
    "POST",
    "/consumer-groups/{group}/queues/{queue}/seek",
    wire.SEEK,
    {200: out.SEEK.model},
    summary="Move a group's cursors on a queue to the end or to a time",
    openapi_extra=parameters(path={"group": _NAME, "queue": _NAME}),
)
def seek_group(request: HttpRequest, group: str, queue: str) -> HttpResponse:
    to_end, timestamp = wire.parse_seek(read_engine_json(request, optional=True))
    grants.require(request, "queue", queue, grants.WRITE)
    result = groups.queue_group_seek(
        group=wire.parse_group(group),
        queue=wire.parse_queue(queue),
        to_end=to_end,
        timestamp=timestamp,
        who=who_of(request),
    )
    return json_response(out.SEEK.render(result))


# The routes below take the rest of the path (``path:``), so that a name
# holding ``/`` is reached; declared last, after the routes they would shadow
# (Django tries the patterns in order).
@router.delete(
    "/consumer-groups/{group}/queues/{path:queue}",
    response={200: out.GROUP_QUEUE_DELETED.model, **ENGINE_ERRORS},
    summary="Delete a consumer group on one queue",
    openapi_extra=parameters(query=wire.GROUP_DELETE.schemas()),
)
def delete_group_on_queue(request: HttpRequest, group: str, queue: str) -> HttpResponse:
    grants.require(request, "queue", queue, grants.ADMIN)
    return _group_deleted(request, group, queue)


@router.get(
    "/consumer-groups/{path:group}",
    response={200: out.GroupDetailOut, **ENGINE_ERRORS},
    summary="A consumer group's partitions per queue",
)
def get_group(request: HttpRequest, group: str) -> HttpResponse:
    detail = browse.group_detail(group=wire.lookup_group(group))
    if grants.limits(request) is not None:
        shown = set(grants.readable(request, "queue", list(detail), lambda queue: queue))
        detail = {queue: rows for queue, rows in detail.items() if queue in shown}
    now = clock.now()
    oldest = browse.oldest_unfinished([r for rows in detail.values() for r in rows])
    return json_response({queue: out.GROUP_QUEUE.render(rows, now, oldest) for queue, rows in detail.items()})


@router.delete(
    "/consumer-groups/{path:group}",
    response={200: out.GROUP_DELETED.model, **ENGINE_ERRORS},
    summary="Delete a consumer group on every queue (deleteMetadata=false rewinds it)",
    openapi_extra=parameters(query=wire.GROUP_DELETE.schemas()),
)
def delete_group(request: HttpRequest, group: str) -> HttpResponse:
    # On every queue, those the group joins later too.
    grants.require_every(request, "queue", grants.ADMIN)
    return _group_deleted(request, group)


def _group_deleted(request: HttpRequest, group: str, queue: str | None = None) -> HttpResponse:
    result = groups.queue_group_delete(
        group=wire.lookup_group(group),
        queue=None if queue is None else wire.lookup_queue(queue),
        delete_metadata=wire.read_query(request.GET, wire.GROUP_DELETE)["deleteMetadata"],
        who=who_of(request),
    )
    return json_response((out.GROUP_DELETED if result.queue is None else out.GROUP_QUEUE_DELETED).render(result))


# --------------------------------------------------------------------------
# Traces


@router.with_body(
    "POST",
    "/traces",
    wire.TRACE,
    {201: out.TRACE_RECORDED.model, 404: out.MESSAGE_NOT_FOUND.model},
    summary="Record a trace event on a message",
)
def record_trace(request: HttpRequest) -> HttpResponse:
    trace = wire.parse_trace(read_engine_json(request))
    grants.require_partition(request, trace["partition_id"], grants.WRITE)
    trace_id = traces.trace_record(**trace)
    return json_response(out.TRACE_RECORDED.render(None, trace_id), 201)


@router.get(
    "/traces/names",
    response={200: out.TRACE_NAMES.model, 400: ENGINE_BAD_REQUEST.model},
    summary="Trace names, most recently used first",
    openapi_extra=parameters(query=wire.TRACE_NAMES.schemas()),
)
def list_trace_names(request: HttpRequest) -> HttpResponse:
    page = wire.read_query(request.GET, wire.TRACE_NAMES)
    grants.require_every(request, "queue", grants.READ)
    return json_response(out.TRACE_NAMES.render(traces.trace_names(**page), page["limit"], page["offset"]))


@router.get(
    "/traces/by-name/{path:name}",
    response={200: out.TRACES_BY_NAME.model, 400: ENGINE_BAD_REQUEST.model},
    summary="The trace events filed under a name, oldest first",
    openapi_extra=parameters(query=wire.TRACES_BY_NAME.schemas()),
)
def traces_by_name(request: HttpRequest, name: str) -> HttpResponse:
    page = wire.read_query(request.GET, wire.TRACES_BY_NAME)
    rows, more = traces.traces_by_name(name=name, **page)
    rows = list(grants.readable(request, "queue", rows, lambda r: r.queue))
    return json_response(out.TRACES_BY_NAME.render(rows, page["limit"], page["offset"], more))


@router.get(
    "/traces/{partition_id}/{transaction_id}",
    response={200: out.MESSAGE_TRACES.model, 404: out.MESSAGE_NOT_FOUND.model},
    summary="A message's trace events, oldest first",
)
def message_traces(request: HttpRequest, partition_id: str, transaction_id: str) -> HttpResponse:
    grants.require_partition(request, partition_id, grants.READ)
    rows = traces.traces_for_message(partition_id=wire.partition_id(partition_id), transaction_id=transaction_id)
    return json_response(out.MESSAGE_TRACES.render(rows))


# --------------------------------------------------------------------------
# Namespaces, tasks, partitions, messages


@router.get("/resources/namespaces", response=out.NAMESPACES.model, summary="Namespaces with their queues and counts")
def list_namespaces(request: HttpRequest) -> HttpResponse:
    grants.require_every(request, "queue", grants.READ)
    return json_response(out.NAMESPACES.render(browse.queue_groupings(by="namespace")))


@router.get("/resources/tasks", response=out.TASKS.model, summary="Tasks with their queues and counts")
def list_tasks(request: HttpRequest) -> HttpResponse:
    grants.require_every(request, "queue", grants.READ)
    return json_response(out.TASKS.render(browse.queue_groupings(by="task")))


@router.get(
    "/resources/partitions",
    response={200: out.PARTITIONS.model, 400: ENGINE_BAD_REQUEST.model},
    summary="A page of partitions with their depth",
    openapi_extra=parameters(query=wire.PARTITIONS.schemas()),
)
def list_partitions(request: HttpRequest) -> HttpResponse:
    query = wire.read_query(request.GET, wire.PARTITIONS)
    rows = grants.readable(request, "queue", browse.partition_list(**query), lambda r: r.queue)
    return json_response(out.PARTITIONS.render(rows, query["limit"], query["offset"]))


@router.get(
    "/messages",
    response={200: out.MESSAGES.model, 400: ENGINE_BAD_REQUEST.model},
    summary="A page of messages, newest first, with their status",
    openapi_extra=parameters(query=wire.MESSAGES.schemas()),
)
def list_messages(request: HttpRequest) -> HttpResponse:
    query = wire.parse_messages(request.GET)
    rows = grants.readable(request, "queue", browse.message_list(query=query), lambda r: r.queue)
    mode = (any(r.has_queue_mode for r in rows), max((r.total_groups for r in rows), default=0))
    return json_response(out.MESSAGES.render(rows, mode, query.limit, query.offset))


class _MessageRef(TypedDict):
    partition_id: int
    transaction_id: str


def _message(partition_id: str, transaction_id: str) -> _MessageRef:
    """The domain's keywords for the message a path names (404 unless a partition id)."""
    return {"partition_id": wire.partition_id(partition_id), "transaction_id": transaction_id}


@router.get(
    "/messages/{partition_id}/{transaction_id}",
    response={200: out.MESSAGE_DETAIL.model, 404: out.MESSAGE_NOT_FOUND.model},
    summary="One message with its status per consumer group",
)
def get_message(request: HttpRequest, partition_id: str, transaction_id: str) -> HttpResponse:
    grants.require_partition(request, partition_id, grants.READ)
    row = browse.message_get(**_message(partition_id, transaction_id))
    if row is None:
        raise MessageNotFound()
    return json_response(out.MESSAGE_DETAIL.render(row))


@router.delete(
    "/messages/{partition_id}/{transaction_id}",
    response={200: out.MESSAGE_DELETED.model},
    summary="Delete a message (consumers skip it)",
)
def delete_message(request: HttpRequest, partition_id: str, transaction_id: str) -> HttpResponse:
    grants.require_partition(request, partition_id, grants.ADMIN)
    result = None
    if (pid := wire.path_id(partition_id)) is not None:
        result = queue_operator.queue_message_delete(
            partition_id=pid, transaction_id=transaction_id, who=who_of(request)
        )
    return json_response(out.MESSAGE_DELETED.render(result, partition_id, transaction_id))


@router.post(
    "/messages/{partition_id}/{transaction_id}/retry",
    response={
        200: out.MESSAGE_RETRIED.model,
        404: out.MESSAGE_NOT_FOUND.model,
        409: out.NOT_DEAD_LETTERED.model | out.QUEUE_FULL.model,
    },
    summary="Push a dead-lettered message again and drop its dead letters",
)
def retry_message(request: HttpRequest, partition_id: str, transaction_id: str) -> HttpResponse:
    grants.require_partition(request, partition_id, grants.WRITE)
    result = queue_operator.queue_message_retry(**_message(partition_id, transaction_id), who=who_of(request))
    return json_response(out.MESSAGE_RETRIED.render(result))


@router.with_body(
    "POST",
    "/messages/{partition_id}/{transaction_id}/dlq",
    wire.MOVE_TO_DLQ,
    {200: out.DEAD_LETTERED.model, 404: out.MESSAGE_NOT_FOUND.model, 409: out.MESSAGE_NOT_NEXT.model},
    summary="Move a group's next message to its dead-letter queue",
    required=False,
)
def move_message_to_dlq(request: HttpRequest, partition_id: str, transaction_id: str) -> HttpResponse:
    group, error = wire.parse_move_to_dlq(read_engine_json(request, optional=True))
    grants.require_partition(request, partition_id, grants.WRITE)
    result = queue_operator.queue_message_dead_letter(
        **_message(partition_id, transaction_id), group=group, error=error, who=who_of(request)
    )
    return json_response(out.DEAD_LETTERED.render(result))


# --------------------------------------------------------------------------
# Queen's DLQ replay


@router.with_body(
    "POST",
    "/dlq/{id}/replay",
    wire.REPLAY,
    {200: out.DLQ_REPLAYED.model, 404: out.DEAD_LETTER_GONE.model, 409: out.QUEUE_FULL.model},
    summary="Replay a dead letter into its own queue or another (transactionId dlq:<id>), audited",
    required=False,
)
def replay_dead_letter(request: HttpRequest, id: str) -> HttpResponse:
    to, reason = wire.parse_replay(read_engine_json(request, optional=True))
    # An id that cannot name one answers 404 gone, as Queen does for an id that is no uuid.
    dead_letter = wire.path_id(id)
    # The dead letter's queue is read from and the destination written:
    # a grant must cover both.
    grants.require_dead_letter(request, dead_letter, grants.WRITE)
    if to.queue is not None:
        grants.require(request, "queue", to.queue, grants.WRITE)
    if dead_letter is None:
        raise DeadLetterGone()
    result = queue_operator.queue_dlq_replay(dead_letter_id=dead_letter, who=who_of(request, reason), to=to)
    if result.replayed_at is not None:
        # An earlier replay's record (nothing was written): it tells where
        # the copy went, so it needs the grants that replay needed. Checked
        # after the call, so a replay that moved it meanwhile is covered.
        grants.require_replayed(request, result.source_queue, result.queue, grants.WRITE)
    return json_response(out.DLQ_REPLAYED.render(result))
