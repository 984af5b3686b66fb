"""Small helpers shared by the routers: JSON in, JSON out."""

from __future__ import annotations

import json
import re
from typing import Any

from django.http import HttpRequest, HttpResponse

from queenadmin.errors import QueenError


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


#: A ``\\uD800``-``\\uDFFF`` escape: JSON can spell a lone surrogate, which is
#: no Unicode text and cannot be stored or sent on as UTF-8.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")


def _is_text(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return False
    return True


def read_json(request: HttpRequest, error: type[QueenError], reason: str, *, empty: Any = ...) -> Any:
    """Parse the request body as strict JSON (no NaN or Infinity).

    An empty body gives ``empty`` when one is provided, else the error.
    Strings must be Unicode text: a lone surrogate (``"\\ud800"``) is refused
    here rather than failing later in the database.
    """
    body = request.body
    if not body.strip():
        if empty is not ...:
            return empty
        raise error("the request body is empty", reason=reason)
    try:
        parsed = json.loads(body, parse_constant=_no_constants)
    except (ValueError, UnicodeDecodeError) as exc:
        raise error("the request body is not valid JSON", reason=reason) from exc
    # Escaped surrogate pairs decode to ordinary characters; only check the
    # rare body that spells a surrogate at all.
    if _SURROGATE_ESCAPE.search(body) and not _is_text(parsed):
        raise error("the request body has a lone UTF-16 surrogate, which is not text", reason=reason)
    return parsed


def operations_of(body: Any, error: type[QueenError], reason: str) -> Any:
    """The op list of a batch body: ``{"operations": [...]}`` or a bare array.

    The list itself is checked by the caller's parser; only a JSON object
    without ``operations`` is refused here.
    """
    if isinstance(body, dict):
        if "operations" not in body:
            raise error("body must be an array or {operations: [...]}", reason=reason)
        return body["operations"]
    return body


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> HttpResponse:
    response = HttpResponse(
        json.dumps(data, separators=(",", ":"), ensure_ascii=False),
        status=status,
        content_type="application/json",
    )
    for name, value in (headers or {}).items():
        response[name] = value
    return response
