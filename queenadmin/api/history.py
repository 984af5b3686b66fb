"""History routes (issue 41): a key's versions, a lock's life."""

from __future__ import annotations

from typing import Literal

from django.http import HttpRequest, HttpResponse

from queenadmin.api import grants, ratelimit
from queenadmin.api.errors import RATE_LIMITED
from queenadmin.api.http import json_response
from queenadmin.api.openapi import parameters
from queenadmin.api.schemas.common import PATH_TEXT, JsonbTime, JSONValue, json_schema_of
from queenadmin.api.scopes import ScopedRouter
from queenadmin.api.wire import kv as kv_wire
from queenadmin.api.wire import locks as locks_wire
from queenadmin.api.wire.answers import Answer, Key, Many
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


VERSION = Answer(
    "KVVersionOut",
    doc="One version of a key, newest first in a page.",
    version=Key(int, "the version this write made; a delete has one of its own"),
    op=Literal["put", "incr", "delete"],
    value=Key(JSONValue, "the value written; null for a delete, and for a value kept only as its digest"),
    at=Key(JsonbTime, via=clock.iso_jsonb),
    by=Key(str | None, "a token's name or a JWT's sub, the operator; null: unknown"),
    digest=Key(
        str, "sha256 (hex) of the value's JSON text, when it was over QUEENADMIN_KV_HISTORY_VALUE_BYTES", omit=True
    ),
    size=Key(
        int, "the value's JSON text in bytes, beside a digest", omit=True, when=lambda row: row.digest is not None
    ),
)
_NEXT_BEFORE = Key(int | None, "pass as ?before= for the next page; null: no more", src="next_before")
VERSIONS = Answer("KVHistoryOut", versions=Many(VERSION), nextBefore=_NEXT_BEFORE)
EVENT = Answer(
    "LockEventOut",
    doc="One event of a lock's life, newest first in a page.",
    event=Literal["acquired", "renewed", "released", "expired", "forced", "guard_refused"],
    at=Key(JsonbTime, "when; for an expiry, when the lease ran out", via=clock.iso_jsonb),
    slot=Key(int, "the permit (0 for a lock; a semaphore's slot)"),
    token=Key(str, "the fencing token's fingerprint, never the token", via=masking.mask_token),
    holder=Key(str | None, "who took the lease: an API token's name or a JWT's sub; null: not named"),
    waitedMs=Key(
        int,
        "acquired: how long its owner waited (0: at once)",
        via=lambda waited: waited or 0,
        omit=True,
        when=lambda event: event.event == "acquired",
    ),
    heldMs=Key(int, "released, forced, expired: since the acquire", omit=True),
    marginMs=Key(int, "renewed: what was left of the lease", omit=True),
    expiresAt=Key(JsonbTime, "acquired, renewed: when the lease runs out", via=clock.iso_jsonb, omit=True),
)
EVENTS = Answer("LockHistoryOut", events=Many(EVENT), nextBefore=_NEXT_BEFORE)


@router.get(
    "/history/kv/{ns}/{path:key}",
    response={
        200: VERSIONS.model,
        400: kv_wire.BAD_REQUEST.model,
        413: kv_wire.TOO_LARGE.model,
        429: RATE_LIMITED.model,
    },
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
    return json_response(VERSIONS.render(page))


@router.get(
    "/history/locks/{path:name}",
    response={200: EVENTS.model, 400: locks_wire.BAD_REQUEST.model, 429: RATE_LIMITED.model},
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
    return json_response(EVENTS.render(page))
