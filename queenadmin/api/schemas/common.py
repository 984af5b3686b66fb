"""Pieces every wire schema shares: the answer base, times, numbers, names.

Answers are declared once (``wire.answers``: the model the document shows
and the renderer), refusals with their table in ``api/errors.py``;
``tests/api/test_contract.py`` checks every answer the API suite gets
against the document. Answer models forbid keys they do not name, so a key
added to an answer without its schema fails that check.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, WithJsonSchema
from pydantic.json_schema import SkipJsonSchema

from queenadmin.api.wire.fields import NO_NUL, SOME_TEXT
from queenadmin.domain import names

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

# -- requests -----------------------------------------------------------------
# A body parsed by hand is declared once, in its wire module (``wire.fields``):
# the parser reads the declaration and the document shows it. The ``In``
# models left say what their parsers accept, constraint for constraint
# (schemathesis ``--checks all`` holds the two to each other:
# tests/api/test_schemathesis.py).


def json_schema_of(annotation: Any, **override: Any) -> dict[str, Any]:
    """The JSON Schema of ``annotation`` (a parameter's), with ``override`` on top."""
    return {**TypeAdapter(annotation).json_schema(), **override}


def nullable(schema: dict[str, Any]) -> None:
    """``json_schema_extra`` of an optional body: JSON ``null`` reads as ``{}``."""
    schema["type"] = ["object", "null"]


#: The engine's key budget for a queue, partition or group name (protocol 12).
NAME_BYTES = 511

#: A queue, partition or consumer group name. JSON Schema counts
#: characters, not bytes: ``maxLength`` is the byte budget, exact for ASCII.
EngineName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=NAME_BYTES,
        pattern=names.SCHEMA_PATTERN,
        description=(
            f"no control or bidirectional formatting characters, at most {NAME_BYTES} bytes of UTF-8"
            " (413 name_too_long above)"
        ),
    ),
]
#: A path parameter read by the ``path`` converter (``scopes.RestOfPath``:
#: newlines included): no NUL.
PATH_TEXT = SOME_TEXT
#: A text field stored as given: no NUL.
Text = Annotated[str, Field(pattern=NO_NUL)]
