"""History routes (issue 41): a key's versions."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse

from queenadmin.api import grants, ratelimit
from queenadmin.api.http import json_response
from queenadmin.api.openapi import parameters
from queenadmin.api.schemas.common import PATH_TEXT, RateLimitedOut, json_schema_of
from queenadmin.api.schemas.history import KVHistoryOut
from queenadmin.api.schemas.kv import KVBadRequestOut, KVKey, Namespace
from queenadmin.api.scopes import ScopedRouter
from queenadmin.domain import clock, kv
from queenadmin.domain.kv.ops import MAX_PAGE_LIMIT
from queenadmin.errors import KVBadRequest

router = ScopedRouter(tags=["history"])

_KV_QUERY = frozenset({"before", "limit"})


def _positive(raw: str | None, name: str, reason: str, top: int | None = None) -> int | None:
    if raw is None:
        return None
    number = int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 19 else 0
    if number < 1 or (top is not None and number > top):
        bound = f"from 1 to {top}" if top is not None else "a positive integer"
        raise KVBadRequest(f"{name} must be {bound}", reason=reason)
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
    response={200: KVHistoryOut, 400: KVBadRequestOut, 429: RateLimitedOut},
    openapi_extra=parameters(
        path={"ns": json_schema_of(Namespace), "key": json_schema_of(KVKey, pattern=PATH_TEXT)},
        query={
            "before": {"type": "integer", "minimum": 1, "description": "versions below this one (a page's nextBefore)"},
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
