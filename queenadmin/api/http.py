"""Small helpers shared by the routers: JSON in, JSON out."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import orjson
from django.http import HttpRequest, HttpResponse

from queenadmin.errors import QueenError

#: Deepest JSON nesting a request body may have. Answers embed a stored
#: value a few levels down, and json, pydantic and the database drivers
#: recurse once per level against Python's limit of 1,000 frames: a value
#: 945 levels deep was stored, then broke every read that touched it.
MAX_JSON_DEPTH = 128


class _NotFinite(ValueError):
    pass


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        # 1e400 parses as infinity, which no JSON answer can carry.
        raise _NotFinite(text)
    return number


def json_depth_over(value: Any, limit: int) -> bool:
    """Whether ``value`` nests arrays and objects deeper than ``limit``."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


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
    here rather than failing later in the database. Numbers must be finite
    (``1e400`` is refused) and arrays and objects nest at most
    ``MAX_JSON_DEPTH`` deep.
    """
    body = request.body
    if not body.strip():
        if empty is not ...:
            return empty
        raise error("the request body is empty", reason=reason)
    parsed = _fast_loads(body)
    if parsed is _SLOW:
        parsed = _strict_loads(body, error, reason)
    # Counting brackets (in C) bounds the depth; walk the value only when
    # the count alone cannot rule it out.
    if body.count(b"[") + body.count(b"{") > MAX_JSON_DEPTH and json_depth_over(parsed, MAX_JSON_DEPTH):
        raise error(f"the request body nests deeper than {MAX_JSON_DEPTH} levels", reason=reason)
    # Escaped surrogate pairs decode to ordinary characters; only check the
    # rare body that spells a surrogate at all.
    if _SURROGATE_ESCAPE.search(body) and not _is_text(parsed):
        raise error("the request body has a lone UTF-16 surrogate, which is not text", reason=reason)
    return parsed


#: ``_fast_loads``' answer when the body needs ``json`` (see there).
_SLOW: Any = object()

#: Nineteen digits in a row: maybe an integer beyond orjson's -2**63 to
#: 2**64 - 1, which it reads as a float (``2**70`` would lose its last
#: digits, ``-2**63 - 1`` has nineteen).
_LONG_DIGITS = re.compile(rb"[0-9]{19}")


def _fast_loads(body: bytes) -> Any:
    """orjson's reading of ``body``, or ``_SLOW``.

    orjson accepts exactly the JSON that ``_strict_loads`` does (no NaN or
    Infinity, finite numbers, UTF-8 text), at a fraction of the cost, except
    for integers beyond 64 bits, which it turns into floats: a body with a
    run of 19 digits goes to ``json``. Any refusal also does, so the
    answer's wording is ``_strict_loads``' own.
    """
    if _LONG_DIGITS.search(body):
        return _SLOW
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return _SLOW


def _strict_loads(body: bytes, error: type[QueenError], reason: str) -> Any:
    try:
        return json.loads(body, parse_constant=_no_constants, parse_float=_finite_float)
    except _NotFinite as exc:
        raise error("the request body has a number too large to represent", reason=reason) from exc
    except RecursionError as exc:
        raise error(f"the request body nests deeper than {MAX_JSON_DEPTH} levels", reason=reason) from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise error("the request body is not valid JSON", reason=reason) from exc


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


def json_dumps(data: Any) -> bytes:
    """Compact UTF-8 JSON of ``data``: orjson, or ``json`` where orjson refuses.

    orjson refuses integers beyond 64 bits (``incr`` counters may hold
    any integer the store accepts), keys that are not strings and lone
    surrogates; ``json`` writes those exactly as before.
    """
    try:
        return orjson.dumps(data)
    except TypeError:
        return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> HttpResponse:
    response = HttpResponse(json_dumps(data), status=status, content_type="application/json")
    for name, value in (headers or {}).items():
        response[name] = value
    return response
