"""KV wire schemas (protocol.md section 2).

The KV routes parse their bodies by hand (protocol.md 2.12 names a reason
for every kind of bad input, which generic validation cannot give), so the
``In`` models document the requests; the ``Out`` models are the exact
answers, checked by ``tests/api/test_contract.py``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, WithJsonSchema

from queenadmin.api.schemas.common import (
    NO_NUL,
    SOME_TEXT,
    JsonbTime,
    JSONNumber,
    JSONValue,
    MicrosZTime,
    Omit,
    WireOut,
    no_tenant,
    nullable,
)
from queenadmin.conf import settings
from queenadmin.domain import kv, names
from queenadmin.domain.kv.ops import INCR_DIGITS

Reason = Literal["exists", "absent", "version", "limit", "type"]
WriteOp = Literal["put", "putIfAbsent", "delete", "incr", "check"]


#: ``kv.NAMESPACE_RE``.
NAMESPACE = r"^[a-z0-9][a-z0-9._-]{0,63}$"
_LIMITS = type(settings)
MAX_TTL_SECONDS = int(kv.MAX_TTL.total_seconds())

Namespace = Annotated[str, Field(pattern=NAMESPACE)]
KVKey = Annotated[
    str,
    Field(
        min_length=1,
        max_length=_LIMITS.KV_MAX_KEY_BYTES,
        pattern=SOME_TEXT,
        description=f"non-empty, no NUL, at most {_LIMITS.KV_MAX_KEY_BYTES} bytes of UTF-8 (413 above)",
    ),
]
#: A key a put or an incr writes: the rule of every stored name too
#: (``domain.names``); reads and deletes take any ``KVKey``.
KVNewKey = Annotated[
    str,
    Field(
        min_length=1,
        max_length=_LIMITS.KV_MAX_KEY_BYTES,
        pattern=names.SCHEMA_PATTERN,
        description=(
            f"no control or bidirectional formatting characters, at most {_LIMITS.KV_MAX_KEY_BYTES} bytes"
            " of UTF-8 (413 above)"
        ),
    ),
]
#: ``expect``: 0 = must not exist; N = must be at version N.
Expect = Annotated[int, Field(ge=0, description="0 = must not exist; N = must be at version N")]
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
TtlSeconds = Annotated[int, Field(ge=1, le=MAX_TTL_SECONDS)]
#: Floats from this magnitude up have their last digit (of 17 at most)
#: within ``INCR_DIGITS`` decimal places.
_SMALLEST_SURE = 10.0 ** (17 - 1 - INCR_DIGITS)
#: A number ``incr`` computes with exactly (``kv.check_incr_number``): below
#: 1e100 in magnitude, at most 100 decimal places. JSON Schema cannot count
#: decimal places, so the document names the numbers that surely keep them:
#: integers, 0, and magnitudes from 1e-84 (a smaller one passes only with
#: few digits: 1e-100 does, 1.5e-100 does not).
IncrNumber = Annotated[
    int | float,
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer", "exclusiveMinimum": -(10**INCR_DIGITS), "exclusiveMaximum": 10**INCR_DIGITS},
                {"type": "number", "minimum": _SMALLEST_SURE, "exclusiveMaximum": 10**INCR_DIGITS},
                {"type": "number", "maximum": -_SMALLEST_SURE, "exclusiveMinimum": -(10**INCR_DIGITS)},
            ],
            "description": f"kept as an exact decimal: magnitude below 1e{INCR_DIGITS}, "
            f"at most {INCR_DIGITS} decimal places",
        }
    ),
]


def _expiry(schema: dict[str, Any]) -> None:
    """Writes that keep a key: exactly one of ``ttlSeconds`` or ``forever: true``."""
    no_tenant(schema)
    schema["anyOf"] = [
        {
            "required": ["ttlSeconds"],
            "properties": {"ttlSeconds": {"type": "integer"}, "forever": {"enum": [False, None]}},
        },
        {"required": ["forever"], "properties": {"forever": {"const": True}, "ttlSeconds": {"type": "null"}}},
    ]


class _KVOp(BaseModel):
    model_config = ConfigDict(json_schema_extra=no_tenant)

    ns: Namespace


class _KVKeyOp(_KVOp):
    key: KVKey


class KVGetIn(_KVKeyOp):
    op: Literal["get"]


class KVGetManyIn(_KVOp):
    op: Literal["getMany"]
    keys: list[KVKey] = Field(min_length=1)


class KVGetPrefixIn(_KVOp):
    """Not inside a transaction."""

    op: Literal["getPrefix"]
    prefix: str = Field(min_length=1, pattern=SOME_TEXT)
    after: str | None = Field(None, pattern=NO_NUL, description="exclusive cursor")
    limit: JSONNumber | None = Field(None, description="clamped to 1..1000, default 100")
    keysOnly: bool | None = None


class _KVWriteOp(_KVKeyOp):
    required: bool | None = Field(None, description="abort the whole call if this op does not apply")


class _KVKeepOp(_KVWriteOp):
    """A write that keeps the key: exactly one of ``ttlSeconds`` or ``forever: true``."""

    model_config = ConfigDict(json_schema_extra=_expiry)

    key: KVNewKey
    ttlSeconds: TtlSeconds | None = Field(None, description="exactly one of ttlSeconds or forever: true")
    forever: bool | None = None


class KVPutIn(_KVKeepOp):
    op: Literal["put"]
    value: JSONValue
    expect: Expect | None = None


class KVPutIfAbsentIn(_KVKeepOp):
    op: Literal["putIfAbsent"]
    value: JSONValue
    expect: Literal[0] | None = None


class KVDeleteIn(_KVWriteOp):
    op: Literal["delete"]
    expect: Expect | None = None


class KVCheckIn(_KVWriteOp):
    op: Literal["check"]
    expect: Expect


class KVIncrIn(_KVKeepOp):
    op: Literal["incr"]
    delta: IncrNumber = Field(description="the server adds exact decimals")
    min: IncrNumber | None = Field(None, description="refuse (reason limit) below this")
    max: IncrNumber | None = Field(None, description="refuse (reason limit) above this")
    expect: None = Field(None, description="incr takes no expect")


_KV_OPS = KVGetIn | KVGetManyIn | KVGetPrefixIn | KVPutIn | KVPutIfAbsentIn | KVDeleteIn | KVCheckIn | KVIncrIn


class KVOpIn(RootModel[Annotated[_KV_OPS, Field(discriminator="op")]]):
    """One operation; ``op`` says which fields it takes."""


class KVTxnOpIn(
    RootModel[
        Annotated[
            KVGetIn | KVGetManyIn | KVPutIn | KVPutIfAbsentIn | KVDeleteIn | KVCheckIn | KVIncrIn,
            Field(discriminator="op"),
        ]
    ]
):
    """One KV operation of a transaction: any but ``getPrefix``."""


class KVCallIn(BaseModel):
    operations: list[KVOpIn] = Field(
        max_length=_LIMITS.KV_MAX_OPS_PER_CALL,
        description=(
            f"at most {_LIMITS.KV_MAX_KEYS_PER_CALL} keys in all (getMany its keys, getPrefix its limit);"
            " no key written or checked twice"
        ),
    )


def _path_fields(schema: dict[str, Any]) -> None:
    """``op``, ``ns`` and ``key`` come from the path: naming one in the body is refused."""
    schema["not"] = {"anyOf": [{"required": [name]} for name in ("op", "ns", "namespace", "key")]}


def _path_expiry(schema: dict[str, Any]) -> None:
    _expiry(schema)
    schema.pop("not")
    _path_fields(schema)


class KVPathPutIn(BaseModel):
    model_config = ConfigDict(json_schema_extra=_path_expiry)

    value: JSONValue
    ttlSeconds: TtlSeconds | None = Field(None, description="exactly one of ttlSeconds or forever: true")
    forever: bool | None = None
    expect: Expect | None = None
    required: bool | None = None


def _optional_path_fields(schema: dict[str, Any]) -> None:
    _path_fields(schema)
    nullable(schema)


class KVPathDeleteIn(BaseModel):
    """Optional: no body or ``null`` means neither."""

    model_config = ConfigDict(json_schema_extra=_optional_path_fields)

    expect: Expect | None = None
    required: bool | None = None


class KVListIn(BaseModel):
    namespace: Namespace
    prefix: str | None = Field(None, pattern=NO_NUL)
    after: str | None = Field(None, pattern=NO_NUL)
    limit: JSONNumber | None = None
    keysOnly: Any = Field(None, description="true lists keys only (anything else: with values)")
    includeExpired: Any = Field(None, description="true includes expired rows (anything else: live rows only)")


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
