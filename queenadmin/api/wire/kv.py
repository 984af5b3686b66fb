"""The KV wire language (protocol.md section 2): JSON to commands, results to JSON.

Every refusal answers the protocol's reason code. Validation of a call is
all-or-nothing: one bad op refuses the whole call, before anything runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import Field as Doc
from pydantic import WithJsonSchema

from queenadmin.api.schemas.common import JsonbTime, JSONValue, MicrosZTime
from queenadmin.api.wire.answers import Answer, Key, Many, either, kv_refusal, list_of
from queenadmin.api.wire.common import batch_op, json_int, reasoned, to_decimal
from queenadmin.api.wire.fields import NO_NUL, SOME_TEXT, Call, Field, Op, Ops
from queenadmin.conf import settings
from queenadmin.domain import clock, kv, masking, names
from queenadmin.domain.kv.ops import INCR_DIGITS
from queenadmin.errors import KVBadRequest, KVPayloadTooLarge
from queenadmin.plumbing import db

OP_NAMES = frozenset({"get", "getMany", "getPrefix", "put", "putIfAbsent", "delete", "incr", "check"})
MAX_TTL_SECONDS = int(kv.MAX_TTL.total_seconds())


_bad = reasoned(KVBadRequest)

# --------------------------------------------------------------------------
# The fields of a KV operation (protocol 2.2, 2.12), declared once: the
# parser below reads them and the document shows them (``CALL``).

#: ``kv.NAMESPACE_RE``.
NAMESPACE = r"^[a-z0-9][a-z0-9._-]{0,63}$"
_KEY_BYTES = type(settings).KV_MAX_KEY_BYTES
NS = Field("string", "kv_bad_namespace", "kv_bad_namespace", pattern=NAMESPACE, null_is_bad=True)
KEY = Field(
    "string",
    "kv_bad_request",
    "kv_bad_request",
    min_length=1,
    max_length=_KEY_BYTES,
    pattern=SOME_TEXT,
    null_is_bad=True,
    doc=f"non-empty, no NUL, at most {_KEY_BYTES} bytes of UTF-8 (413 above)",
)
#: A key a put or an incr writes: the rule of every stored name too
#: (``domain.names``); reads and deletes take any ``KEY``.
NEW_KEY = replace(
    KEY,
    pattern=names.SCHEMA_PATTERN,
    doc=f"no control or bidirectional formatting characters, at most {_KEY_BYTES} bytes of UTF-8 (413 above)",
)
Namespace = Annotated[str, Doc(pattern=NAMESPACE)]
KVKey = Annotated[str, WithJsonSchema(KEY.schema())]
KVNewKey = Annotated[str, WithJsonSchema(NEW_KEY.schema())]
Reason = Literal["exists", "absent", "version", "limit", "type"]
WriteOp = Literal["put", "putIfAbsent", "delete", "incr", "check"]
#: A row's version as a read shows it: a lock permit's (its lock's token)
#: is a fingerprint to a caller who may not write that lock.
RowVersion = Annotated[
    int | str,
    Doc(
        description=(
            "the row's version; for a lock permit (ns queen-locks) read by a caller who may not write "
            "its lock, a fingerprint string such as a1b2c3… (the owner in its value is one too)"
        )
    ),
]
TTL = Field("integer", "kv_bad_ttl", ge=1, le=MAX_TTL_SECONDS, doc="exactly one of ttlSeconds or forever: true")
FOREVER = Field("boolean", "kv_bad_request")
EXPECT = Field("integer", "kv_bad_expect", ge=0, doc="0 = must not exist; N = must be at version N")
REQUIRED = Field("boolean", "kv_bad_request", default=False, doc="abort the whole call if this op does not apply")
VALUE = Field("any", "kv_bad_request", "kv_bad_request", null_is_bad=True, doc="any JSON value, null included")
#: Floats from this magnitude up have their last digit (of 17 at most)
#: within ``INCR_DIGITS`` decimal places.
_SMALLEST_SURE = 10.0 ** (17 - 1 - INCR_DIGITS)
#: A number ``incr`` computes with exactly (``kv.check_incr_number``): below
#: 1e100 in magnitude, at most 100 decimal places. JSON Schema cannot count
#: decimal places, so the document names the numbers that surely keep them:
#: integers, 0, and magnitudes from 1e-84 (a smaller one passes only with
#: few digits: 1e-100 does, 1.5e-100 does not).
_INCR_NUMBER = {
    "anyOf": [
        {"type": "integer", "exclusiveMinimum": -(10**INCR_DIGITS), "exclusiveMaximum": 10**INCR_DIGITS},
        {"type": "number", "minimum": _SMALLEST_SURE, "exclusiveMaximum": 10**INCR_DIGITS},
        {"type": "number", "maximum": -_SMALLEST_SURE, "exclusiveMinimum": -(10**INCR_DIGITS)},
    ],
}
_INCR_DOC = f"kept as an exact decimal: magnitude below 1e{INCR_DIGITS}, at most {INCR_DIGITS} decimal places"
DELTA = Field("number", "kv_bad_request", "kv_bad_request", null_is_bad=True, schema_extra=_INCR_NUMBER, doc=_INCR_DOC)
BOUND = Field("number", "kv_bad_request", schema_extra=_INCR_NUMBER, doc="refuse (reason limit) past it; " + _INCR_DOC)
PREFIX = Field("string", "kv_prefix_required", "kv_prefix_required", min_length=1, pattern=SOME_TEXT)
AFTER = Field("string", "kv_bad_request", pattern=NO_NUL, doc="exclusive cursor")
LIMIT = Field("number", "kv_bad_request", doc="clamped to 1..1000, default 100")
FLAG = Field("boolean", "kv_bad_request")
INCR_EXPECT = Field("null", "kv_bad_expect", rule="absent: incr takes no expect")

#: Writes that keep a key: exactly one of ``ttlSeconds`` or ``forever: true``.
_EXPIRY = [
    {"required": ["ttlSeconds"], "properties": {"ttlSeconds": {"type": "integer"}, "forever": {"enum": [False, None]}}},
    {"required": ["forever"], "properties": {"forever": {"const": True}, "ttlSeconds": {"type": "null"}}},
]


def _op(op: str, doc: str = "", extra: dict[str, Any] | None = None, keep: bool = False, **fields: Field) -> Op:
    if keep:
        extra, fields = {"anyOf": _EXPIRY}, {**fields, "required": REQUIRED, "ttlSeconds": TTL, "forever": FOREVER}
    const = Field("string", "kv_unknown_op", "kv_unknown_op", const=op)
    name = f"KV{op[0].upper()}{op[1:]}In"
    return Op(name, {"op": const, "ns": NS, **fields}, doc=doc, extra=extra or {})


_OPS = {
    "get": _op("get", key=KEY),
    "getMany": _op(
        "getMany",
        keys=Field("array", "kv_bad_request", "kv_bad_request", schema_extra={"items": KEY.schema(), "minItems": 1}),
    ),
    "getPrefix": _op("getPrefix", "Not inside a transaction.", prefix=PREFIX, after=AFTER, limit=LIMIT, keysOnly=FLAG),
    "put": _op("put", keep=True, key=NEW_KEY, value=VALUE, expect=EXPECT),
    "putIfAbsent": _op(
        "putIfAbsent",
        keep=True,
        key=NEW_KEY,
        value=VALUE,
        expect=Field("integer", "kv_bad_expect", const=0),
    ),
    "delete": _op("delete", key=KEY, required=REQUIRED, expect=EXPECT),
    "check": _op("check", key=KEY, required=REQUIRED, expect=replace(EXPECT, missing="kv_bad_expect")),
    "incr": _op(
        "incr",
        keep=True,
        key=NEW_KEY,
        delta=DELTA,
        min=BOUND,
        max=BOUND,
        expect=INCR_EXPECT,
    ),
}
_ONE = "One operation; ``op`` says which fields it takes."
CALL = Call(
    "KVCallIn",
    Ops("KVOpIn", _OPS, doc=_ONE),
    type(settings).KV_MAX_OPS_PER_CALL,
    doc=f"at most {type(settings).KV_MAX_KEYS_PER_CALL} keys in all (getMany its keys, getPrefix its limit);"
    " no key written or checked twice",
)
#: A transaction's KV ops: any but ``getPrefix``.
TXN_OPS = Ops(
    "KVTxnOpIn",
    {k: v for k, v in _OPS.items() if k != "getPrefix"},
    doc="One KV operation of a transaction: any but ``getPrefix``.",
)
#: ``op``, ``ns`` and ``key`` come from the path: naming one in the body is refused.
_NOT_IN_PATH = {"not": {"anyOf": [{"required": [name]} for name in ("op", "ns", "namespace", "key")]}}
PATH_PUT = Op(
    "KVPathPutIn",
    {"value": VALUE, "ttlSeconds": TTL, "forever": FOREVER, "expect": EXPECT, "required": REQUIRED},
    extra={"anyOf": _EXPIRY, **_NOT_IN_PATH},
    tenant_free=False,
)
PATH_DELETE = Op(
    "KVPathDeleteIn",
    {"expect": EXPECT, "required": REQUIRED},
    doc="Optional: no body or ``null`` means neither.",
    extra={"type": ["object", "null"], **_NOT_IN_PATH},
    tenant_free=False,
)
_ANY_FLAG = Field("any", "kv_bad_request")
LIST = Op(
    "KVListIn",
    {
        "namespace": NS,
        # false or {} is no missing prefix: a refusal, like any other type.
        "prefix": Field("string", "kv_bad_request", pattern=NO_NUL, refusal="prefix and after must be strings"),
        "after": Field("string", "kv_bad_request", pattern=NO_NUL, refusal="prefix and after must be strings"),
        "limit": Field("number", "kv_bad_request", refusal="limit must be a number"),
        "keysOnly": replace(_ANY_FLAG, doc="true lists keys only (anything else: with values)"),
        "includeExpired": replace(_ANY_FLAG, doc="true includes expired rows (anything else: live rows only)"),
    },
    tenant_free=False,
)


def list_page(body: dict[str, Any]) -> tuple[str, str, float | None, bool, bool]:
    """The console list's ``prefix``, ``after``, ``limit``, ``includeExpired``
    and ``keysOnly`` (its namespace is read first, for the grant check)."""
    prefix = LIST.fields["prefix"].read(body, "prefix", _bad) or ""
    after = LIST.fields["after"].read(body, "after", _bad) or ""
    if "\x00" in prefix or "\x00" in after:
        # Keys never hold NUL (and PostgreSQL cannot compare with one).
        raise _bad("kv_bad_key", "prefix and after must not contain NUL")
    limit = LIST.fields["limit"].read(body, "limit", _bad)
    return prefix, after, limit, body.get("includeExpired") is True, body.get("keysOnly") is True


def namespace_of(raw: Any) -> str:
    if not isinstance(raw, str):
        raise _bad("kv_bad_namespace", "ns must match ^[a-z0-9][a-z0-9._-]{0,63}$")
    return kv.check_namespace(raw)


def key_of(raw: Any, what: str = "key", *, limits: kv.Limits | None = None) -> str:
    if not isinstance(raw, str):
        raise _bad("kv_bad_request", f"{what} must be a string")
    return kv.check_key(raw, what, limits=limits)


# Hand-parsed on the hot path (a put), with the reasons and bounds that
# TTL, FOREVER and EXPECT declare.
def _expiry(raw: dict[str, Any]) -> timedelta | None:
    ttl = raw.get("ttlSeconds")
    forever = raw.get("forever")
    if forever is not None and not isinstance(forever, bool):
        raise _bad(FOREVER.reason, "forever must be a boolean")
    if (ttl is None) == (forever is not True):
        raise _bad("kv_expiry_not_specified", "give exactly one of ttlSeconds or forever: true")
    if forever:
        return None
    seconds = json_int(ttl)
    if seconds is None or seconds <= 0 or seconds > MAX_TTL_SECONDS:
        raise _bad(TTL.reason, f"ttlSeconds must be an integer from 1 to {MAX_TTL_SECONDS}")
    return timedelta(seconds=seconds)


def _expect(raw: dict[str, Any], *, mandatory: bool = False) -> int | None:
    if "expect" not in raw or raw["expect"] is None:
        if mandatory:
            raise _bad(EXPECT.reason, "expect is required")
        return None
    expect = json_int(raw["expect"])
    if expect is None or expect < 0:
        raise _bad(EXPECT.reason, "expect must be an integer >= 0")
    return expect


def _required(raw: dict[str, Any]) -> bool:
    return bool(REQUIRED.read(raw, "required", _bad))


def _bound(raw: dict[str, Any], name: str) -> Any:
    value = BOUND.read(raw, name, _bad)
    return None if value is None else kv.check_incr_number(to_decimal(value), name)


def _page_limit(raw: dict[str, Any]) -> int:
    limit = LIMIT.read(raw, "limit", _bad)
    if limit is None:
        return kv.DEFAULT_PAGE_LIMIT
    # Clamped, never refused (protocol 2.10).
    return int(max(1, min(kv.MAX_PAGE_LIMIT, int(limit))))


def _get_prefix(raw: dict[str, Any], ns: str, *, in_transaction: bool) -> kv.KVGetPrefix:
    if in_transaction:
        raise _bad("kv_get_prefix_not_allowed_in_transaction", "getPrefix is not allowed inside a transaction")
    prefix = PREFIX.read(raw, "prefix", _bad)
    if "\x00" in prefix:
        raise _bad("kv_bad_key", "prefix must not contain NUL")
    after = AFTER.read(raw, "after", _bad)
    if after is not None and "\x00" in after:
        raise _bad("kv_bad_key", "after must not contain NUL")
    keys_only = FLAG.read(raw, "keysOnly", _bad)
    return kv.KVGetPrefix(ns, prefix, after or "", _page_limit(raw), bool(keys_only))


def _put(raw: dict[str, Any], op: str, ns: str, key: str, required: bool, limits: kv.Limits) -> kv.KVPut:
    if "value" not in raw:
        raise _bad("kv_bad_request", f"{op} needs a value")
    value = raw["value"]
    if isinstance(value, str) and len(value) + 2 > limits.value_bytes:
        # Its JSON text has at least that many bytes: refuse before making
        # a copy of a 64 MiB string to measure it.
        raise KVPayloadTooLarge(f"value is over {limits.value_bytes} bytes", reason="kv_value_too_large")
    try:
        value_json = db.json_text(value)
    except (TypeError, ValueError) as exc:
        raise _bad("kv_bad_request", "value is not valid JSON") from exc
    kv.check_value_json(value_json, limits=limits)
    expect = _expect(raw)
    if op == "putIfAbsent":
        if expect not in (None, 0):
            raise _bad("kv_bad_expect", "putIfAbsent takes no expect other than 0")
        expect = 0
    return kv.KVPut(ns, key, value_json, _expiry(raw), expect, required, op == "putIfAbsent")


def _incr(raw: dict[str, Any], ns: str, key: str, required: bool) -> kv.KVIncr:
    INCR_EXPECT.read(raw, "expect", _bad)
    delta = kv.check_incr_number(to_decimal(DELTA.read(raw, "delta", _bad)), "delta")
    ttl = _expiry(raw)
    return kv.KVIncr(ns, key, delta, ttl, _bound(raw, "min"), _bound(raw, "max"), required)


def parse_op(index: int, raw: Any, *, in_transaction: bool = False, limits: kv.Limits | None = None) -> kv.KVOp:
    """One wire operation as a command; raise ``KVBadRequest`` with its reason."""
    limits = limits or kv.Limits.current()
    raw, op = batch_op(index, raw, OP_NAMES, _bad, "kv", ", ".join(sorted(OP_NAMES)))
    ns = namespace_of(raw.get("ns"))
    if op == "getPrefix":
        return _get_prefix(raw, ns, in_transaction=in_transaction)
    if op == "getMany":
        keys = raw.get("keys")
        if not isinstance(keys, list) or not keys:
            raise _bad("kv_bad_request", "getMany needs a non-empty keys array")
        return kv.KVGetMany(ns, tuple(dict.fromkeys(key_of(k, "keys[]", limits=limits) for k in keys)))
    key = key_of(raw.get("key"), limits=limits)
    if op == "get":
        return kv.KVGet(ns, key)
    required = _required(raw)
    if op == "put" or op == "putIfAbsent":
        return _put(raw, op, ns, key, required, limits)
    if op == "delete":
        return kv.KVDelete(ns, key, _expect(raw), required)
    if op == "check":
        expect = _expect(raw, mandatory=True)
        assert expect is not None
        return kv.KVCheck(ns, key, expect, required)
    return _incr(raw, ns, key, required)


def _key_count(op: kv.KVOp) -> int:
    if isinstance(op, kv.KVGetPrefix):
        return op.limit
    if isinstance(op, kv.KVGetMany):
        return len(op.keys)
    return 1


def parse_ops(raw_ops: Any, *, in_transaction: bool = False) -> list[kv.KVOp]:
    """A whole call as commands: every op, the op and key budgets, duplicates.

    Validation is all-or-nothing: one bad op refuses the whole call.
    """
    if not isinstance(raw_ops, list):
        raise _bad("kv_bad_body", "body must be an array or {operations: [...]}")
    max_ops = kv.TXN_MAX_OPS if in_transaction else settings.KV_MAX_OPS_PER_CALL
    if len(raw_ops) > max_ops:
        raise _bad("kv_too_many_ops", f"at most {max_ops} operations per call")
    limits = kv.Limits.current()
    ops = [parse_op(i, raw, in_transaction=in_transaction, limits=limits) for i, raw in enumerate(raw_ops)]
    max_keys = kv.TXN_MAX_KEYS if in_transaction else settings.KV_MAX_KEYS_PER_CALL
    if sum(_key_count(op) for op in ops) > max_keys:
        raise _bad("kv_too_many_keys", f"at most {max_keys} keys per call")
    seen: set[tuple[str, str]] = set()
    for op in ops:
        if isinstance(op, kv.WRITES):
            ident = (op.namespace, op.key)
            if ident in seen:
                raise _bad(
                    "kv_duplicate_key_in_call", f"{op.namespace}/{op.key} is written or checked twice in one call"
                )
            seen.add(ident)
    return ops


def path_body(body: Any, allowed: tuple[str, ...]) -> dict[str, Any]:
    """The fields of a path route's body (``PUT``/``DELETE /kv/{ns}/{key}``)."""
    if not isinstance(body, dict):
        raise _bad("kv_bad_body", "the body must be a JSON object")
    if any(name in body for name in ("op", "ns", "namespace", "key")):
        raise _bad("kv_field_in_path", "op, ns and key come from the path")
    return {k: body[k] for k in allowed if k in body}


# --------------------------------------------------------------------------
# Results to JSON (protocol 2.3)


#: Whether the caller may hold the lock of a permit row, by the row's key
#: (``grants.may`` of the lock at write): a caller who may not sees the
#: permit's owner and token as fingerprints (``masked``).
SeesPermit = Callable[[str], bool]


def sees_all(key: str) -> bool:
    return True


def masked(row: kv.KVRow, sees_permit: SeesPermit) -> bool:
    """Whether ``row`` is a lock permit whose owner and token the caller may not see."""
    return row.namespace == kv.LOCKS_NAMESPACE and not sees_permit(row.key)


_TIME = Key(JsonbTime, via=clock.iso_jsonb)
ROW = Answer(
    "KVRowOut",
    args=("masked",),
    key=str,
    value=Key(JSONValue, mask=masking.mask_permit_value),
    version=Key(RowVersion, mask=masking.mask_token),
    expiresAt=Key(JsonbTime | None, "null: forever", via=clock.iso_jsonb),
    updatedAt=_TIME,
)
KEY_ROW = Answer(
    "KVKeyRowOut",
    doc="A getPrefix row with ``keysOnly: true``: no value.",
    args=("masked",),
    key=str,
    version=Key(RowVersion, mask=masking.mask_token),
    expiresAt=Key(JsonbTime | None, via=clock.iso_jsonb),
    updatedAt=_TIME,
)


def _rows(rows: tuple[kv.KVRow, ...], sees_permit: SeesPermit, with_value: bool = True) -> list[dict[str, Any]]:
    render = (ROW if with_value else KEY_ROW).render
    return [render(row, masked(row, sees_permit)) for row in rows]


def _result(name: str, op: Any, doc: str = "", args: tuple[str, ...] = (), **keys: Any) -> Answer:
    return Answer(name, doc=doc, args=("index", *args), index=int, op=op, **keys)


_FOUND_KEYS: dict[str, Any] = {
    "key": Key(str, src="row.key"),
    "value": Key(JSONValue, src="row.value", mask=masking.mask_permit_value),
    "version": Key(RowVersion, src="row.version", mask=masking.mask_token),
    "expiresAt": Key(JsonbTime | None, src="row.expires_at", via=clock.iso_jsonb),
    "updatedAt": Key(JsonbTime, src="row.updated_at", via=clock.iso_jsonb),
}
GET_FOUND = _result("KVGetFoundOut", Literal["get"], args=("masked",), found=Literal[True], **_FOUND_KEYS)
GET_MISS = _result(
    "KVGetMissOut", Literal["get"], "No live row (an expired row is a miss).", found=Literal[False], key=str
)
_LIVE_ROWS = Key(list_of(ROW), "live rows, in key byte order", via=_rows, with_args=("sees_permit",))
GET_MANY = _result(
    "KVGetManyOut",
    Literal["getMany"],
    args=("sees_permit",),
    rows=_LIVE_ROWS,
    missing=Key(list[str], via=list),
    truncated=bool,
)
GET_PREFIX = _result(
    "KVGetPrefixOut",
    Literal["getPrefix"],
    args=("sees_permit", "with_value"),
    rows=Key(list_of(ROW) | list_of(KEY_ROW), via=_rows, with_args=("sees_permit", "with_value")),
    truncated=bool,
    nextAfter=Key(str | None, "the last key when truncated, else null"),
)
WRITE_APPLIED = _result(
    "KVWriteAppliedOut",
    Literal["put", "putIfAbsent", "delete", "incr"],
    "An applied put, putIfAbsent, delete or incr.",
    applied=Literal[True],
    key=str,
    value=Key(JSONValue, "written value; the removed one on delete; incr: the new number"),
    version=int,
)
CHECK_HELD = _result(
    "KVCheckHeldOut",
    Literal["check"],
    "A check that holds: no ``value`` key, ``version`` is the ``expect``.",
    applied=Literal[True],
    key=str,
    version=int,
)
WRITE_REFUSED = _result(
    "KVWriteRefusedOut",
    WriteOp,
    "A write or check that did not apply: what a reader would see now.",
    applied=Literal[False],
    reason=Reason,
    key=str,
    value=Key(JSONValue, "the current live value, null if none"),
    version=Key(int, "the current live version, 0 if none"),
)
GET_OUT = either(GET_FOUND, GET_MISS)
WRITE_OUT = either(WRITE_APPLIED, WRITE_REFUSED)
_RESULTS = list_of(GET_FOUND, GET_MISS, GET_MANY, GET_PREFIX, WRITE_APPLIED, CHECK_HELD, WRITE_REFUSED)
CALL_OUT = Answer("KVCallOut", results=Key(_RESULTS, "one per operation, in request order"))
PRECONDITION = Answer(
    "KVPreconditionOut",
    doc="A ``required`` op did not apply: nothing in the call was written.",
    ok=Literal[False],
    reason=Literal["kv_precondition"],
    failedIndex=int,
    kvReason=Reason,
    version=int,
    value=JSONValue,
)
BAD_REQUEST = kv_refusal(
    "KVBadRequestOut",
    "400: ``error`` is the machine code, ``reason`` the finer one (protocol 2.12).",
    error=Literal["kv_bad_request"],
)
CONFLICT = kv_refusal(
    "KVConflictOut",
    """409: a valid call the stored value refuses: an ``incr`` whose result, or
    the stored number it adds to, is beyond what it computes exactly (magnitude
    below 1e100, at most 100 decimal places, a fraction of at most 17
    significant digits). Nothing in the call was written.""",
    error=Literal["kv_bad_request"],
    reason=Literal["kv_bad_request"],
)
TOO_LARGE = kv_refusal(
    "KVTooLargeOut",
    "413: a key or value over the KV size limits.",
    error=Literal["payload_too_large"],
    reason=Literal["kv_key_too_large", "kv_value_too_large"],
)
#: A console row: ``value`` is the route's (masked where ``masked``).
PAGE_ROW = Answer(
    "KVListRowOut",
    args=("value", "masked", "with_value", "include_expired", "now"),
    key=str,
    value=Key(JSONValue, "absent with keysOnly", omit=True, when="with_value"),
    version=Key(RowVersion, mask=masking.mask_token),
    expiresAt=Key(MicrosZTime | None, via=clock.iso_micros_z),
    updatedAt=Key(MicrosZTime, via=clock.iso_micros_z),
    expired=Key(
        bool,
        "present with includeExpired",
        src="expires_at",
        via=lambda at, now: at is not None and at <= now,
        with_args=("now",),
        omit=True,
        when="include_expired",
    ),
)
#: A console page: ``rows`` (``PAGE_ROW``) and ``bytes`` are the route's.
PAGE = Answer(
    "KVListOut", args=("rows", "bytes"), rows=list_of(PAGE_ROW), truncated=bool, nextAfter=str | None, bytes=int
)
NAMESPACE_ROW = Answer(
    "KVNamespaceOut",
    namespace=Key(str, src="0"),
    keys=Key(int, "rows, expired but not yet reaped ones included", src="1"),
)
NAMESPACES = Answer("KVNamespacesOut", args=("namespaces",), namespaces=Many(NAMESPACE_ROW))


def result_out(index: int, result: kv.KVResult, *, sees_permit: SeesPermit = sees_all) -> dict[str, Any]:
    """One result element exactly as protocol.md 2.3 shows it.

    A lock permit the caller may not hold (``sees_permit`` of its key is
    false) shows its owner and version as fingerprints.
    """
    if isinstance(result, kv.WriteResult):
        if not result.applied:
            return WRITE_REFUSED.render(result, index)
        # A held check has no value key (protocol 2.3).
        return (CHECK_HELD if result.op == "check" else WRITE_APPLIED).render(result, index)
    if isinstance(result, kv.GetResult):
        if result.row is None:
            return GET_MISS.render(result, index)
        return GET_FOUND.render(result, index, masked(result.row, sees_permit))
    if isinstance(result, kv.GetManyResult):
        return GET_MANY.render(result, index, sees_permit)
    return GET_PREFIX.render(result, index, sees_permit, not result.keys_only)


def results_out(results: list[kv.KVResult], *, sees_permit: SeesPermit = sees_all) -> dict[str, Any]:
    return {"results": [result_out(i, r, sees_permit=sees_permit) for i, r in enumerate(results)]}
