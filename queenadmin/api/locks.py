"""Locks route: POST /api/v1/locks (protocol.md section 3)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja import Router

from queenadmin.api import ratelimit
from queenadmin.api.http import json_response, operations_of, read_json
from queenadmin.api.openapi import body_of
from queenadmin.api.schemas.common import RateLimitedOut
from queenadmin.api.schemas.locks import LocksBadRequestOut, LocksCallIn, LocksCallOut
from queenadmin.domain import clock, locks
from queenadmin.errors import LocksBadRequest

router = Router(tags=["locks"])


def _holder_out(holder: locks.Holder, *, lease: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"slot": holder.slot, "owner": holder.owner}
    if lease:
        out["token"] = holder.token
        out["since"] = clock.iso_jsonb(holder.since)
        out["expiresAt"] = clock.iso_jsonb(holder.expires_at)
        out["renewedAt"] = clock.iso_jsonb(holder.renewed_at)
    return out


def result_out(result: locks.LockResult) -> dict[str, Any]:
    """Render one result element exactly as protocol.md 3.3 shows it."""
    if isinstance(result, locks.Acquire):
        out: dict[str, Any] = {"index": result.index, "op": "acquire", "name": result.name}
        out["acquired"] = result.acquired
        if result.acquired:
            out.update(slot=result.slot, token=result.token, owner=result.owner, guard=result.guard)
            if result.already:
                out["already"] = True
        else:
            out["reason"] = result.reason
            out["holders"] = [_holder_out(h, lease=False) for h in result.holders]
        return out
    if isinstance(result, locks.Renewal):
        out = {"index": result.index, "op": "renew", "name": result.name, "renewed": result.renewed}
        if result.renewed:
            out.update(slot=result.slot, token=result.token, guard=result.guard)
        else:
            out.update(reason="lost", slot=result.slot, holders=[_holder_out(h, lease=False) for h in result.holders])
        return out
    if isinstance(result, locks.Release):
        out = {"index": result.index, "op": "release", "name": result.name, "released": result.released}
        if result.released:
            out["slot"] = result.slot
        else:
            out.update(reason="lost", slot=result.slot, holders=[_holder_out(h, lease=False) for h in result.holders])
        return out
    return {
        "index": result.index,
        "op": "get",
        "name": result.name,
        "held": result.held,
        "holders": [_holder_out(h, lease=True) for h in result.holders],
    }


@router.post(
    "/locks",
    response={200: LocksCallOut, 400: LocksBadRequestOut, 429: RateLimitedOut},
    openapi_extra=body_of(LocksCallIn, array_too=True),
    summary="Acquire, renew, release or read locks and semaphores",
    description=(
        "Each operation is independent. A lock held by somebody else is a 200 with "
        "`acquired: false`; the token is the permit's KV version and changes at every renew."
    ),
)
def locks_batch(request: HttpRequest) -> HttpResponse:
    body = read_json(request, LocksBadRequest, "locks_bad_body")
    ops = locks.parse_lock_ops(operations_of(body, LocksBadRequest, "locks_bad_body"))
    # Locks are KV calls underneath, so they spend the same KV rate.
    ratelimit.admit(request, "read" if all(op.op == "get" for op in ops) else "write")
    if not ops:
        return json_response({"results": []})
    return json_response({"results": [result_out(r) for r in locks.locks_call(ops)]})
