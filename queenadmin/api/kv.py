"""KV routes: POST /api/v1/kv, the path routes and the console reads."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.http import HttpRequest, HttpResponse

from queenadmin.api import grants, ratelimit, scopes
from queenadmin.api.errors import RATE_LIMITED
from queenadmin.api.http import json_response, operations_of, read_json
from queenadmin.api.openapi import etag_header, parameters
from queenadmin.api.schemas.common import PATH_TEXT, json_schema_of
from queenadmin.api.scopes import ScopedRouter
from queenadmin.api.wire import kv as wire
from queenadmin.domain import clock, kv, masking, tokens
from queenadmin.errors import KVBadRequest
from queenadmin.models import TokenScope
from queenadmin.plumbing import db

_ERRORS: dict[int | str, Any] = {400: wire.BAD_REQUEST.model, 413: wire.TOO_LARGE.model, 429: RATE_LIMITED.model}

router = ScopedRouter(tags=["kv"], errors=_ERRORS)


@router.with_body(
    "POST",
    "/kv",
    wire.CALL,
    {200: wire.CALL_OUT.model | wire.PRECONDITION.model, 409: wire.CONFLICT.model},
    summary="Apply a batch of KV operations",
    array_too=True,
)
def kv_batch(request: HttpRequest) -> HttpResponse:
    raw = operations_of(read_json(request, KVBadRequest, "kv_bad_body"), KVBadRequest, "kv_bad_body")
    ops = wire.parse_ops(raw)
    scopes.require(request, _needs(ops))
    grants.require_kv_ops(request, ops)
    ratelimit.admit(request, "write" if any(isinstance(op, kv.WRITES) for op in ops) else "read")
    if not ops:
        return json_response({"results": []})
    by = request.auth.producer_sub  # type: ignore[attr-defined]
    return json_response(wire.results_out(kv.kv_call(ops, by=by), sees_permit=grants.sees_permit(request)))


def _needs(ops: list[kv.KVOp]) -> TokenScope:
    """The scope of a call: a ``check`` of a lock permit needs write, as it
    tells the permit's version (the lock's token), like a holder's guard."""
    if any(isinstance(op, kv.KVCheck) and op.namespace == kv.LOCKS_NAMESPACE for op in ops):
        return scopes.WRITE
    return scopes.kv_call_needs(ops)


#: ``ns`` and ``key`` of the path routes (``key`` may hold slashes).
_KEY_PATH = parameters(
    path={"ns": json_schema_of(wire.Namespace), "key": json_schema_of(wire.KVKey, pattern=PATH_TEXT)}
)
#: A put's key is one to store: the rule of names (``domain.names``).
_PUT_KEY_PATH = parameters(path={"ns": json_schema_of(wire.Namespace), "key": json_schema_of(wire.KVNewKey)})


def _no_query(request: HttpRequest) -> None:
    if request.META.get("QUERY_STRING"):
        raise KVBadRequest("the KV path routes take no query string", reason="kv_no_query_string")


def _single(request: HttpRequest, raw: dict[str, Any]) -> dict[str, Any]:
    op = wire.parse_op(0, raw)
    grants.require_kv_ops(request, [op])
    ratelimit.admit(request, "write" if isinstance(op, kv.WRITES) else "read")
    by = request.auth.producer_sub  # type: ignore[attr-defined]
    return wire.result_out(0, kv.kv_call([op], by=by)[0], sees_permit=grants.sees_permit(request))


@router.get(
    "/kv/{ns}/{path:key}",
    response={200: wire.GET_OUT, **_ERRORS},
    openapi_extra={**etag_header(), **_KEY_PATH},
    summary="Read one key",
)
def get_key(request: HttpRequest, ns: str, key: str) -> HttpResponse:
    _no_query(request)
    out = _single(request, {"op": "get", "ns": ns, "key": key})
    # A masked permit's version is a fingerprint, no entity tag.
    headers = {"ETag": f'"{out["version"]}"'} if out.get("found") and isinstance(out["version"], int) else None
    return json_response(out, headers=headers)


_PATH_FIELDS = ("value", "ttlSeconds", "forever", "expect", "required")


@router.with_body(
    "PUT",
    "/kv/{ns}/{path:key}",
    wire.PATH_PUT,
    {200: wire.WRITE_OUT | wire.PRECONDITION.model},
    summary="Write one key",
    openapi_extra=_PUT_KEY_PATH,
)
def put_key(request: HttpRequest, ns: str, key: str) -> HttpResponse:
    _no_query(request)
    fields = wire.path_body(read_json(request, KVBadRequest, "kv_bad_body"), _PATH_FIELDS)
    raw = {"op": "put", "ns": ns, "key": key, **fields}
    return json_response(_single(request, raw))


@router.with_body(
    "DELETE",
    "/kv/{ns}/{path:key}",
    wire.PATH_DELETE,
    {200: wire.WRITE_OUT | wire.PRECONDITION.model},
    summary="Delete one key",
    required=False,
    openapi_extra=_KEY_PATH,
)
def delete_key(request: HttpRequest, ns: str, key: str) -> HttpResponse:
    _no_query(request)
    body = read_json(request, KVBadRequest, "kv_bad_body", empty=None)
    fields = wire.path_body({} if body is None else body, ("expect", "required"))
    raw = {"op": "delete", "ns": ns, "key": key, **fields}
    return json_response(_single(request, raw))


@router.get(
    "/resources/kv/namespaces",
    response={200: wire.NAMESPACES.model, 429: RATE_LIMITED.model},
    summary="KV namespaces with key counts",
)
def list_namespaces(request: HttpRequest) -> HttpResponse:
    ratelimit.admit(request, "read")
    rows = grants.readable(request, "kv", kv.kv_namespaces(), lambda row: row[0])
    return json_response(wire.NAMESPACES.render(None, rows))


@router.with_body(
    "POST",
    "/resources/kv/list",
    wire.LIST,
    {200: wire.PAGE.model},
    summary="One console page of a namespace",
    errors={400: wire.BAD_REQUEST.model, 429: RATE_LIMITED.model},
)
def list_keys(request: HttpRequest) -> HttpResponse:
    body = read_json(request, KVBadRequest, "kv_bad_body")
    if not isinstance(body, dict):
        raise KVBadRequest("the body must be a JSON object", reason="kv_bad_body")
    namespace = wire.namespace_of(body.get("namespace"))
    locks_page = namespace == tokens.LOCKS_NAMESPACE
    if not locks_page:
        grants.require(request, "kv", namespace, scopes.READ)
    ratelimit.admit(request, "read")
    prefix, after, limit, include_expired, keys_only = wire.list_page(body)
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
    listed: Sequence[kv.KVRow] = page.rows
    if locks_page:
        # The permits' namespace lists the locks the token may read (any
        # other namespace was checked whole above), and masks the permits
        # of the locks it may not write.
        listed = grants.readable(request, "lock", page.rows, lambda row: tokens.kv_resource(namespace, row.key)[1])
    sees = grants.sees_permit(request)
    for row in listed:
        hidden = wire.masked(row, sees)
        value = masking.mask_permit_value(row.value) if hidden else row.value
        rows.append(wire.PAGE_ROW.render(row, value, hidden, not keys_only, include_expired, now))
        size += len(row.key.encode()) + len(db.json_text(value).encode())
    return json_response(wire.PAGE.render(page, rows, size))
