"""Streams routes: POST /streams/v1/queries, /state/get, /cycle (protocol-wave3.md A).

Queen serves them beside ``/api/v1``, so they have an API of their own
(``api.streams_api``, mounted at the root with full paths), with the same
bearer checks, error table and grant rules as every ``/api/v1`` route.

A query is reached through its stored queues as much as through the ones a
body names: registering a taken name, reading a query's state and
committing its cycles need the grant on the stored source and sink too
(``streams.stream_require``), and a refusal shows nothing of the query.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse

from queenadmin.api import grants
from queenadmin.api.errors import ENGINE_BAD_REQUEST, NAME_TOO_LONG
from queenadmin.api.http import json_response, read_engine_json
from queenadmin.api.scopes import ScopedRouter
from queenadmin.api.wire import streams as wire
from queenadmin.domain import streams

_ERRORS: dict[int | str, Any] = {400: ENGINE_BAD_REQUEST.model, 413: NAME_TOO_LONG.model | wire.TOO_LARGE.model}

router = ScopedRouter(tags=["streams"], errors=_ERRORS)


@router.with_body(
    "POST",
    "/streams/v1/queries",
    wire.QUERY,
    {200: wire.QUERY_OUT.model, 409: wire.CONFLICT.model},
    summary="Register a streaming query (idempotent; each worker calls it at start)",
    description=(
        "A new name is `fresh`. The same `config_hash` changes nothing; a changed one answers 409 "
        "unless `reset`, which deletes the query's state and keeps its id. A name already registered "
        "also needs the token's write on the stored query's source and sink queues (403, showing "
        "nothing of the query, when a grant does not cover them)."
    ),
)
def register_query(request: HttpRequest) -> HttpResponse:
    call = wire.parse_query(read_engine_json(request))
    queues = [q for q in (call["source_queue"], call["sink_queue"]) if q]
    limits = grants.limits(request)
    grants.require_queues(limits, queues, grants.WRITE)
    # The stored query's queues are checked under its row lock.
    reg = streams.stream_register(**call, grants=limits)
    return json_response((wire.CONFLICT if reg.conflict else wire.QUERY_OUT).render(reg), 409 if reg.conflict else 200)


@router.with_body(
    "POST",
    "/streams/v1/state/get",
    wire.STATE_GET,
    {200: wire.STATE_OUT.model},
    summary="Read a query's state on one source partition",
    description=(
        "Rows by key; filters combine with AND. An unknown query or partition has no rows. "
        "Needs read on the partition's queue and on the stored query's source and sink."
    ),
)
def get_state(request: HttpRequest) -> HttpResponse:
    call = wire.parse_state_get(read_engine_json(request))
    limits = grants.limits(request)
    if limits is not None:
        grants.require_partitions(limits, [call["partition_id"]], grants.READ)
        streams.stream_require(limits, streams.stream_queues(query_id=call["query_id"]), grants.READ)
    return json_response(wire.STATE_OUT.render(streams.stream_state_get(**call)))


@router.with_body(
    "POST",
    "/streams/v1/cycle",
    wire.CYCLE,
    {200: wire.CYCLE_OUT.model},
    summary="Commit a cycle: state ops, sink pushes and the source ack, all or nothing",
    description=(
        "One database transaction. A cycle that cannot apply (unknown query or partition, a stale or "
        "repeated ack, a full sink) rolls back whole and answers 200 with `success: false` and `error`. "
        "Needs write on the partition's queue, the queues pushed to and the stored query's source and sink."
    ),
)
def commit_cycle(request: HttpRequest) -> HttpResponse:
    body = read_engine_json(request)
    cycle = wire.parse_cycle(body)
    limits = grants.limits(request)
    if limits is not None:
        grants.require_partitions(limits, [cycle.partition_id], grants.WRITE)
        grants.require_queues(limits, [p.queue for p in cycle.pushes], grants.WRITE)
        streams.stream_require(limits, streams.stream_queues(query_id=cycle.query_id), grants.WRITE)
    outcome = streams.stream_cycle(cycle=cycle, producer_sub=request.auth.producer_sub)  # type: ignore[attr-defined]
    return json_response(wire.CYCLE_OUT.render(outcome, body))
