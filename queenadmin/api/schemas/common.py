"""Pieces every wire schema shares: the answer base, times, numbers, errors.

The routers parse bodies and build answers by hand, so these models are the
published contract rather than the code path; ``tests/api/test_contract.py``
checks every answer the API suite gets against them. Answer models forbid
keys they do not name, so a key added to an answer without its schema fails
that check.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema
from pydantic.json_schema import SkipJsonSchema

#: A key the answer leaves out rather than sending ``null``:
#: ``already: Literal[True] | Omit = None`` is ``{"const": true}``, not required.
Omit = SkipJsonSchema[None]


def _tidy(schema: dict[str, Any]) -> None:
    # An omitted key has no default on the wire: drop pydantic's "default": null.
    for prop in schema.get("properties", {}).values():
        if "default" in prop and prop["default"] is None:
            del prop["default"]


class WireOut(BaseModel):
    """An answer body: exactly these keys, nothing else."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_tidy)


#: KV answers render times like PostgreSQL's ``to_jsonb(timestamptz)``.
JsonbTime = Annotated[
    str,
    Field(
        pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?\+00:00$",
        description="UTC, fraction without trailing zeros: 2026-10-08T10:00:00.123+00:00",
    ),
]
#: Console lists, the message log and timers render six digits and ``Z``.
MicrosZTime = Annotated[
    str,
    Field(
        pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$",
        description="UTC with microseconds: 2026-10-08T10:00:00.123000Z",
    ),
]
#: A JSON number, integer or not. The server does exact decimal arithmetic
#: on it (never binary floating point), so ``0.1 + 0.2`` is ``0.3``.
JSONNumber = Annotated[
    int | float,
    WithJsonSchema({"type": "number", "description": "any JSON number; kept as an exact decimal"}),
]
#: Any JSON value, ``null`` included (a KV value, a message payload).
JSONValue = Annotated[Any, Field(description="any JSON value, null included")]


class AuthErrorOut(WireOut):
    """401: the bearer token is missing, unknown or revoked."""

    error: Literal["unauthorized"]
    code: Literal["unauthorized"]
    detail: str


class ForbiddenOut(WireOut):
    """403: the bearer token's scope does not allow the call (the 401 shape)."""

    error: Literal["forbidden"]
    code: Literal["forbidden"]
    detail: str


class UnavailableOut(WireOut):
    """503: the database connection was lost or refused; nothing was done, retry."""

    error: str
    code: Literal["unavailable"]


class RateLimitedOut(WireOut):
    """429 (with ``Retry-After``): the token's KV call rate is spent."""

    error: Literal["rate_limited"]
    reason: Literal["rate_limited"]
    detail: str


class EngineBadRequestOut(WireOut):
    """400 on the message-log routes: ``error`` is prose, ``code`` the machine code."""

    error: str
    code: Literal["bad_request"]


class NameTooLongOut(WireOut):
    """413: a queue, partition or group name is over the 511-byte key budget."""

    error: str
    code: Literal["name_too_long"]
