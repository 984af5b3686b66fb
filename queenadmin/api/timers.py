"""Timer routes (protocol.md section 4): schedule/cancel batches, cancel, peek, list, count."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse

from queenadmin.api import grants, ratelimit
from queenadmin.api.errors import NAME_TOO_LONG, RATE_LIMITED
from queenadmin.api.http import json_response, operations_of, read_json
from queenadmin.api.scopes import ScopedRouter
from queenadmin.api.wire import timers as wire
from queenadmin.api.wire.common import split_raw_path
from queenadmin.domain import timers
from queenadmin.errors import TimersBadRequest

router = ScopedRouter(tags=["timers"])

_WRITE_ERRORS: dict[int | str, Any] = {
    400: wire.BAD_REQUEST.model,
    403: wire.HORIZON.model,
    413: wire.TOO_LARGE.model | NAME_TOO_LONG.model,
    429: RATE_LIMITED.model,
}
_READ_ERRORS: dict[int | str, Any] = {400: wire.BAD_REQUEST.model, 429: RATE_LIMITED.model}


@router.with_body(
    "POST",
    "/timers",
    wire.CALL,
    {200: wire.CALL_OUT.model},
    summary="Schedule, reschedule or cancel timers (all-or-nothing validation)",
    errors=_WRITE_ERRORS,
    array_too=True,
)
def timers_batch(request: HttpRequest) -> HttpResponse:
    body = read_json(request, TimersBadRequest, "timers_bad_body")
    ops = wire.parse_timer_ops(operations_of(body, TimersBadRequest, "timers_bad_body"))
    grants.require_timer_ops(grants.limits(request), ops)
    # A schedule spends the KV write rate (protocol 4.6).
    ratelimit.admit(request, "write")
    if not ops:
        return json_response(wire.CALL_OUT.render([]))
    outcomes = timers.timers_call(ops, producer_sub=request.auth.producer_sub)  # type: ignore[attr-defined]
    return json_response(wire.CALL_OUT.render(outcomes))


def _queue_and_key(request: HttpRequest, queue: str, timer_key: str) -> tuple[str, str]:
    """The queue and key as sent: a queue holding ``/`` comes as ``%2F``
    (the official client quotes it whole), which only the raw path keeps
    apart from the ``/`` before the key; without one, the route's split."""
    return split_raw_path(request, _PREFIX) or (queue, timer_key)


#: Where the two routes below start, as sent.
_PREFIX = "/api/v1/timers/"


@router.delete(
    "/timers/{queue}/{path:timer_key}",
    response={200: wire.CANCELLED.model | wire.ABSENT.model, 400: wire.BAD_REQUEST.model, 413: NAME_TOO_LONG.model},
    summary="Cancel one timer (absent, with ?txn echoed, when it is not pending)",
)
def cancel_timer(request: HttpRequest, queue: str, timer_key: str) -> HttpResponse:
    queue, timer_key = _queue_and_key(request, queue, timer_key)
    txn = request.GET.get("txn") or None
    (op,) = wire.parse_timer_ops([{"op": "cancel", "queue": queue, "timerKey": timer_key, "txn": txn}])
    grants.require_timer_ops(grants.limits(request), [op])
    (outcome,) = timers.timers_call([op])
    return json_response(wire.outcome_out(outcome))


@router.get(
    "/timers/{queue}/{path:timer_key}",
    response={200: wire.FOUND.model | wire.MISSING.model, 429: RATE_LIMITED.model},
    summary="Peek one timer, with its payload",
)
def peek_timer(request: HttpRequest, queue: str, timer_key: str) -> HttpResponse:
    queue, timer_key = _queue_and_key(request, queue, timer_key)
    grants.require(request, "timer", queue, grants.READ)
    ratelimit.admit(request, "read")
    return json_response(wire.peek_out(queue, timer_key, timers.timer_peek(queue=queue, timer_key=timer_key)))


@router.get(
    "/timers/{queue}",
    response={200: wire.PAGE.model | wire.COUNT.model, **_READ_ERRORS},
    summary="A keyset page of a queue's pending timers (?after=&limit=), or their count (?mode=count&prefix=)",
)
def list_timers(request: HttpRequest, queue: str) -> HttpResponse:
    grants.require(request, "timer", queue, grants.READ)
    ratelimit.admit(request, "read")
    params = request.GET
    mode = params.get("mode")
    if mode is not None:
        if mode != "count":
            raise TimersBadRequest("mode must be count", reason="timers_read_mode_unknown")
        if "after" in params or "limit" in params:
            raise TimersBadRequest("after and limit do not go with mode=count", reason="timers_count_bad_params")
        return json_response(
            wire.COUNT.render(None, timers.timers_count(queue=queue, prefix=params.get("prefix") or ""))
        )
    limit = wire.page_limit(params.get("limit"))
    page = timers.timers_list(queue=queue, after=params.get("after") or "", limit=limit)
    return json_response(wire.PAGE.render(page))
