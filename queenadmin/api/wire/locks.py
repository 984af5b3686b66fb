"""The locks wire language (protocol.md section 3): JSON to ``LockOp``, results to JSON."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from queenadmin.api.wire.common import batch_op, is_json_int
from queenadmin.domain import clock, kv, locks, masking
from queenadmin.errors import LocksBadRequest

VERBS: frozenset[str] = frozenset({"acquire", "renew", "release", "get"})
MAX_TTL_SECONDS = int(kv.MAX_TTL.total_seconds())


def _bad(reason: str, detail: str) -> LocksBadRequest:
    return LocksBadRequest(detail, reason=reason)


def _ttl(raw: dict[str, Any]) -> timedelta:
    # null counts as absent for forever (as on the KV routes), but a null
    # ttlSeconds is a bad value, not a missing one (protocol 3.4).
    if raw.get("forever") is not None:
        raise _bad("locks_ttl_required", "a lock has no forever: give ttlSeconds, and renew")
    if "ttlSeconds" not in raw:
        raise _bad("locks_ttl_required", "acquire and renew need ttlSeconds")
    ttl = raw["ttlSeconds"]
    if not is_json_int(ttl) or ttl <= 0 or ttl > MAX_TTL_SECONDS:
        raise _bad("locks_bad_ttl", f"ttlSeconds must be an integer from 1 to {MAX_TTL_SECONDS}")
    return timedelta(seconds=ttl)


def _token(raw: dict[str, Any]) -> int:
    if "token" not in raw:
        raise _bad("locks_token_required", "renew and release need the token of the last grant or renew")
    token = raw["token"]
    if not is_json_int(token):
        raise _bad("locks_bad_token", "token must be an integer above 0")
    return locks.check_token(token)


def _small_int(raw: dict[str, Any], name: str, default: int, check: Callable[[int], int], low: int, high: int) -> int:
    value = raw.get(name)
    if value is None:
        return default
    if not is_json_int(value):
        raise _bad(f"locks_bad_{name}", f"{name} must be an integer from {low} to {high}")
    return check(value)


def _slot(raw: dict[str, Any]) -> int:
    return _small_int(raw, "slot", 0, locks.check_slot, 0, locks.MAX_SLOT)


def _limit(raw: dict[str, Any]) -> int:
    return _small_int(raw, "limit", 1, locks.check_limit, 1, locks.MAX_LIMIT)


def _name(raw: dict[str, Any]) -> str:
    name = raw.get("name")
    if not isinstance(name, str):
        raise _bad(
            "locks_bad_name",
            f"name is a non-empty string of at most {locks.MAX_NAME_BYTES} bytes, without control characters or '#'",
        )
    return locks.check_name(name)


def _owner(raw: dict[str, Any]) -> str | None:
    owner = raw.get("owner")
    if owner is not None and not isinstance(owner, str):
        raise _bad(
            "locks_bad_owner",
            f"owner is a non-empty string of at most {locks.MAX_OWNER_BYTES} bytes, without control characters",
        )
    return locks.check_owner(owner)


def parse_lock_op(index: int, raw: Any) -> locks.LockOp:
    """One wire operation as a ``LockOp``; raise ``LocksBadRequest`` with its reason."""
    raw, op = batch_op(index, raw, VERBS, _bad, "locks", "acquire, renew, release, get")
    name = _name(raw)
    if op == "get":
        return locks.LockOp(op="get", name=name)
    if op == "release":
        return locks.LockOp(op="release", name=name, token=_token(raw), slot=_slot(raw))
    ttl = _ttl(raw)
    owner = _owner(raw)
    if op == "renew":
        return locks.LockOp(op="renew", name=name, ttl=ttl, owner=owner, token=_token(raw), slot=_slot(raw))
    return locks.LockOp(op="acquire", name=name, ttl=ttl, owner=owner, limit=_limit(raw))


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
