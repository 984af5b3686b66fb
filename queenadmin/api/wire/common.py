"""Checks on JSON values that every wire parser shares."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any, TypeGuard, TypeVar
from urllib.parse import unquote_to_bytes

from django.http import HttpRequest

from queenadmin.errors import QueenError

_E = TypeVar("_E", bound=QueenError)

#: Body fields that would name a tenant; the tenant is never an input.
TENANT_FIELDS = ("tenant", "tenantId", "_tenant")


def json_int(value: Any) -> int | None:
    """The ``int`` a body's integer field holds, or None where it holds none.

    An ``int`` that is not a ``bool`` is itself; a whole float (``2.0``,
    ``1e3``) is its ``int``, as JSON Schema's ``integer`` counts it (2020-12,
    which the published OpenAPI 3.1 document uses; Python clients that
    compute ``30 / 1`` send ``30.0``). A fraction, a bool, a string, NaN or
    infinity hold none: the caller refuses them. Bounds are the caller's, on
    the ``int`` (``1e300`` is a 301-digit one, refused as that integer is).
    """
    if type(value) is int:
        return value
    if type(value) is float:
        return int(value) if value.is_integer() else None
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def is_json_int(value: Any) -> TypeGuard[int]:
    """An ``int`` that is not a ``bool``: an integer field's value once
    ``json_int`` has read it (a whole float is refused by this alone)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_json_number(value: Any) -> bool:
    return isinstance(value, int | float | Decimal) and not isinstance(value, bool)


def to_decimal(value: Any) -> Decimal:
    """An exact decimal for a JSON number (floats by their shortest repr)."""
    if isinstance(value, Decimal):
        return value
    if isinstance(value, float):
        return Decimal(repr(value))
    return Decimal(value)


def reasoned(error: type[_E]) -> Callable[[str, str], _E]:
    """The refusal of a family whose answers carry the reason code (KV, locks, timers)."""
    return lambda reason, detail: error(detail, reason=reason)


def names_tenant(body: dict[str, Any]) -> bool:
    return any(name in body for name in TENANT_FIELDS)


def batch_op(
    index: int, raw: Any, names: frozenset[str], bad: Callable[[str, str], QueenError], family: str, expected: str
) -> tuple[dict[str, Any], str]:
    """The object and ``op`` of one operation of a KV or locks call.

    Refuse, with ``family``'s reasons, what is not an object, one naming a
    tenant, and an ``op`` outside ``names`` (``expected`` lists them).
    """
    if not isinstance(raw, dict):
        raise bad(f"{family}_bad_request", f"operation {index} is not an object")
    if names_tenant(raw):
        raise bad(f"{family}_tenant_not_an_input", "the tenant is never a body field")
    op = raw.get("op")
    if not isinstance(op, str) or op not in names:
        raise bad(f"{family}_unknown_op", f"op must be one of {expected}")
    return raw, op


def split_raw_path(request: HttpRequest, prefix: str) -> tuple[str, str] | None:
    """The path after ``prefix`` cut at its first ``/`` as sent, each side
    percent-decoded; ``None`` when the server kept no raw path, the path
    does not start with ``prefix`` or has no ``/`` after it.

    Django routes on the decoded path, where ``a%2Fb/k`` and ``a/b/k`` are
    the same text; clients encode a name's own ``/`` as ``%2F`` in a path
    segment (the official client's timers do), and only the raw path still
    tells the two apart. The server hands the ASGI scope on to the WSGI
    environ (``asgi.scope``, a2wsgi), whose ``raw_path`` is the path as sent.
    """
    scope = request.META.get("asgi.scope")
    raw = scope.get("raw_path") if isinstance(scope, dict) else None
    if not isinstance(raw, bytes):
        return None
    text = raw.decode("latin-1")
    if not text.startswith(prefix):
        return None
    head, slash, tail = text[len(prefix) :].partition("/")
    if not slash:
        return None
    try:
        return unquote_to_bytes(head).decode(), unquote_to_bytes(tail).decode()
    except UnicodeDecodeError:
        return None
