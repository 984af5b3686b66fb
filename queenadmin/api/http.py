"""Small helpers shared by the routers: JSON in, JSON out."""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest, HttpResponse

from queenadmin.errors import QueenError


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def read_json(request: HttpRequest, error: type[QueenError], reason: str, *, empty: Any = ...) -> Any:
    """Parse the request body as strict JSON (no NaN or Infinity).

    An empty body gives ``empty`` when one is provided, else the error.
    """
    body = request.body
    if not body.strip():
        if empty is not ...:
            return empty
        raise error("the request body is empty", reason=reason)
    try:
        return json.loads(body, parse_constant=_no_constants)
    except (ValueError, UnicodeDecodeError) as exc:
        raise error("the request body is not valid JSON", reason=reason) from exc


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> HttpResponse:
    response = HttpResponse(
        json.dumps(data, separators=(",", ":"), ensure_ascii=False),
        status=status,
        content_type="application/json",
    )
    for name, value in (headers or {}).items():
        response[name] = value
    return response
