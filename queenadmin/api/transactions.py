"""Transaction route: POST /api/v1/transaction (protocol.md section 5)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse

from queenadmin.api import grants, ratelimit
from queenadmin.api.errors import ENGINE_BAD_REQUEST, NAME_TOO_LONG, QUEUE_BUSY, RATE_LIMITED
from queenadmin.api.http import json_response
from queenadmin.api.scopes import ScopedRouter
from queenadmin.api.wire import binary
from queenadmin.api.wire import kv as kv_wire
from queenadmin.api.wire import timers as timers_wire
from queenadmin.api.wire import transactions as wire
from queenadmin.domain import transactions

_ERRORS: dict[int | str, Any] = {
    400: ENGINE_BAD_REQUEST.model | kv_wire.BAD_REQUEST.model | timers_wire.BAD_REQUEST.model,
    403: timers_wire.HORIZON.model,
    409: QUEUE_BUSY.model | kv_wire.CONFLICT.model,
    413: NAME_TOO_LONG.model | kv_wire.TOO_LARGE.model | timers_wire.TOO_LARGE.model,
    429: RATE_LIMITED.model,
}

router = ScopedRouter(tags=["transactions"], errors=_ERRORS)


@router.with_body(
    "POST",
    "/transaction",
    wire.BODY,
    {200: wire.COMMIT.model | wire.ROLLBACK.model | wire.PRECONDITION.model},
    summary="Commit acks, pushes, KV ops, timers and positions all or nothing",
    description=(
        "A rollback is an HTTP 200 with `success: false` and a `reason`; a lock's guard "
        "(a required KV check) that lost answers `kv_precondition` with the flat `failedIndex`."
    ),
)
def commit_transaction(request: HttpRequest) -> HttpResponse:
    bundle = binary.read_either(request, framed=binary.parse_transaction, json=wire.parse_transaction)
    limits = grants.limits(request)
    if limits is not None:
        # Every operation before anything is written: one foreign one refuses the bundle.
        grants.require_queues(limits, [p.item.queue for p in bundle.pushes], grants.WRITE)
        grants.require_queues(limits, [p.queue for p in bundle.positions], grants.WRITE)
        grants.require_partitions(limits, [a.partition_id for a in bundle.acks], grants.WRITE)
        grants.require_kv(limits, bundle.kv)
        grants.require_timer_ops(limits, bundle.timers)
    if bundle.kv or bundle.timers:
        # KV ops and schedules spend the KV write rate, as on their own routes.
        ratelimit.admit(request, "write")
    outcome = transactions.txn_commit(bundle=bundle, producer_sub=request.auth.producer_sub)  # type: ignore[attr-defined]
    return json_response(wire.outcome_out(outcome, sees_permit=grants.sees_permit(request)))
