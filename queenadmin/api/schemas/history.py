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


class LockEventOut(WireOut):
    """One event of a lock's life, newest first in a page."""

    event: Literal["acquired", "renewed", "released", "expired", "forced", "guard_refused"]
    at: JsonbTime = Field(description="when; for an expiry, when the lease ran out")
    slot: int = Field(description="the permit (0 for a lock; a semaphore's slot)")
    token: str = Field(description="the fencing token's fingerprint, never the token")
    holder: str | None = Field(description="who took the lease: an API token's name or a JWT's sub; null: not named")
    waitedMs: int | Omit = Field(None, description="acquired: how long its owner waited (0: at once)")
    heldMs: int | Omit = Field(None, description="released, forced, expired: since the acquire")
    marginMs: int | Omit = Field(None, description="renewed: what was left of the lease")
    expiresAt: JsonbTime | Omit = Field(None, description="acquired, renewed: when the lease runs out")


class LockHistoryOut(WireOut):
    events: list[LockEventOut]
    nextBefore: int | None = Field(description="pass as ?before= for the next page; null: no more")
