"""KV wire schemas, for the OpenAPI document.

The KV routes parse their bodies by hand (protocol.md 2.12 names a reason
for every kind of bad input, which generic validation cannot give), so
these models describe the contract rather than validate it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class KVOpIn(BaseModel):
    op: Literal["get", "getMany", "getPrefix", "put", "putIfAbsent", "delete", "incr", "check"]
    ns: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$")
    key: str | None = Field(None, description="Every op but getMany and getPrefix")
    keys: list[str] | None = Field(None, description="getMany")
    prefix: str | None = Field(None, description="getPrefix")
    after: str | None = Field(None, description="getPrefix: exclusive cursor")
    limit: int | None = Field(None, description="getPrefix: clamped to 1..1000, default 100")
    keysOnly: bool | None = None
    value: Any = Field(None, description="put, putIfAbsent: any JSON value")
    ttlSeconds: int | None = Field(None, gt=0, description="exactly one of ttlSeconds or forever on writes")
    forever: bool | None = None
    expect: int | None = Field(None, ge=0, description="0 = must not exist; N = must be at version N")
    required: bool | None = Field(None, description="abort the whole call if this op does not apply")
    delta: float | None = Field(None, description="incr")
    min: float | None = None
    max: float | None = None


class KVCallIn(BaseModel):
    operations: list[KVOpIn]


class KVRowOut(BaseModel):
    key: str
    value: Any = None
    version: int
    expiresAt: str | None
    updatedAt: str


class KVResultOut(BaseModel):
    index: int
    op: str
    found: bool | None = None
    applied: bool | None = None
    reason: str | None = None
    key: str | None = None
    value: Any = None
    version: int | None = None
    expiresAt: str | None = None
    updatedAt: str | None = None
    rows: list[KVRowOut] | None = None
    missing: list[str] | None = None
    truncated: bool | None = None
    nextAfter: str | None = None


class KVCallOut(BaseModel):
    results: list[KVResultOut]


class KVPreconditionOut(BaseModel):
    ok: Literal[False]
    reason: Literal["kv_precondition"]
    failedIndex: int
    kvReason: str
    version: int
    value: Any


class KVErrorOut(BaseModel):
    error: str
    reason: str
    detail: str


class KVPathPutIn(BaseModel):
    value: Any
    ttlSeconds: int | None = None
    forever: bool | None = None
    expect: int | None = None
    required: bool | None = None


class KVListIn(BaseModel):
    namespace: str
    prefix: str | None = None
    after: str | None = None
    limit: int | None = None
    keysOnly: bool | None = None
    includeExpired: bool | None = False


class KVListRowOut(BaseModel):
    key: str
    value: Any = None
    version: int
    expiresAt: str | None
    updatedAt: str
    expired: bool | None = None


class KVListOut(BaseModel):
    rows: list[KVListRowOut]
    truncated: bool
    nextAfter: str | None
    bytes: int


class KVNamespaceOut(BaseModel):
    namespace: str
    keys: int


class KVNamespacesOut(BaseModel):
    namespaces: list[KVNamespaceOut]
