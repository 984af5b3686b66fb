"""Ephemeral queue routes: ``/api/v1/ephemeral/*`` (protocol-wave3.md B).

Bodies are parsed by ``api/wire/ephemeral.py`` and every rule is the
domain's (``domain/ephemeral``). The pop is ``async def``, served on the
event loop like the durable pops (``server.handlers.ASYNC_PREFIXES``): a
waiting pop parks on the long-poll hub (``domain/queues/wakeups.py``) under the
queue's own wake-up key, holding no thread or connection, and a push on
any replica wakes it (NOTIFY on PostgreSQL).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from django.http import HttpRequest, HttpResponse

from queenadmin.api import dbthreads, grants
from queenadmin.api.audit import who_of
from queenadmin.api.http import json_response, read_json
from queenadmin.api.openapi import parameters
from queenadmin.api.schemas.common import json_schema_of
from queenadmin.api.scopes import ScopedRouter
from queenadmin.api.wire import ephemeral as wire
from queenadmin.domain import clock, ephemeral
from queenadmin.domain.queues import wakeups
from queenadmin.errors import EphemeralBadRequest

_BAD: dict[int | str, Any] = {400: wire.ERROR.model}

router = ScopedRouter(tags=["ephemeral"], errors=_BAD)


def _body(request: HttpRequest) -> Any:
    return read_json(request, EphemeralBadRequest, "ephemeral_bad_request")


@router.with_body(
    "POST",
    "/ephemeral/configure",
    wire.EphemeralConfigureIn,
    {201: wire.CONFIGURED.model},
    summary="Declare an ephemeral queue and its bounds (the declaration survives; contents never do)",
)
def configure_ephemeral(request: HttpRequest) -> HttpResponse:
    call = wire.parse_configure(_body(request))
    grants.require(request, "queue", call.queue, grants.WRITE)
    at = ephemeral.eph_configure(queue=call.queue, options=call.options, who=who_of(request))
    updated_at = clock.iso_millis_z(datetime.fromtimestamp(at / 1000, UTC))
    return json_response(wire.CONFIGURED.render(call, updated_at), 201)


@router.with_body(
    "POST",
    "/ephemeral/reset",
    wire.EphemeralQueueIn,
    {200: wire.RESET.model},
    summary="Drop every message, void every lease, move cursors to the tail (a missing queue: dropped 0)",
)
def reset_ephemeral(request: HttpRequest) -> HttpResponse:
    queue = wire.parse_queue(_body(request))
    grants.require(request, "queue", queue, grants.WRITE)
    return json_response(wire.RESET.render(None, queue, ephemeral.eph_reset(queue=queue, who=who_of(request))))


#: A queue name in the path: the names rule of the parser (``wire.name_of``).
_NAME_IN_PATH = parameters(path={"queue": json_schema_of(wire.Name)})


@router.delete(
    "/ephemeral/queue/{path:queue}",
    response={200: wire.DELETED.model, **_BAD},
    openapi_extra=_NAME_IN_PATH,
    summary="Delete an ephemeral queue: contents, cursors and declaration (never 404)",
)
def delete_ephemeral(request: HttpRequest, queue: str) -> HttpResponse:
    queue = wire.lookup_name(queue, "queue")
    grants.require(request, "queue", queue, grants.ADMIN)
    done = ephemeral.eph_delete(queue=queue, who=who_of(request))
    return json_response(wire.DELETED.render(done, queue))


@router.with_body(
    "POST",
    "/ephemeral/push",
    wire.EphemeralPushIn,
    {201: wire.PUSHED.model, 429: wire.ERROR.model, 503: wire.ERROR.model},
    summary="Push messages to an ephemeral queue, all or nothing (429 queue_full at its bounds)",
)
def push_ephemeral(request: HttpRequest) -> HttpResponse:
    call = wire.parse_push(_body(request))
    grants.require(request, "queue", call.queue, grants.WRITE)
    pushed = ephemeral.eph_push(queue=call.queue, partition=call.partition, payloads=call.payloads)
    return json_response(wire.PUSHED.render(None, pushed), 201)


@router.get(
    "/ephemeral/pop",
    response={200: wire.POPPED.model, **_BAD},
    openapi_extra=parameters(query=wire.POP.schemas()),
    summary="Take messages (redeliveries first); an empty list when none, also after a wait",
)
async def pop_ephemeral(request: HttpRequest) -> HttpResponse:
    call = wire.parse_pop(request.GET)
    grants.require(request, "queue", call.queue, grants.WRITE)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + (call.timeout_ms / 1000 if call.wait else 0)
    key = ephemeral.wake_key(call.queue)
    lane = (call.group, call.partition)
    hub = wakeups.hub
    hub.bind()
    while True:
        generation = hub.generation(key)
        final = loop.time() >= deadline
        take = await dbthreads.run(
            ephemeral.eph_take,
            queue=call.queue,
            partition=call.partition,
            group=call.group,
            batch=call.batch,
            auto_ack=call.auto_ack,
            hold=call.wait and not final,
        )
        if take.messages:
            # There may be more: hand on to the next waiter of this lane.
            hub.wake_one(key, lane)
        if take.messages or not call.wait or final or hub.closed:
            return json_response(wire.POPPED.render(take, call.queue))
        wait_for = deadline - loop.time()
        if take.hold_until_ms is not None:
            # windowBuffer: look again once its ms have passed.
            wait_for = min(wait_for, max(0.005, (take.hold_until_ms - ephemeral.now_ms()) / 1000))
        await hub.wait(key, generation, max(0.0, wait_for), lane=lane)


@router.with_body(
    "POST",
    "/ephemeral/ack",
    wire.EphemeralAckIn,
    {200: wire.ACKED.model},
    summary="Settle popped messages: acked, redelivered, stale or unknown per id (never an error per id)",
)
def ack_ephemeral(request: HttpRequest) -> HttpResponse:
    call = wire.parse_ack(_body(request))
    grants.require(request, "queue", call.queue, grants.WRITE)
    outcomes = ephemeral.eph_ack(queue=call.queue, group=call.group, acks=call.acks)
    return json_response(wire.ACKED.render(zip(call.acks, outcomes, strict=True)))


@router.get("/ephemeral/queues", response=wire.QUEUES.model, summary="Every ephemeral queue, declared and implicit")
def list_ephemeral(request: HttpRequest) -> HttpResponse:
    views, cell = ephemeral.eph_queues()
    views = list(grants.readable(request, "queue", views, lambda v: v.queue))
    return json_response(wire.QUEUES.render(views, cell))


@router.get(
    "/ephemeral/queues/{path:queue}/depth",
    response={200: wire.DEPTH.model, 404: wire.ERROR.model, **_BAD},
    openapi_extra=_NAME_IN_PATH,
    summary="Depth gauges of one ephemeral queue (404 ephemeral_queue_not_found when there is none)",
)
def depth_ephemeral(request: HttpRequest, queue: str) -> HttpResponse:
    queue = wire.lookup_name(queue, "queue")
    grants.require(request, "queue", queue, grants.READ)
    return json_response(wire.DEPTH.render(ephemeral.eph_depth(queue=queue)))
