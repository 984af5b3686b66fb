"""KV wire schemas (protocol.md section 2).

The KV routes parse their bodies by hand (protocol.md 2.12 names a reason
for every kind of bad input, which generic validation cannot give), so the
``In`` models document the requests; the ``Out`` models are the exact
answers, checked by ``tests/api/test_contract.py``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from queenadmin.api.schemas.common import JsonbTime, JSONNumber, JSONValue, MicrosZTime, Omit, WireOut

Reason = Literal["exists", "absent", "version", "limit", "type"]
WriteOp = Literal["put", "putIfAbsent", "delete", "incr", "check"]


class KVOpIn(BaseModel):
    op: Literal["get", "getMany", "getPrefix", "put", "putIfAbsent", "delete", "incr", "check"]
    ns: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$")
    key: str | None = Field(None, description="Every op but getMany and getPrefix")
    keys: list[str] | None = Field(None, description="getMany")
    prefix: str | None = Field(None, description="getPrefix")
    after: str | None = Field(None, description="getPrefix: exclusive cursor")
    limit: int | None = Field(None, description="getPrefix: clamped to 1..1000, default 100")
    keysOnly: bool | None = None
    value: JSONValue = Field(None, description="put, putIfAbsent: any JSON value")
    ttlSeconds: int | None = Field(None, gt=0, description="exactly one of ttlSeconds or forever on writes")
    forever: bool | None = None
    expect: int | None = Field(None, ge=0, description="0 = must not exist; N = must be at version N")
    required: bool | None = Field(None, description="abort the whole call if this op does not apply")
    delta: JSONNumber | None = Field(None, description="incr: required; the server adds exact decimals")
    min: JSONNumber | None = Field(None, description="incr: refuse (reason limit) below this")
    max: JSONNumber | None = Field(None, description="incr: refuse (reason limit) above this")


class KVCallIn(BaseModel):
    operations: list[KVOpIn]


class KVPathPutIn(BaseModel):
    value: JSONValue
    ttlSeconds: int | None = None
    forever: bool | None = None
    expect: int | None = None
    required: bool | None = None


class KVPathDeleteIn(BaseModel):
    """Optional: an empty body or ``null`` means neither."""

    expect: int | None = None
    required: bool | None = None


class KVListIn(BaseModel):
    namespace: str
    prefix: str | None = None
    after: str | None = None
    limit: int | None = None
    keysOnly: bool | None = None
    includeExpired: bool | None = False


# -- answers ------------------------------------------------------------------


class KVRowOut(WireOut):
    key: str
    value: JSONValue
    version: int
    expiresAt: JsonbTime | None = Field(description="null: forever")
    updatedAt: JsonbTime


class KVKeyRowOut(WireOut):
    """A getPrefix row with ``keysOnly: true``: no value."""

    key: str
    version: int
    expiresAt: JsonbTime | None
    updatedAt: JsonbTime


class KVGetFoundOut(WireOut):
    index: int
    op: Literal["get"]
    found: Literal[True]
    key: str
    value: JSONValue
    version: int
    expiresAt: JsonbTime | None
    updatedAt: JsonbTime


class KVGetMissOut(WireOut):
    """No live row (an expired row is a miss)."""

    index: int
    op: Literal["get"]
    found: Literal[False]
    key: str


class KVGetManyOut(WireOut):
    index: int
    op: Literal["getMany"]
    rows: list[KVRowOut] = Field(description="live rows, in key byte order")
    missing: list[str]
    truncated: bool


class KVGetPrefixOut(WireOut):
    index: int
    op: Literal["getPrefix"]
    rows: list[KVRowOut] | list[KVKeyRowOut]
    truncated: bool
    nextAfter: str | None = Field(description="the last key when truncated, else null")


class KVWriteAppliedOut(WireOut):
    """An applied put, putIfAbsent, delete or incr."""

    index: int
    op: Literal["put", "putIfAbsent", "delete", "incr"]
    applied: Literal[True]
    key: str
    value: JSONValue = Field(description="written value; the removed one on delete; incr: the new number")
    version: int


class KVCheckHeldOut(WireOut):
    """A check that holds: no ``value`` key, ``version`` is the ``expect``."""

    index: int
    op: Literal["check"]
    applied: Literal[True]
    key: str
    version: int


class KVWriteRefusedOut(WireOut):
    """A write or check that did not apply: what a reader would see now."""

    index: int
    op: WriteOp
    applied: Literal[False]
    reason: Reason
    key: str
    value: JSONValue = Field(description="the current live value, null if none")
    version: int = Field(description="the current live version, 0 if none")


KVResultOut = (
    KVGetFoundOut
    | KVGetMissOut
    | KVGetManyOut
    | KVGetPrefixOut
    | KVWriteAppliedOut
    | KVCheckHeldOut
    | KVWriteRefusedOut
)
KVGetOut = KVGetFoundOut | KVGetMissOut
KVWriteOut = KVWriteAppliedOut | KVWriteRefusedOut


class KVCallOut(WireOut):
    results: list[KVResultOut] = Field(description="one per operation, in request order")


class KVPreconditionOut(WireOut):
    """A ``required`` op did not apply: nothing in the call was written."""

    ok: Literal[False]
    reason: Literal["kv_precondition"]
    failedIndex: int
    kvReason: Reason
    version: int
    value: JSONValue


class KVBadRequestOut(WireOut):
    """400: ``error`` is the machine code, ``reason`` the finer one (protocol 2.12)."""

    error: Literal["kv_bad_request"]
    reason: str
    detail: str


class KVTooLargeOut(WireOut):
    """413: a key or value over the KV size limits."""

    error: Literal["payload_too_large"]
    reason: Literal["kv_key_too_large", "kv_value_too_large"]
    detail: str


class KVListRowOut(WireOut):
    key: str
    value: JSONValue | Omit = Field(None, description="absent with keysOnly")
    version: int
    expiresAt: MicrosZTime | None
    updatedAt: MicrosZTime
    expired: bool | Omit = Field(None, description="present with includeExpired")


class KVListOut(WireOut):
    rows: list[KVListRowOut]
    truncated: bool
    nextAfter: str | None
    bytes: int


class KVNamespaceOut(WireOut):
    namespace: str
    keys: int = Field(description="rows, expired but not yet reaped ones included")


class KVNamespacesOut(WireOut):
    namespaces: list[KVNamespaceOut]
