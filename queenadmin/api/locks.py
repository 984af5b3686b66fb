"""Locks route: POST /api/v1/locks (protocol.md section 3)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from queenadmin.api import grants, ratelimit, scopes
from queenadmin.api.errors import RATE_LIMITED
from queenadmin.api.http import json_response, operations_of, read_json
from queenadmin.api.scopes import ScopedRouter
from queenadmin.api.wire import locks as wire
from queenadmin.domain import locks
from queenadmin.errors import LocksBadRequest

router = ScopedRouter(tags=["locks"], errors={400: wire.BAD_REQUEST.model, 429: RATE_LIMITED.model})


@router.with_body(
    "POST",
    "/locks",
    wire.CALL,
    {200: wire.CALL_OUT.model},
    summary="Acquire, renew, release or read locks and semaphores",
    description=(
        "Each operation is independent. A lock held by somebody else is a 200 with "
        "`acquired: false`; the token is the permit's KV version and changes at every renew."
    ),
    array_too=True,
)
def locks_batch(request: HttpRequest) -> HttpResponse:
    body = read_json(request, LocksBadRequest, "locks_bad_body")
    ops = wire.parse_lock_ops(operations_of(body, LocksBadRequest, "locks_bad_body"))
    scopes.require(request, scopes.locks_call_needs(ops))
    grants.require_lock_ops(request, ops)
    # Locks are KV calls underneath, so they spend the same KV rate.
    ratelimit.admit(request, "read" if all(op.op == "get" for op in ops) else "write")
    if not ops:
        return json_response({"results": []})
    # The identity a push stamps as producerSub names who took each permit.
    results = locks.locks_call(ops, caller=request.auth.producer_sub)  # type: ignore[attr-defined]
    # A get shows raw owners and tokens only to a caller who may write the lock.
    out = [
        wire.result_out(i, r, masked=op.op == "get" and not grants.may(request, "lock", op.name, grants.WRITE))
        for i, (op, r) in enumerate(zip(ops, results, strict=True))
    ]
    return json_response({"results": out})
