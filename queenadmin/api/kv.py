"""KV routes: POST /api/v1/kv, the path routes and the console reads."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja import Router

from queenadmin.api import ratelimit
from queenadmin.api.http import json_response, operations_of, read_json
from queenadmin.api.openapi import body_of, etag_header
from queenadmin.api.schemas.common import RateLimitedOut
from queenadmin.api.schemas.kv import (
    KVBadRequestOut,
    KVCallIn,
    KVCallOut,
    KVGetOut,
    KVListIn,
    KVListOut,
    KVNamespacesOut,
    KVPathDeleteIn,
    KVPathPutIn,
    KVPreconditionOut,
    KVTooLargeOut,
    KVWriteOut,
)
from queenadmin.domain import clock, kv
from queenadmin.errors import KVBadRequest

router = Router(tags=["kv"])

_ERRORS: dict[int | str, Any] = {400: KVBadRequestOut, 413: KVTooLargeOut, 429: RateLimitedOut}


def row_out(row: kv.KVRow, *, with_value: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"key": row.key}
    if with_value:
        out["value"] = row.value
    out["version"] = row.version
    out["expiresAt"] = clock.iso_jsonb(row.expires_at)
    out["updatedAt"] = clock.iso_jsonb(row.updated_at)
    return out


def result_out(result: kv.KVResult) -> dict[str, Any]:
    """Render one result element exactly as protocol.md 2.3 shows it."""
    if isinstance(result, kv.GetResult):
        if result.row is None:
            return {"index": result.index, "op": "get", "found": False, "key": result.key}
        return {"index": result.index, "op": "get", "found": True, **row_out(result.row)}
    if isinstance(result, kv.GetManyResult):
        return {
            "index": result.index,
            "op": "getMany",
            "rows": [row_out(r) for r in result.rows],
            "missing": list(result.missing),
            "truncated": result.truncated,
        }
    if isinstance(result, kv.PageResult):
        return {
            "index": result.index,
            "op": "getPrefix",
            "rows": [row_out(r, with_value=not result.keys_only) for r in result.rows],
            "truncated": result.truncated,
            "nextAfter": result.next_after,
        }
    out: dict[str, Any] = {"index": result.index, "op": result.op, "applied": result.applied}
    if not result.applied:
        out["reason"] = result.reason
    out["key"] = result.key
    if not (result.op == "check" and result.applied):
        # A held check has no value key (protocol 2.3).
        out["value"] = result.value
    out["version"] = result.version
    return out


@router.post(
    "/kv",
    response={200: KVCallOut | KVPreconditionOut, **_ERRORS},
    openapi_extra=body_of(KVCallIn, array_too=True),
    summary="Apply a batch of KV operations",
)
def kv_batch(request: HttpRequest) -> HttpResponse:
    raw = operations_of(read_json(request, KVBadRequest, "kv_bad_body"), KVBadRequest, "kv_bad_body")
    ops = kv.parse_ops(raw)
    ratelimit.admit(request, "write" if any(op.is_write for op in ops) else "read")
    if not ops:
        return json_response({"results": []})
    results = kv.kv_call(ops)
    return json_response({"results": [result_out(r) for r in results]})


def _no_query(request: HttpRequest) -> None:
    if request.META.get("QUERY_STRING"):
        raise KVBadRequest("the KV path routes take no query string", reason="kv_no_query_string")


def _single(request: HttpRequest, raw: dict[str, Any]) -> dict[str, Any]:
    ops = kv.parse_ops([raw])
    ratelimit.admit(request, "write" if ops[0].is_write else "read")
    results = kv.kv_call(ops)
    return result_out(results[0])


@router.get(
    "/kv/{ns}/{path:key}",
    response={200: KVGetOut, **_ERRORS},
    openapi_extra=etag_header(),
    summary="Read one key",
)
def get_key(request: HttpRequest, ns: str, key: str) -> HttpResponse:
    _no_query(request)
    out = _single(request, {"op": "get", "ns": ns, "key": key})
    headers = {"ETag": f'"{out["version"]}"'} if out.get("found") else None
    return json_response(out, headers=headers)


_PATH_FIELDS = ("value", "ttlSeconds", "forever", "expect", "required")


@router.put(
    "/kv/{ns}/{path:key}",
    response={200: KVWriteOut | KVPreconditionOut, **_ERRORS},
    openapi_extra=body_of(KVPathPutIn),
    summary="Write one key",
)
def put_key(request: HttpRequest, ns: str, key: str) -> HttpResponse:
    _no_query(request)
    body = read_json(request, KVBadRequest, "kv_bad_body")
    if not isinstance(body, dict):
        raise KVBadRequest("the body must be a JSON object", reason="kv_bad_body")
    if any(name in body for name in ("op", "ns", "namespace", "key")):
        raise KVBadRequest("op, ns and key come from the path", reason="kv_field_in_path")
    raw = {"op": "put", "ns": ns, "key": key, **{k: body[k] for k in _PATH_FIELDS if k in body}}
    return json_response(_single(request, raw))


@router.delete(
    "/kv/{ns}/{path:key}",
    response={200: KVWriteOut | KVPreconditionOut, **_ERRORS},
    openapi_extra=body_of(KVPathDeleteIn, required=False),
    summary="Delete one key",
)
def delete_key(request: HttpRequest, ns: str, key: str) -> HttpResponse:
    _no_query(request)
    body = read_json(request, KVBadRequest, "kv_bad_body", empty=None)
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise KVBadRequest("the body must be a JSON object", reason="kv_bad_body")
    if any(name in body for name in ("op", "ns", "namespace", "key")):
        raise KVBadRequest("op, ns and key come from the path", reason="kv_field_in_path")
    raw = {"op": "delete", "ns": ns, "key": key, **{k: body[k] for k in ("expect", "required") if k in body}}
    return json_response(_single(request, raw))


@router.get(
    "/resources/kv/namespaces",
    response={200: KVNamespacesOut, 429: RateLimitedOut},
    summary="KV namespaces with key counts",
)
def list_namespaces(request: HttpRequest) -> HttpResponse:
    ratelimit.admit(request, "read")
    rows = kv.kv_namespaces()
    return json_response({"namespaces": [{"namespace": ns, "keys": n} for ns, n in rows]})


@router.post(
    "/resources/kv/list",
    response={200: KVListOut, 400: KVBadRequestOut, 429: RateLimitedOut},
    openapi_extra=body_of(KVListIn),
    summary="One console page of a namespace",
)
def list_keys(request: HttpRequest) -> HttpResponse:
    body = read_json(request, KVBadRequest, "kv_bad_body")
    if not isinstance(body, dict):
        raise KVBadRequest("the body must be a JSON object", reason="kv_bad_body")
    namespace = kv.check_namespace(body.get("namespace"))
    ratelimit.admit(request, "read")
    prefix = body.get("prefix") or ""
    after = body.get("after") or ""
    if not isinstance(prefix, str) or not isinstance(after, str):
        raise KVBadRequest("prefix and after must be strings", reason="kv_bad_request")
    limit = body.get("limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int | float)):
        raise KVBadRequest("limit must be a number", reason="kv_bad_request")
    include_expired = body.get("includeExpired") is True
    keys_only = body.get("keysOnly") is True
    now = clock.now()
    page = kv.kv_list(
        namespace=namespace,
        prefix=prefix,
        after=after,
        limit=int(limit) if limit is not None else kv.DEFAULT_PAGE_LIMIT,
        include_expired=include_expired,
        now=now,
    )
    rows = []
    size = 0
    for row in page.rows:
        item: dict[str, Any] = {"key": row.key}
        if not keys_only:
            item["value"] = row.value
        item["version"] = row.version
        item["expiresAt"] = clock.iso_micros_z(row.expires_at)
        item["updatedAt"] = clock.iso_micros_z(row.updated_at)
        if include_expired:
            item["expired"] = row.expires_at is not None and row.expires_at <= now
        size += len(row.key.encode()) + len(kv.dumps_value(row.value).encode())
        rows.append(item)
    return json_response({"rows": rows, "truncated": page.truncated, "nextAfter": page.next_after, "bytes": size})
