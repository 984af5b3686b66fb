"""KV wire schemas (protocol.md section 2).

The requests are declared once, in ``api/wire/kv.py`` (its parser reads
the declarations, protocol.md 2.12's reason for each refusal with them,
and the document shows them); the ``Out`` models are the exact answers,
checked by ``tests/api/test_contract.py``.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, WithJsonSchema

from queenadmin.api.schemas.common import (
    JsonbTime,
    JSONValue,
    MicrosZTime,
    Omit,
    WireOut,
)
from queenadmin.api.wire import kv as kv_wire

Reason = Literal["exists", "absent", "version", "limit", "type"]
WriteOp = Literal["put", "putIfAbsent", "delete", "incr", "check"]


#: ``kv.NAMESPACE_RE``.
NAMESPACE = kv_wire.NAMESPACE
Namespace = Annotated[str, Field(pattern=NAMESPACE)]
KVKey = Annotated[str, WithJsonSchema(kv_wire.KEY.schema())]
KVNewKey = Annotated[str, WithJsonSchema(kv_wire.NEW_KEY.schema())]
#: A row's version as a read shows it: a lock permit's (its lock's token)
#: is a fingerprint to a caller who may not write that lock.
RowVersion = Annotated[
    int | str,
    Field(
        description=(
            "the row's version; for a lock permit (ns queen-locks) read by a caller who may not write "
            "its lock, a fingerprint string such as a1b2c3… (the owner in its value is one too)"
        )
    ),
]


# -- answers ------------------------------------------------------------------


class KVRowOut(WireOut):
    key: str
    value: JSONValue
    version: RowVersion
    expiresAt: JsonbTime | None = Field(description="null: forever")
    updatedAt: JsonbTime


class KVKeyRowOut(WireOut):
    """A getPrefix row with ``keysOnly: true``: no value."""

    key: str
    version: RowVersion
    expiresAt: JsonbTime | None
    updatedAt: JsonbTime


class KVGetFoundOut(WireOut):
    index: int
    op: Literal["get"]
    found: Literal[True]
    key: str
    value: JSONValue
    version: RowVersion
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


class KVConflictOut(WireOut):
    """409: a valid call the stored value refuses: an ``incr`` whose result, or
    the stored number it adds to, is beyond what it computes exactly (magnitude
    below 1e100, at most 100 decimal places, a fraction of at most 17
    significant digits). Nothing in the call was written."""

    error: Literal["kv_bad_request"]
    reason: Literal["kv_bad_request"]
    detail: str


class KVTooLargeOut(WireOut):
    """413: a key or value over the KV size limits."""

    error: Literal["payload_too_large"]
    reason: Literal["kv_key_too_large", "kv_value_too_large"]
    detail: str


class KVListRowOut(WireOut):
    key: str
    value: JSONValue | Omit = Field(None, description="absent with keysOnly")
    version: RowVersion
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
