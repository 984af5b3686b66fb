"""History routes (issue 41): a key's versions, a lock's life."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse

from queenadmin.api import grants, ratelimit
from queenadmin.api.http import json_response
from queenadmin.api.openapi import parameters
from queenadmin.api.schemas.common import PATH_TEXT, RateLimitedOut, json_schema_of
from queenadmin.api.schemas.history import KVHistoryOut, LockHistoryOut
from queenadmin.api.scopes import ScopedRouter
from queenadmin.api.wire import kv as kv_wire
from queenadmin.api.wire import locks as locks_wire
from queenadmin.domain import clock, kv, masking
from queenadmin.domain.kv.ops import MAX_PAGE_LIMIT
from queenadmin.domain.locks import history as lock_history
from queenadmin.errors import KVBadRequest, LocksBadRequest

router = ScopedRouter(tags=["history"])

_KV_QUERY = frozenset({"before", "limit"})
#: A version or an event id is a PostgreSQL bigint: a cursor above it names
#: nothing and is refused, as the document's ``maximum`` says.
MAX_CURSOR = 2**63 - 1


def _positive(
    raw: str | None,
    name: str,
    reason: str,
    top: int = MAX_CURSOR,
    error: type[KVBadRequest | LocksBadRequest] = KVBadRequest,
) -> int | None:
    if raw is None:
        return None
    number = int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 19 else 0
    if number < 1 or number > top:
        raise error(f"{name} must be from 1 to {top}", reason=reason)
    return number


def version_out(row: kv.KVVersionRow) -> dict[str, Any]:
    out: dict[str, Any] = {
        "version": row.version,
        "op": row.op,
        "value": row.value,
        "at": clock.iso_jsonb(row.at),
        "by": row.by,
    }
    if row.digest is not None:
        out["digest"] = row.digest
        out["size"] = row.size
    return out


@router.get(
    "/history/kv/{ns}/{path:key}",
    response={200: KVHistoryOut, 400: kv_wire.BAD_REQUEST.model, 413: kv_wire.TOO_LARGE.model, 429: RateLimitedOut},
    openapi_extra=parameters(
        path={"ns": json_schema_of(kv_wire.Namespace), "key": json_schema_of(kv_wire.KVKey, pattern=PATH_TEXT)},
        query={
            "before": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_CURSOR,
                "description": "versions below this one (a page's nextBefore)",
            },
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_LIMIT, "default": 50},
        },
    ),
    summary="A key's versions, newest first (?before=&limit=)",
)
def kv_history(request: HttpRequest, ns: str, key: str) -> HttpResponse:
    unknown = sorted(set(request.GET) - _KV_QUERY)
    if unknown:
        raise KVBadRequest(f"unknown query parameter {unknown[0]}: before, limit", reason="kv_bad_query")
    kv.check_namespace(ns)
    kv.check_key(key)
    if ns == kv.LOCKS_NAMESPACE:
        raise KVBadRequest(
            f"{kv.LOCKS_NAMESPACE} keeps no key history: a lock's is at /history/locks/{{name}}",
            reason="kv_locks_namespace",
        )
    grants.require(request, "kv", ns, grants.READ)
    ratelimit.admit(request, "read")
    before = _positive(request.GET.get("before"), "before", "kv_bad_cursor")
    limit = _positive(request.GET.get("limit"), "limit", "kv_bad_limit", MAX_PAGE_LIMIT) or 50
    page = kv.kv_history(namespace=ns, key=key, before=before, limit=limit)
    return json_response({"versions": [version_out(r) for r in page.versions], "nextBefore": page.next_before})


def event_out(event: lock_history.LockEvent) -> dict[str, Any]:
    out: dict[str, Any] = {
        "event": event.event,
        "at": clock.iso_jsonb(event.at),
        "slot": event.slot,
        "token": masking.mask_token(event.token),
        "holder": event.holder,
    }
    if event.event == "acquired":
        out["waitedMs"] = event.waited_ms or 0
    if event.held_ms is not None:
        out["heldMs"] = event.held_ms
    if event.margin_ms is not None:
        out["marginMs"] = event.margin_ms
    if event.expires_at is not None:
        out["expiresAt"] = clock.iso_jsonb(event.expires_at)
    return out


@router.get(
    "/history/locks/{path:name}",
    response={200: LockHistoryOut, 400: locks_wire.BAD_REQUEST.model, 429: RateLimitedOut},
    openapi_extra=parameters(
        path={"name": {"type": "string", "minLength": 1}},
        query={
            "before": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_CURSOR,
                "description": "events below this (a page's nextBefore)",
            },
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_LIMIT, "default": 50},
        },
    ),
    summary="A lock's life, newest first (?before=&limit=): acquires, renews, releases, expiries",
)
def lock_history_route(request: HttpRequest, name: str) -> HttpResponse:
    unknown = sorted(set(request.GET) - _KV_QUERY)
    if unknown:
        raise LocksBadRequest(f"unknown query parameter {unknown[0]}: before, limit", reason="locks_bad_query")
    before = _positive(request.GET.get("before"), "before", "locks_bad_cursor", error=LocksBadRequest)
    limit = _positive(request.GET.get("limit"), "limit", "locks_bad_limit", MAX_PAGE_LIMIT, LocksBadRequest) or 50
    grants.require(request, "lock", name, grants.READ)
    ratelimit.admit(request, "read")
    page = lock_history.lock_events(name=name, before=before, limit=limit)
    return json_response({"events": [event_out(e) for e in page.events], "nextBefore": page.next_before})
