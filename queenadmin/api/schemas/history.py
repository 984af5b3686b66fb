"""History wire schemas (issue 41): a key's versions."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from queenadmin.api.schemas.common import JsonbTime, JSONValue, Omit, WireOut


class KVVersionOut(WireOut):
    """One version of a key, newest first in a page."""

    version: int = Field(description="the version this write made; a delete has one of its own")
    op: Literal["put", "incr", "delete"]
    value: JSONValue = Field(
        description="the value written; null for a delete, and for a value kept only as its digest"
    )
    at: JsonbTime
    by: str | None = Field(description="a token's name or a JWT's sub, the operator; null: unknown")
    digest: str | Omit = Field(
        None, description="sha256 (hex) of the value's JSON text, when it was over QUEENADMIN_KV_HISTORY_VALUE_BYTES"
    )
    size: int | Omit = Field(None, description="the value's JSON text in bytes, beside a digest")


class KVHistoryOut(WireOut):
    versions: list[KVVersionOut]
    nextBefore: int | None = Field(description="pass as ?before= for the next page; null: no more")
