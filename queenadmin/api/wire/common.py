"""Checks on JSON values that every wire parser shares."""

from __future__ import annotations

from decimal import Decimal
from typing import Any, TypeGuard

#: Body fields that would name a tenant; the tenant is never an input.
TENANT_FIELDS = ("tenant", "tenantId", "_tenant")


def is_json_int(value: Any) -> TypeGuard[int]:
    """A JSON integer: an ``int`` that is not a ``bool``."""
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


def names_tenant(body: dict[str, Any]) -> bool:
    return any(name in body for name in TENANT_FIELDS)
