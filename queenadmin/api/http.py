"""Small helpers shared by the routers: JSON in, JSON out."""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from typing import Any

import msgspec
from django.http import HttpRequest, HttpResponse

from queenadmin.api.bodies import BodyTooLarge, decoded_body
from queenadmin.conf import settings
from queenadmin.errors import InvalidArgument, QueenError

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


#: ``json_text_depth_over``: both kinds of bracket as one, everything else dropped.
_AS_SQUARE = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))


def json_text_depth_over(body: bytes, limit: int) -> bool | None:
    """``json_depth_over`` of valid JSON ``body`` read from its bytes, or
    None when they cannot tell (a string holds an escaped quote).

    Without ``\\"`` every quote opens or closes a string, so the text
    between every other quote is all there is outside strings. Its
    brackets, one kind, lose their innermost pairs at each pass: as many
    passes as the deepest nesting. All in C; the walk of the parsed value
    was 14% of a 1,000-message push's serve CPU (bench/README.md).
    """
    if b'\\"' in body:
        return None
    skeleton = b"".join(body.split(b'"')[::2]).translate(_AS_SQUARE, _NOT_BRACKETS)
    for _pass in range(limit):
        if not skeleton:
            return False
        skeleton = skeleton.replace(b"[]", b"")
    return bool(skeleton)


#: A ``\\uD800``-``\\uDFFF`` escape: JSON can spell a lone surrogate, which is
#: no Unicode text and cannot be stored or sent on as UTF-8.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")


def _is_text(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return False
    return True


#: ``parse_cost``'s bytes per structural token (``,`` ``:`` ``[`` ``{``),
#: each of which starts a value or a key: measured, the densest bodies
#: cost 56-64 bytes per token besides their string text (``[{"a":0},...]``:
#: a one-key dict of 184 bytes and its list slot per three tokens;
#: ``["ab",...]``: a 51-byte string and its slot per token).
_TOKEN_COST = 64

#: Bodies smaller than this are parsed without estimating their cost: even
#: at ``_TOKEN_COST`` per byte they stay far below ``MAX_PARSE_BYTES``.
_ESTIMATE_FROM = 256 * 1024

#: A UTF-8 lead byte of a 4-byte character: the string it sits in takes
#: 4 bytes per character, as does one with an escaped surrogate.
_LEAD_4 = re.compile(rb"[\xf0-\xf4]")


def parse_cost(body: bytes) -> int:
    """An upper estimate of the memory ``body``'s parsed objects take.

    Python objects cost far more than the JSON that spells them: a 15 MiB
    body of ``[{"a":0},...]`` parses into 380 MiB, and an ASCII string
    holding one emoji takes 4 bytes per character. So: each byte of the
    body as string text at its widest (1, 2 or 4 bytes a character, by what
    the body holds) plus ``_TOKEN_COST`` per token that starts a value or a
    key. Measured on 13 shapes of body (``tests/unit/test_json_codec.py``),
    0.94-2.1 times the real cost. Only C loops over the bytes: ~2 ms per MiB.
    """
    if body.isascii():
        width = 1
        if b"\\u" in body:
            width = 4 if _SURROGATE_ESCAPE.search(body) else 2
    else:
        width = 4 if _LEAD_4.search(body) or _SURROGATE_ESCAPE.search(body) else 2
    tokens = body.count(b",") + body.count(b":") + body.count(b"[") + body.count(b"{")
    return width * len(body) + _TOKEN_COST * tokens


def read_json(request: HttpRequest, error: type[QueenError], reason: str, *, empty: Any = ...) -> Any:
    """Parse the request body as strict JSON (no NaN or Infinity).

    An empty body gives ``empty`` when one is provided, else the error.
    Strings must be Unicode text: a lone surrogate (``"\\ud800"``) is refused
    here rather than failing later in the database. Numbers must be finite
    (``1e400`` is refused) and arrays and objects nest at most
    ``MAX_JSON_DEPTH`` deep. A body whose parsed objects could take more
    than ``MAX_PARSE_BYTES`` is refused before it is parsed (``BodyTooLarge``,
    answered 413 like a body over the size limit). A ``Content-Encoding`` of
    zstd is undone first (``bodies.decoded_body``).
    """
    body = decoded_body(request, error, reason)
    if not body.strip():
        if empty is not ...:
            return empty
        raise error("the request body is empty", reason=reason)
    return parse_json_bytes(body, error, reason)


def parse_json_bytes(body: bytes, error: type[QueenError], reason: str) -> Any:
    """Parse ``body`` as ``read_json`` parses a request body (not empty)."""
    if len(body) >= _ESTIMATE_FROM and parse_cost(body) > settings.MAX_PARSE_BYTES:
        raise BodyTooLarge
    parsed = _fast_loads(body)
    if parsed is _SLOW:
        parsed = _strict_loads(body, error, reason)
    # Counting brackets (in C) bounds the depth; walk the value only when
    # the count alone cannot rule it out.
    if body.count(b"[") + body.count(b"{") > MAX_JSON_DEPTH:
        over = json_text_depth_over(body, MAX_JSON_DEPTH)
        if over is None:
            over = json_depth_over(parsed, MAX_JSON_DEPTH)
        if over:
            raise error(f"the request body nests deeper than {MAX_JSON_DEPTH} levels", reason=reason)
    # Escaped surrogate pairs decode to ordinary characters; only check the
    # rare body that spells a surrogate at all.
    if _SURROGATE_ESCAPE.search(body) and not _is_text(parsed):
        raise error("the request body has a lone UTF-16 surrogate, which is not text", reason=reason)
    return parsed


def read_engine_json(request: HttpRequest, *, optional: bool = False) -> Any:
    """Parse a message-log route's body with ``read_json``.

    Refusals are the engine's 400 (``InvalidArgument``, ``bad_request``). An
    empty body is None when ``optional``, else refused too.
    """
    return read_json(request, InvalidArgument, "bad_request", empty=None if optional else ...)


#: ``_fast_loads``' answer when the body needs ``json`` (see there).
_SLOW: Any = object()

_decode = msgspec.json.decode


def _fast_loads(body: bytes) -> Any:
    """msgspec's reading of ``body``, or ``_SLOW``.

    msgspec accepts exactly the JSON that ``_strict_loads`` does (no NaN or
    Infinity, finite numbers, integers of any size, UTF-8 text) at a
    fraction of the cost, and parses the body where it lies: the parsed
    objects are the only copy (orjson and ``json`` first copy or decode the
    whole body, so a 64 MiB string value cost three times its size, not
    two). Any refusal goes to ``json``, so the answer's wording is
    ``_strict_loads``' own.
    """
    try:
        return _decode(body)
    except (msgspec.DecodeError, RecursionError):
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


_encode = msgspec.json.encode

#: A stored JSON text (a message's payload) that ``json_dumps`` writes into
#: an answer as it is, not parsed and written again: ``json.loads`` of each
#: payload and its encoding were half of a pop answer's rendering
#: (bench/README.md, "Where the time goes"). The text must be JSON, as every
#: stored payload is (a push writes it with msgspec or ``db.json_text``);
#: its spelling goes out as stored (``1e-07`` where a push wrote that).
embed_json = msgspec.Raw


def utc_micros_z(moment: datetime) -> datetime | str:
    """``clock.iso_micros_z(moment)`` as ``json_dumps`` writes it: the
    datetime itself where msgspec writes the same text (UTC, a non-zero
    fraction: six digits and ``Z``), in C; else that text."""
    if moment.microsecond and moment.tzinfo is UTC:
        return moment
    return moment.astimezone(UTC).isoformat(timespec="microseconds")[:-6] + "Z"


def _plain(value: Any) -> Any:
    """``json``'s reading of what only msgspec writes (``json_dumps``'s fallback)."""
    if isinstance(value, msgspec.Raw):
        return json.loads(bytes(memoryview(value)))
    if isinstance(value, datetime):
        return _encode(value)[1:-1].decode()
    raise TypeError(f"{type(value).__name__} is not JSON")


def json_dumps(data: Any) -> bytes:
    """Compact UTF-8 JSON of ``data``: msgspec, or ``json`` where it refuses.

    msgspec writes integers of any size and non-string keys as ``json``
    does; it refuses lone surrogates and types it does not know, which
    ``json`` writes (or refuses) exactly as before. ``embed_json`` texts and
    datetimes go through both (``json`` parses the one and takes msgspec's
    text of the other).
    """
    try:
        return _encode(data)
    except (TypeError, ValueError):
        return json.dumps(data, separators=(",", ":"), ensure_ascii=False, default=_plain).encode()


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> HttpResponse:
    response = HttpResponse(json_dumps(data), status=status, content_type="application/json")
    for name, value in (headers or {}).items():
        response[name] = value
    return response
