"""The locks wire language (protocol.md section 3): JSON to ``LockOp``, results to JSON."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

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
# Results to JSON (protocol 3.3)


def guard_out(check: kv.KVCheck | None) -> dict[str, Any] | None:
    """A guard as the KV ``check`` op a client puts in its batch."""
    if check is None:
        return None
    return {"op": "check", "ns": check.namespace, "key": check.key, "expect": check.expect, "required": True}


def _holder_out(holder: locks.Holder, *, lease: bool, masked: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"slot": holder.slot, "owner": masking.mask_token(holder.owner) if masked else holder.owner}
    if lease:
        out["token"] = masking.mask_token(holder.token) if masked else holder.token
        out["since"] = clock.iso_jsonb(holder.since)
        out["expiresAt"] = clock.iso_jsonb(holder.expires_at)
        out["renewedAt"] = clock.iso_jsonb(holder.renewed_at)
    return out


def _holders_out(holders: tuple[locks.Holder, ...]) -> list[dict[str, Any]]:
    return [_holder_out(h, lease=False) for h in holders]


def result_out(index: int, result: locks.LockResult, *, masked: bool = False) -> dict[str, Any]:
    """One result element exactly as protocol.md 3.3 shows it.

    ``masked`` (a caller who may read the lock but not write it): a
    ``get`` shows each holder's owner and token as fingerprints
    (``masking.mask_token``), which tell holders apart and renew or
    release nothing. The other operations need write, so never mask.
    """
    out: dict[str, Any]
    if isinstance(result, locks.Acquire):
        out = {"index": index, "op": "acquire", "name": result.name, "acquired": result.acquired}
        if result.acquired:
            out.update(slot=result.slot, token=result.token, owner=result.owner, guard=guard_out(result.guard))
            if result.already:
                out["already"] = True
        else:
            out["reason"] = result.reason
            out["holders"] = _holders_out(result.holders)
        return out
    if isinstance(result, locks.Renewal):
        out = {"index": index, "op": "renew", "name": result.name, "renewed": result.renewed}
        if result.renewed:
            out.update(slot=result.slot, token=result.token, guard=guard_out(result.guard))
        else:
            out.update(reason="lost", slot=result.slot, holders=_holders_out(result.holders))
        return out
    if isinstance(result, locks.Release):
        out = {"index": index, "op": "release", "name": result.name, "released": result.released}
        if result.released:
            out["slot"] = result.slot
        else:
            out.update(reason="lost", slot=result.slot, holders=_holders_out(result.holders))
        return out
    return {
        "index": index,
        "op": "get",
        "name": result.name,
        "held": result.held,
        "holders": [_holder_out(h, lease=True, masked=masked) for h in result.holders],
    }
