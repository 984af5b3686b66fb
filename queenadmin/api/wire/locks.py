"""The locks wire language (protocol.md section 3): JSON to ``LockOp``, results to JSON."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Literal

from queenadmin.api.schemas.common import JsonbTime
from queenadmin.api.wire.answers import Answer, Key, Many, kv_refusal, list_of, one
from queenadmin.api.wire.common import batch_op, reasoned
from queenadmin.api.wire.fields import Call, Field, Op, Ops
from queenadmin.domain import clock, kv, locks, masking, names
from queenadmin.errors import LocksBadRequest

VERBS: frozenset[str] = frozenset({"acquire", "renew", "release", "get"})
MAX_TTL_SECONDS = int(kv.MAX_TTL.total_seconds())


_bad = reasoned(LocksBadRequest)

_TTL_DOC = f"an integer from 1 to {MAX_TTL_SECONDS}"
_NAME_DOC = f"a non-empty string of at most {locks.MAX_NAME_BYTES} bytes, without control characters or '#'"
_OWNER_DOC = f"a non-empty string of at most {locks.MAX_OWNER_BYTES} bytes, without control characters"

#: Every field a lock operation may carry (protocol 3.2, 3.4), once: the
#: parser below reads them, and the document shows them (``CALL``).
NAME = Field(
    "string",
    "locks_bad_name",
    "locks_bad_name",
    min_length=1,
    max_length=locks.MAX_NAME_BYTES,
    # The rule of every stored name (``domain.names``), and no "#".
    pattern=names.SCHEMA_PATTERN.replace("]+$", "#]+$"),
    rule=_NAME_DOC,
    null_is_bad=True,
    check=locks.check_name,
)
#: A null ttlSeconds is a bad value, not a missing one (protocol 3.4).
TTL = Field("integer", "locks_bad_ttl", "locks_ttl_required", ge=1, le=MAX_TTL_SECONDS, null_is_bad=True, rule=_TTL_DOC)
#: null counts as absent (as on the KV routes); anything else is refused.
FOREVER = Field("null", "locks_ttl_required", rule="absent: a lock has no forever (give ttlSeconds, and renew)")
OWNER = Field(
    "string",
    "locks_bad_owner",
    min_length=1,
    max_length=locks.MAX_OWNER_BYTES,
    pattern=r"^[^\x00-\x1f\x7f-\x9f]+$",
    rule=_OWNER_DOC,
    check=locks.check_owner,
)
TOKEN = Field("integer", "locks_bad_token", "locks_token_required", ge=1, null_is_bad=True, rule="an integer above 0")
SLOT = Field("integer", "locks_bad_slot", default=0, ge=0, le=locks.MAX_SLOT)
LIMIT = Field("integer", "locks_bad_limit", default=1, ge=1, le=locks.MAX_LIMIT)


def _op(op: str, **fields: Field) -> Op:
    const = Field("string", "locks_unknown_op", "locks_unknown_op", const=op)
    return Op(f"Lock{op.capitalize()}In", {"name": NAME, "op": const, **fields})


OPS = Ops(
    "LockOpIn",
    {
        "get": _op("get"),
        "acquire": _op("acquire", ttlSeconds=TTL, owner=OWNER, limit=LIMIT, forever=FOREVER),
        "renew": _op("renew", ttlSeconds=TTL, owner=OWNER, token=TOKEN, slot=SLOT, forever=FOREVER),
        "release": _op("release", token=TOKEN, slot=SLOT),
    },
    doc="One operation; ``op`` says which fields it takes.",
)
CALL = Call(
    "LocksCallIn",
    OPS,
    locks.MAX_OPS,
    doc=f"at most {locks.MAX_KEYS} slot rows in all (acquire counts its limit, get {locks.GET_KEYS}); no lock named twice",
)


def parse_lock_op(index: int, raw: Any) -> locks.LockOp:
    """One wire operation as a ``LockOp``; raise ``LocksBadRequest`` with its reason."""
    raw, op = batch_op(index, raw, VERBS, _bad, "locks", "acquire, renew, release, get")
    name = NAME.read(raw, "name", _bad)
    if op == "get":
        return locks.LockOp(op="get", name=name)
    if op == "release":
        return locks.LockOp(op="release", name=name, token=_token(raw), slot=SLOT.read(raw, "slot", _bad))
    FOREVER.read(raw, "forever", _bad)
    ttl = timedelta(seconds=TTL.read(raw, "ttlSeconds", _bad))
    owner = OWNER.read(raw, "owner", _bad)
    if op == "renew":
        token = _token(raw)
        return locks.LockOp(op="renew", name=name, ttl=ttl, owner=owner, token=token, slot=SLOT.read(raw, "slot", _bad))
    return locks.LockOp(op="acquire", name=name, ttl=ttl, owner=owner, limit=LIMIT.read(raw, "limit", _bad))


def _token(raw: dict[str, Any]) -> int:
    return locks.check_token(TOKEN.read(raw, "token", _bad))


def parse_lock_ops(raw_ops: Any) -> list[locks.LockOp]:
    """A whole call: each op, the op and key budgets, duplicates.

    Validation is all-or-nothing: one bad op refuses the whole call.
    """
    if not isinstance(raw_ops, list):
        raise _bad("locks_bad_body", "body must be an array or {operations: [...]}")
    if len(raw_ops) > locks.MAX_OPS:
        raise _bad("locks_too_many_ops", f"at most {locks.MAX_OPS} operations per call")
    ops = [parse_lock_op(i, raw) for i, raw in enumerate(raw_ops)]
    if sum(op.key_count for op in ops) > locks.MAX_KEYS:
        raise _bad(
            "locks_too_many_keys",
            f"at most {locks.MAX_KEYS} slot rows per call (acquire counts its limit, get {locks.GET_KEYS})",
        )
    seen: set[str] = set()
    for op in ops:
        if op.name in seen:
            raise _bad("locks_duplicate_in_call", f"lock {op.name!r} appears twice in one call")
        seen.add(op.name)
    return ops


# --------------------------------------------------------------------------
# Results to JSON (protocol 3.3): each answer declared once (``wire.answers``)

_TIME = Key(JsonbTime, via=clock.iso_jsonb)
_FINGERPRINT = "a fingerprint{} to a caller who may not write the lock"
HOLDER = Answer("LockHolderOut", slot=int, owner=str | None)
#: ``masked`` (a caller who may read the lock but not write it): the owner
#: and token as fingerprints (``masking.mask_token``), which tell holders
#: apart and renew or release nothing.
LEASE = Answer(
    "LockLeaseOut",
    doc="A live permit, as ``get`` shows it.",
    args=("masked",),
    slot=int,
    owner=Key(str | None, _FINGERPRINT.format(""), mask=masking.mask_token),
    token=Key(int | str, _FINGERPRINT.format(" (a string)"), mask=masking.mask_token),
    since=Key(JsonbTime, "when this holder first took the permit", via=clock.iso_jsonb),
    expiresAt=Key(JsonbTime | None, via=clock.iso_jsonb),
    renewedAt=_TIME,
)
GUARD = Answer(
    "LockGuardOut",
    doc="The KV ``check`` to put first in a transaction: it holds while the token is current.",
    op=Literal["check"],
    ns=Key(Literal["queen-locks"], src="namespace"),
    key=str,
    expect=int,
    required=Literal[True],
)


def _result(name: str, op: str, **keys: Any) -> Answer:
    return Answer(name, args=("index", *keys.pop("args", ())), index=int, op=one(op), name=str, **keys)


_LOST = {"reason": Literal["lost"], "slot": int, "holders": Many(HOLDER)}
_ALREADY = Key(Literal[True], "present when this owner held it already", omit=True, when="already")
ACQUIRED = _result(
    "LockAcquiredOut",
    "acquire",
    acquired=Literal[True],
    slot=int,
    token=int,
    owner=str | None,
    guard=GUARD,
    already=_ALREADY,
)
REFUSED = _result(
    "LockAcquireRefusedOut",
    "acquire",
    acquired=Literal[False],
    reason=Literal["held", "contended"],
    holders=Many(HOLDER),
)
_NEW_TOKEN = Key(int, "a new token: the old one no longer guards, renews or releases")
RENEWED = _result("LockRenewedOut", "renew", renewed=Literal[True], slot=int, token=_NEW_TOKEN, guard=GUARD)
RENEW_LOST = _result("LockRenewLostOut", "renew", renewed=Literal[False], **_LOST)
RELEASED = _result("LockReleasedOut", "release", released=Literal[True], slot=int)
RELEASE_LOST = _result("LockReleaseLostOut", "release", released=Literal[False], **_LOST)
GET = _result("LockGetOut", "get", args=("masked",), held=bool, holders=Many(LEASE))
_RESULTS = list_of(ACQUIRED, REFUSED, RENEWED, RENEW_LOST, RELEASED, RELEASE_LOST, GET)
CALL_OUT = Answer("LocksCallOut", results=Key(_RESULTS, "one per operation, in request order"))
BAD_REQUEST = kv_refusal(
    "LocksBadRequestOut",
    "400: ``error`` is the machine code, ``reason`` the finer one (protocol 3.4).",
    error=Literal["locks_bad_request"],
)


def result_out(index: int, result: locks.LockResult, *, masked: bool = False) -> dict[str, Any]:
    """One result element exactly as protocol.md 3.3 shows it.

    ``masked`` shows a ``get``'s holders as fingerprints (``LEASE``); the
    other operations need write, so never mask.
    """
    if isinstance(result, locks.Acquire):
        return (ACQUIRED if result.acquired else REFUSED).render(result, index)
    if isinstance(result, locks.Renewal):
        return (RENEWED if result.renewed else RENEW_LOST).render(result, index)
    if isinstance(result, locks.Release):
        return (RELEASED if result.released else RELEASE_LOST).render(result, index)
    return GET.render(result, index, masked)
