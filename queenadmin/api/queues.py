"""Message-log routes: configure, push, pop, ack, lease extend, resources,
pause and resume, DLQ.

Each route parses with ``api/wire/queues.py`` (``api/wire/resources.py``
for the resource reads, pause, resume and the DLQ list), calls the domain
(``domain/queues``) with the typed command, and renders its result with the
same wire module; nothing else happens here. Pops are ``async def``
(``server.handlers.ASYNC_PREFIXES`` sends ``/api/v1/pop`` to
``server.handlers.PopHandler``): a long-poll waits on ``wakeups.hub``
without a thread, and its database work runs on ``dbthreads``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from typing import Any

from django.http import HttpRequest, HttpResponse

from queenadmin.api import dbthreads, grants
from queenadmin.api.audit import who_of
from queenadmin.api.errors import ENGINE_BAD_REQUEST, ENGINE_ERRORS, QUEUE_BUSY, QUEUE_NOT_FOUND
from queenadmin.api.http import json_response, read_engine_json
from queenadmin.api.openapi import PARAMETERS_KEY, parameters
from queenadmin.api.schemas import queues as out
from queenadmin.api.schemas.common import EngineName, json_schema_of
from queenadmin.api.scopes import ScopedRouter
from queenadmin.api.wire import binary
from queenadmin.api.wire import configure as configure_wire
from queenadmin.api.wire import messages as messages_wire
from queenadmin.api.wire import queues as wire
from queenadmin.api.wire import resources as resources_wire
from queenadmin.api.wire.answers import list_of
from queenadmin.conf import settings
from queenadmin.domain import clock, kv, queues
from queenadmin.domain.queues import operator as queue_operator
from queenadmin.domain.queues import wakeups
from queenadmin.errors import QueueNotFound
from queenadmin.plumbing import ARRIVED_KEY

router = ScopedRouter(tags=["queues"], errors=ENGINE_ERRORS)

# --------------------------------------------------------------------------
# Configure


@router.with_body(
    "POST",
    "/configure",
    configure_wire.CONFIGURE,
    {200: out.CONFIGURED.model},
    summary="Create a queue or change its options",
)
def configure_queue(request: HttpRequest) -> HttpResponse:
    command = configure_wire.parse_configure(read_engine_json(request))
    grants.require(request, "queue", command.name, grants.WRITE)
    config = queues.queue_configure(request=command, who=who_of(request))
    return json_response(out.CONFIGURED.render(config))


# --------------------------------------------------------------------------
# Push


@router.with_body(
    "POST",
    "/push",
    wire.PUSH,
    {201: list_of(wire.PUSHED, wire.PUSH_FAILED), 409: QUEUE_BUSY.model},
    summary="Append messages (201, one result per item)",
)
def push_messages(request: HttpRequest) -> HttpResponse:
    items = binary.read_either(request, framed=binary.parse_push, json=wire.parse_push)
    limits = grants.limits(request)
    if limits is not None:
        grants.require_queues(limits, {item.queue for item in items}, grants.WRITE)
    results = queues.queue_push(items=items, producer_sub=request.auth.producer_sub) if items else []  # type: ignore[attr-defined]
    return json_response(wire.render_push(results), 201)


# --------------------------------------------------------------------------
# Pop


async def _pop(request: HttpRequest, call: wire.PopCall) -> HttpResponse:
    loop = asyncio.get_running_loop()
    # The timeout runs from the pop's arrival (``plumbing.ARRIVED_KEY``).
    started = getattr(request, "scope", {}).get(ARRIVED_KEY) or loop.time()
    deadline = started + call.timeout_seconds
    key = call.request.queue if call.request.queue is not None else wakeups.ANY
    # Waiters that compete for the same messages (see wakeups.Hub).
    lane = (call.request.group, call.request.partition)
    # What decides whether a claim finds anything (see Hub.known_empty).
    shape = (lane, call.request.namespace, call.request.task)
    hub = wakeups.hub
    hub.bind()
    woken = False
    #: The conflation policy the last claim found (None before one).
    policy: queues.ConflationPolicy | None = None
    while True:
        # Read the wake-up generation before claiming, so a push that lands
        # between the claim and the wait is not missed.
        generation = hub.generation(key)
        if woken and loop.time() >= deadline:
            # Out of time: hand the wake-up on instead of claiming.
            hub.wake_one(key, lane)
            return await _empty(call, policy)
        if call.wait and not woken and (hub.known_empty(key, shape) or hub.claim_in_flight(key, shape)):
            # Pops of this shape wait with nothing claimable and no wake-up
            # since, or one of them is claiming now: join them without a
            # claim of our own.
            woken = await hub.wait(key, generation, deadline - loop.time(), lane=lane)
            if not woken:
                return await _empty(call, policy)
            continue
        claim = await _claim(call, key, shape, lane, generation)
        policy = queues.ConflationPolicy(claim.conflation, claim.conflation_conflict)
        if claim.messages:
            # There may be more: wake the next waiter of this lane.
            hub.wake_one(key, lane)
            waited_ms = int((loop.time() - started) * 1000)
            framed = None
            if call.frames and settings.FRAMED_POP:
                framed = binary.render_pop_frames(claim, call.autopilot, waited_ms)
            if framed is not None:
                return HttpResponse(framed, content_type=binary.POP_CONTENT_TYPE)
            return json_response(wire.render_claim(claim, call.autopilot, waited_ms))
        remaining = deadline - loop.time()
        if not call.wait or remaining <= 0:
            return await _empty(call, policy)
        recheck_at = None
        if claim.retry_at is not None:
            until_free = (claim.retry_at - clock.now()).total_seconds() + 0.01
            recheck_at = loop.time() + max(0.01, until_free)
        empty_until = loop.time() + wakeups.pop_recheck_seconds()
        hub.note_empty(key, shape, generation, empty_until if recheck_at is None else min(recheck_at, empty_until))
        woken = await hub.wait(key, generation, remaining, lane=lane, recheck_at=recheck_at)
        if not woken:
            # The timeout ran out with no wake-up: no last claim (a thousand
            # waiters timing out together would queue a thousand claims).
            return await _empty(call, policy)


async def _claim(call: wire.PopCall, key: str, shape: Hashable, lane: Hashable, generation: int) -> queues.Claim:
    """``queue_claim`` for a pop; while it runs, a waiting pop's claim is
    the one others of its shape wait on (``Hub.claim_in_flight``). If it
    fails (or the client leaves), the next waiter of its lane claims
    instead of waiting on a claim that will never answer."""
    if not call.wait:
        return await dbthreads.run(queues.queue_claim, request=call.request)
    hub = wakeups.hub
    hub.claim_started(key, shape, generation)
    try:
        return await dbthreads.run(queues.queue_claim, request=call.request)
    except BaseException:
        hub.wake_one(key, lane)
        raise
    finally:
        hub.claim_ended(key, shape)


async def _empty(call: wire.PopCall, policy: queues.ConflationPolicy | None) -> HttpResponse:
    """An empty pop's answer: 204, or a 200 body that says the group's
    conflation policy (as its last claim found it)."""
    if call.request.group == queues.QUEUE_MODE:
        return HttpResponse(status=204)
    if policy is None:
        if not call.request.conflation:
            # A pop that made no claim (it waited behind others of its lane)
            # reads the policy only when it asked for conflation, the case
            # where the client takes a 204 for a broker that ignored it: so
            # plain waiters timing out together cost no database work.
            return HttpResponse(status=204)
        policy = await dbthreads.run(queues.queue_conflation_policy, request=call.request)
    body = wire.render_empty_pop(call, policy)
    return HttpResponse(status=204) if body is None else json_response(body)


_POP_RESPONSES: dict[int | str, Any] = {
    200: wire.POPPED.model | wire.EMPTY_POP.model,
    204: None,
    **ENGINE_ERRORS,
    400: ENGINE_BAD_REQUEST.model | wire.CONFLATION_REFUSED.model,
}
#: ``frames=true`` answers the framed pop (``wire/binary.py``) where
#: ``FRAMED_POP`` is on.
_FRAMED = {
    "responses": {200: {"content": {binary.POP_CONTENT_TYPE: {"schema": {"type": "string", "format": "binary"}}}}}
}

#: The pop routes' path names, as ``wire.parse_pop_queue`` reads them.
_NAME = json_schema_of(EngineName)


def _pop_parameters(*exploded: dict[str, Any], **path: dict[str, Any]) -> dict[str, Any]:
    """A pop's parameters (``wire.POP``, ``wire.DELIVERY``, ``exploded``), ``path`` and its framed answer."""
    extra = parameters(path=path, query=wire.POP.schemas())
    extra[PARAMETERS_KEY] += [wire.DELIVERY, *exploded]
    return {**_FRAMED, **extra}


@router.get(
    "/pop/queue/{queue}",
    response=_POP_RESPONSES,
    openapi_extra=_pop_parameters(queue=_NAME),
    summary="Lease messages from any partition of a queue (204 when none)",
)
async def pop_queue(request: HttpRequest, queue: str) -> HttpResponse:
    call = wire.parse_pop_queue(request.GET, queue)
    grants.require(request, "queue", call.request.queue or queue, grants.WRITE)
    return await _pop(request, call)


@router.get(
    "/pop/queue/{queue}/partition/{partition}",
    response=_POP_RESPONSES,
    openapi_extra=_pop_parameters(queue=_NAME, partition=_NAME),
    summary="Lease messages from one partition (204 when none)",
)
async def pop_partition(request: HttpRequest, queue: str, partition: str) -> HttpResponse:
    call = wire.parse_pop_queue(request.GET, queue, partition)
    grants.require(request, "queue", call.request.queue or queue, grants.WRITE)
    return await _pop(request, call)


@router.get(
    "/pop",
    response=_POP_RESPONSES,
    openapi_extra=_pop_parameters(wire.SELECTION),
    summary="Lease messages from the queues of a namespace and/or task (204 when none)",
)
async def pop_discovery(request: HttpRequest) -> HttpResponse:
    call = wire.parse_pop_discovery(request.GET)
    # Any queue of the namespace or task may answer, those made later too.
    grants.require_every(request, "queue", grants.WRITE)
    return await _pop(request, call)


# --------------------------------------------------------------------------
# Ack and lease


@router.with_body(
    "POST", "/ack", wire.ACK, {200: list_of(wire.ACKED)}, summary="Acknowledge one message (answers an array)"
)
def ack_message(request: HttpRequest) -> HttpResponse:
    return _acked(request, wire.parse_ack(read_engine_json(request)))


@router.with_body(
    "POST", "/ack/batch", wire.ACK_BATCH, {200: list_of(wire.ACKED)}, summary="Acknowledge several messages"
)
def ack_batch(request: HttpRequest) -> HttpResponse:
    return _acked(request, wire.parse_ack_batch(read_engine_json(request)))


def _acked(request: HttpRequest, items: list[queues.AckItem]) -> HttpResponse:
    grants.require_partitions(grants.limits(request), [item.partition_id for item in items], grants.WRITE)
    return json_response(wire.render_acks(queues.queue_ack(items=items) if items else []))


@router.with_body(
    "POST",
    "/lease/{lease_id}/extend",
    wire.LEASE_EXTEND,
    {200: wire.LEASE_EXTENDED.model},
    summary="Extend every partition lease of a pop (200 success:false when gone)",
    errors={400: ENGINE_BAD_REQUEST.model},
    required=False,
)
def extend_lease(request: HttpRequest, lease_id: str) -> HttpResponse:
    wire.check_text(lease_id, "leaseId")
    seconds = wire.parse_lease_extend(read_engine_json(request, optional=True))
    grants.require_lease(request, lease_id, grants.WRITE)
    extension = queues.queue_lease_extend(lease_id=lease_id, seconds=seconds)
    return json_response(wire.LEASE_EXTENDED.render(extension))


# --------------------------------------------------------------------------
# Resources


@router.get(
    "/resources/queues",
    response={200: out.QUEUE_LIST.model | out.LANES.model, 400: ENGINE_BAD_REQUEST.model},
    openapi_extra=parameters(query=resources_wire.LANES.schemas()),
    summary="Every queue with its depth, newest first",
)
def list_queues(request: HttpRequest) -> HttpResponse:
    stats = grants.readable(request, "queue", queues.queue_list(), lambda q: q.name)
    if resources_wire.wants_lanes(request.GET):
        return json_response(out.LANES.render(stats))
    # Store-wide KV totals only for a token that may read every namespace.
    kv_rows, kv_bytes = kv.kv_totals() if grants.may_read_every(request, "kv") else (0, 0)
    return json_response(out.QUEUE_LIST.render(stats, kv_rows, kv_bytes))


def _stats_or_404(
    name: str, group: str | None = None, *, with_age: bool = False, with_messages: bool = False
) -> queues.QueueStats:
    wire.check_text(name, "queue")
    stats = queues.queue_stats(name=name, group=group, with_age=with_age, with_messages=with_messages)
    if stats is None:
        raise QueueNotFound()
    return stats


@router.get(
    "/resources/queues/{queue}/depth",
    response={200: out.QUEUE_DEPTH.model, 404: QUEUE_NOT_FOUND.model, **ENGINE_ERRORS},
    openapi_extra=parameters(query=resources_wire.DEPTH.schemas()),
    summary="Pending, in flight and ready, per partition (arithmetic on cursors)",
)
def queue_depth(request: HttpRequest, queue: str) -> HttpResponse:
    group = resources_wire.parse_depth_group(request.GET)
    grants.require(request, "queue", queue, grants.READ)
    return json_response(out.QUEUE_DEPTH.render(_stats_or_404(queue, group, with_age=True)))


# --------------------------------------------------------------------------
# Pause and resume (``domain/queues/operator/pause.py``): declared before the
# ``path:`` routes below and the messages router's consumer-group routes,
# which would otherwise shadow them (Django tries the patterns in order).

_PAUSE_ANSWERS: dict[int | str, Any] = {200: out.PAUSE.model, 404: QUEUE_NOT_FOUND.model}


def _paused(request: HttpRequest, queue: str, group: str | None, pause: bool) -> HttpResponse:
    reason = resources_wire.parse_pause(read_engine_json(request, optional=True))
    wire.check_text(queue, "queue")
    grants.require(request, "queue", queue, grants.ADMIN)
    who = who_of(request, reason)
    if group is None:
        change = (queue_operator.queue_pause if pause else queue_operator.queue_resume)(queue=queue, who=who)
    else:
        verb = queue_operator.queue_group_pause if pause else queue_operator.queue_group_resume
        change = verb(queue=queue, group=group, who=who)
    return json_response(out.PAUSE.render(change))


@router.with_body(
    "POST",
    "/resources/queues/{queue}/pause",
    resources_wire.PAUSE,
    _PAUSE_ANSWERS,
    summary="Pause every pop of a queue (they answer as an empty queue; pushes and acks go on)",
    required=False,
    openapi_extra=parameters(path={"queue": _NAME}),
)
def pause_queue(request: HttpRequest, queue: str) -> HttpResponse:
    return _paused(request, queue, None, True)


@router.with_body(
    "POST",
    "/resources/queues/{queue}/resume",
    resources_wire.PAUSE,
    _PAUSE_ANSWERS,
    summary="Resume the pops of a paused queue and wake the waiting ones",
    required=False,
    openapi_extra=parameters(path={"queue": _NAME}),
)
def resume_queue(request: HttpRequest, queue: str) -> HttpResponse:
    return _paused(request, queue, None, False)


@router.with_body(
    "POST",
    "/consumer-groups/{group}/queues/{queue}/pause",
    resources_wire.PAUSE,
    _PAUSE_ANSWERS,
    summary="Pause one consumer group's pops of a queue (other groups read on)",
    required=False,
    openapi_extra=parameters(path={"group": _NAME, "queue": _NAME}),
)
def pause_group(request: HttpRequest, group: str, queue: str) -> HttpResponse:
    return _paused(request, queue, messages_wire.parse_group(group), True)


@router.with_body(
    "POST",
    "/consumer-groups/{group}/queues/{queue}/resume",
    resources_wire.PAUSE,
    _PAUSE_ANSWERS,
    summary="Resume one consumer group's pops of a queue and wake its waiting ones",
    required=False,
    openapi_extra=parameters(path={"group": _NAME, "queue": _NAME}),
)
def resume_group(request: HttpRequest, group: str, queue: str) -> HttpResponse:
    return _paused(request, queue, messages_wire.parse_group(group), False)


# ``path:``, so that a name holding ``/`` (sent as is or as ``%2F``: Django
# routes on the decoded path) is reached; declared after ``/depth``, which
# they would otherwise shadow (Django tries the patterns in order).
@router.get(
    "/resources/queues/{path:queue}",
    response={200: out.QUEUE_DETAIL.model, 404: QUEUE_NOT_FOUND.model, 400: ENGINE_BAD_REQUEST.model},
    summary="One queue with its partitions",
)
def get_queue(request: HttpRequest, queue: str) -> HttpResponse:
    grants.require(request, "queue", queue, grants.READ)
    return json_response(out.QUEUE_DETAIL.render(_stats_or_404(queue, with_messages=True)))


@router.delete(
    "/resources/queues/{path:queue}",
    response={200: out.QUEUE_DELETED.model | out.QUEUE_NOT_DELETED.model, 400: ENGINE_BAD_REQUEST.model},
    summary="Delete a queue and everything in it",
)
def delete_queue(request: HttpRequest, queue: str) -> HttpResponse:
    wire.check_text(queue, "queue")
    grants.require(request, "queue", queue, grants.ADMIN)
    existed = queues.queue_delete(name=queue, who=who_of(request))
    return json_response((out.QUEUE_DELETED if existed else out.QUEUE_NOT_DELETED).render(None, queue))


@router.get("/resources/overview", response=out.OVERVIEW.model, summary="Counts across every queue")
def overview(request: HttpRequest) -> HttpResponse:
    grants.require_every(request, "queue", grants.READ)
    return json_response(out.OVERVIEW.render(queues.queue_overview()))


@router.get(
    "/dlq",
    response={200: out.DEAD_LETTERS.model, 400: ENGINE_BAD_REQUEST.model},
    openapi_extra=parameters(query=resources_wire.DLQ.schemas()),
    summary="Dead letters, newest first",
)
def list_dlq(request: HttpRequest) -> HttpResponse:
    query = resources_wire.parse_dlq(request.GET)
    # The total counts every queue's dead letters unless one queue is named.
    if query.queue is None:
        grants.require_every(request, "queue", grants.READ)
    else:
        grants.require(request, "queue", query.queue, grants.READ)
    rows, total = queues.dlq_list(query=query)
    return json_response(out.DEAD_LETTERS.render(rows, total))
