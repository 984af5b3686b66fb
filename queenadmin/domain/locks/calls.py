"""The lock operations, each a few KV calls: acquire, renew, release, get.

``locks_call`` applies a call of ``LockOp`` commands (which
``api/wire/locks.py`` parses from ``POST /api/v1/locks``);
``lock_acquire``, ``lock_renew``, ``lock_release`` and ``lock_holders``
take one at a time. They return plain results: a held lock is
``acquired=False``, not an error.

Each operation runs its own KV calls, outside any caller transaction: the
operations of one call are independent (protocol 3.2), and ``kv_call``
opens the outermost, durable transaction of each step itself.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, Literal

from queenadmin.domain import clock, kv
from queenadmin.domain.kv.store import store as kv_store
from queenadmin.domain.locks import history as lock_history
from queenadmin.domain.locks import tally
from queenadmin.domain.locks.ops import (
    ACQUIRE_ATTEMPTS,
    GET_KEYS,
    LATE_ATTEMPTS,
    LATE_SHARE,
    NAMESPACE,
    RENEW_ATTEMPTS,
    Acquire,
    Holder,
    LockOp,
    LockResult,
    LockState,
    Release,
    Renewal,
    _key,
    caller_of,
    check_caller,
    check_limit,
    check_name,
    check_owner,
    check_slot,
    check_token,
    check_ttl,
    owner_of,
    since_of,
    slot_of,
)
from queenadmin.plumbing import db

#: (name, slot, token) -> when the lease was granted, as its permit says
#: (``since_of``), for the hold time of its release
#: (``queenadmin_lock_hold_seconds``) with no read when the release comes
#: through the process that granted it. Any other release reads the permit.
_granted_at: dict[tuple[str, int, int], datetime] = {}
#: Leases released elsewhere or expired stay in ``_granted_at`` until it
#: holds this many; then it starts again (those releases read the permit).
_MAX_GRANTED = 10_000


def _write(op: kv.KVWrite, now: datetime | None) -> kv.WriteResult:
    # The lock operations are the one writer of their permits.
    result = kv.kv_call([op], now=now, permits=True)[0]
    assert isinstance(result, kv.WriteResult)
    return result


def _put(
    key: str,
    value: dict[str, Any],
    ttl: timedelta,
    *,
    expect: int,
    op: Literal["put", "putIfAbsent"] = "put",
    now: datetime | None,
    waited_ms: int | None = None,
) -> kv.WriteResult:
    put = kv.KVPut(
        NAMESPACE, key, db.json_text(value), ttl, expect=expect, if_absent=op == "putIfAbsent", waited_ms=waited_ms
    )
    return _write(put, now)


def _get(key: str, now: datetime | None) -> kv.KVRow | None:
    result = kv.kv_call([kv.KVGet(NAMESPACE, key)], now=now)[0]
    assert isinstance(result, kv.GetResult)
    return result.row


def _get_many(keys: tuple[str, ...], now: datetime) -> tuple[tuple[kv.KVRow, ...], frozenset[str]]:
    """The live rows of ``keys``, and the keys whose row is stored but expired."""
    stored = kv_store().read_keys(((NAMESPACE, key) for key in keys), now)
    live = tuple(sorted((s.row for s in stored.values() if s.live), key=lambda r: r.key.encode()))
    lapsed = frozenset(key for (_, key), s in stored.items() if not s.live)
    return live, lapsed


def _holder_of(slot: int, result: kv.WriteResult) -> tuple[Holder, ...]:
    """The holder a refused write saw (none when the row is gone)."""
    return () if result.version == 0 else (Holder(slot, owner_of(result.value)),)


def _late(op: LockOp, at: datetime, now: datetime | None) -> bool:
    """Whether a lease written at ``at`` came back late (see ``LATE_SHARE``).

    Only a call on real time can be late: a caller's fixed ``now`` is the
    time it asked for."""
    return now is None and clock.now() - at > op.ttl * LATE_SHARE


def _note_granted_at(name: str, slot: int, token: int, since: datetime) -> None:
    if len(_granted_at) >= _MAX_GRANTED:
        _granted_at.clear()
    _granted_at[(name, slot, token)] = since


def _acquire(op: LockOp, now: datetime | None) -> Acquire:
    """``_acquire_at``, counted (``tally.operation``) and its wait
    noted for the lock's history."""
    at = now or clock.now()
    waited = lock_history.waiting_ms(op.name, op.owner)
    result = _acquire_late(op, now, waited)
    if result.acquired:
        if not result.already:
            lock_history.note_granted(op.name, op.owner)
            tally.wait((waited or 0) / 1000)
            if result.token is not None:
                _note_granted_at(op.name, result.slot or 0, result.token, at)
    else:
        lock_history.note_refused(op.name, op.owner)
    tally.operation(
        "acquire", "already" if result.already else "acquired" if result.acquired else result.reason or "refused"
    )
    return result


def _acquire_late(op: LockOp, now: datetime | None, waited: int | None) -> Acquire:
    """``_acquire_at``; a late grant is renewed so its lease runs whole."""
    result = Acquire(op.name, False, reason="held")
    for _attempt in range(LATE_ATTEMPTS):
        at = now or clock.now()
        result = _acquire_at(op, at, waited)
        if not result.acquired or not _late(op, at, now):
            return result
        assert result.slot is not None
        assert result.token is not None
        renewal = _renew(replace(op, op="renew", token=result.token, slot=result.slot), None)
        if renewal.renewed:
            return replace(result, token=renewal.token, expires_at=renewal.expires_at)
        # The permit ran out while the call waited: take one again.
        result = Acquire(op.name, False, reason="held" if op.limit == 1 else "contended", holders=renewal.holders)
    return result


def _acquire_at(op: LockOp, now: datetime, waited: int | None = None) -> Acquire:
    # Who asked travels in the permit's value: the same one statement (and
    # the same group commit) as an acquire that names nobody.
    value = {"owner": op.owner} if op.caller is None else {"owner": op.owner, "caller": op.caller}

    def granted(slot: int, token: int, *, already: bool = False, expires_at: datetime | None = None) -> Acquire:
        if expires_at is None and not already:
            expires_at = now + op.ttl
        return Acquire(op.name, True, slot, token, op.owner, already, expires_at=expires_at)

    def mine(result_value: Any) -> bool:
        return op.owner is not None and owner_of(result_value) == op.owner

    if op.limit == 1:
        # A lock: take slot 0 at once, with no read first.
        result = _put(_key(op.name, 0), value, op.ttl, expect=0, op="putIfAbsent", now=now, waited_ms=waited)
        if result.applied:
            return granted(0, result.version)
        if mine(result.value):
            # This owner's earlier acquire won (its answer was lost).
            return granted(0, result.version, already=True)
        return Acquire(op.name, False, reason="held", holders=_holder_of(0, result))

    keys = tuple(_key(op.name, s) for s in range(op.limit))
    holders: tuple[Holder, ...] = ()
    for _attempt in range(ACQUIRE_ATTEMPTS):
        rows, lapsed = _get_many(keys, now)
        taken: dict[int, kv.KVRow] = {}
        for row in rows:
            slot = slot_of(op.name, row.key)
            if slot is not None:
                taken[slot] = row
        for slot, row in sorted(taken.items()):
            if mine(row.value):
                return granted(slot, row.version, already=True, expires_at=row.expires_at)
        holders = tuple(Holder(slot, owner_of(row.value)) for slot, row in sorted(taken.items()))
        free = [s for s in range(op.limit) if s not in taken]
        if not free:
            return Acquire(op.name, False, reason="held", holders=holders)
        # A permit whose row is gone (never taken, or released) first: an
        # expired one's holder may still be in a guarded step that keeps
        # its key, and a put on that key waits for the step to end.
        unused = [s for s in free if _key(op.name, s) not in lapsed]
        slot = random.choice(unused or free)
        result = _put(_key(op.name, slot), value, op.ttl, expect=0, op="putIfAbsent", now=now, waited_ms=waited)
        if result.applied:
            return granted(slot, result.version)
        if mine(result.value):
            return granted(slot, result.version, already=True)
        holders = tuple(sorted((*holders, *_holder_of(slot, result)), key=lambda h: h.slot))
    return Acquire(op.name, False, reason="contended", holders=holders)


def _renew(op: LockOp, now: datetime | None) -> Renewal:
    """``_renew_at``; a late renew is renewed once more so its lease runs whole."""
    at = now or clock.now()
    result = _renew_at(op, at)
    if result.renewed and _late(op, at, now):
        assert result.token is not None
        result = _renew_at(replace(op, token=result.token), clock.now())
    if result.renewed and result.token is not None:
        began = _granted_at.pop((op.name, op.slot, op.token), None)
        if began is not None:
            _note_granted_at(op.name, op.slot, result.token, began)
    tally.operation("renew", "renewed" if result.renewed else result.reason or "lost")
    return result


def _renew_at(op: LockOp, now: datetime) -> Renewal:
    key = _key(op.name, op.slot)

    def lost(holders: tuple[Holder, ...]) -> Renewal:
        return Renewal(op.name, False, op.slot, reason="lost", holders=holders)

    holders: tuple[Holder, ...] = ()
    for _attempt in range(RENEW_ATTEMPTS):
        row = _get(key, now)
        if row is None:
            return lost(())
        owner = owner_of(row.value)
        # The token, or the owner: a renew whose earlier attempt landed (its
        # answer lost) carries through at the row's current version.
        if row.version != op.token and (op.owner is None or owner != op.owner):
            return lost((Holder(op.slot, owner),))
        value = dict(row.value) if isinstance(row.value, dict) else {"owner": owner}
        value.setdefault("since", clock.iso_jsonb(row.updated_at))
        result = _put(key, value, op.ttl, expect=row.version, now=now)
        if result.applied:
            return Renewal(op.name, True, op.slot, token=result.version, expires_at=now + op.ttl)
        holders = _holder_of(op.slot, result)
    return lost(holders)


def _release(op: LockOp, now: datetime | None) -> Release:
    key = _key(op.name, op.slot)
    began = _granted_at.pop((op.name, op.slot, op.token), None)
    if began is None:
        # Granted through another worker or replica (or before a restart):
        # the permit says since when, until the delete below removes it.
        row = _get(key, now)
        began = since_of(row) if row is not None and row.version == op.token else None
    at = now or clock.now()
    result = _write(kv.KVDelete(NAMESPACE, key, expect=op.token), now)
    tally.operation("release", "released" if result.applied else "lost")
    if result.applied:
        if began is not None:
            tally.hold(max(0.0, (at - began).total_seconds()))
        return Release(op.name, True, op.slot)
    return Release(op.name, False, op.slot, reason="lost", holders=_holder_of(op.slot, result))


def _holders(op: LockOp, now: datetime | None) -> LockState:
    prefix = f"{op.name}#"
    found: list[Holder] = []
    after = ""
    while True:
        page = kv.kv_call([kv.KVGetPrefix(NAMESPACE, prefix, after, GET_KEYS)], now=now)[0]
        assert isinstance(page, kv.PageResult)
        for row in page.rows:
            slot = slot_of(op.name, row.key)
            if slot is None:
                continue
            found.append(
                Holder(
                    slot=slot,
                    owner=owner_of(row.value),
                    token=row.version,
                    since=since_of(row),
                    expires_at=row.expires_at,
                    renewed_at=row.updated_at,
                    caller=caller_of(row.value),
                )
            )
        if not page.truncated or page.next_after is None:
            break
        after = page.next_after
    found.sort(key=lambda h: h.slot)
    return LockState(op.name, bool(found), tuple(found))


_RUN: dict[str, Callable[[LockOp, datetime | None], LockResult]] = {
    "acquire": _acquire,
    "renew": _renew,
    "release": _release,
    "get": _holders,
}


def locks_call(ops: Sequence[LockOp], *, caller: str | None = None, now: datetime | None = None) -> list[LockResult]:
    """Apply a validated call, op by op; each op is independent.

    ``caller`` (the API token's name, the JWT's ``sub``) is recorded in
    each permit an acquire of the call takes. Returns one result per op, in
    request order. Must run outside any transaction: every step is its own
    outermost KV transaction.
    """
    if caller is not None:
        caller = check_caller(caller)
        ops = [replace(op, caller=caller) if op.op == "acquire" else op for op in ops]
    return [_RUN[op.op](op, now) for op in ops]


def lock_acquire(
    *,
    name: str,
    ttl: timedelta | float,
    owner: str | None = None,
    limit: int = 1,
    caller: str | None = None,
    now: datetime | None = None,
) -> Acquire:
    """Take a permit of ``name`` (a semaphore of ``limit``) for ``ttl``.

    ``caller`` names who asks, for people to read (``lock_holders``, the
    dashboard); None names nobody. Returns ``Acquire``: granted with its
    slot and token, ``already`` when ``owner`` held a permit before (which
    keeps the caller it was taken by); or refused with reason ``held`` (no
    free permit) or ``contended`` (semaphores only). Raises
    ``LocksBadRequest`` for a bad name, owner, ttl or limit. Must be the
    outermost call.
    """
    op = LockOp(
        op="acquire",
        name=check_name(name),
        ttl=check_ttl(ttl),
        owner=check_owner(owner),
        limit=check_limit(limit),
        caller=check_caller(caller),
    )
    return _acquire(op, now)


def lock_renew(
    *,
    name: str,
    token: int,
    ttl: timedelta,
    slot: int = 0,
    owner: str | None = None,
    now: datetime | None = None,
) -> Renewal:
    """Extend the permit at ``token`` (or held by ``owner``) by ``ttl``.

    Returns ``Renewal``: renewed with a NEW token (the old one stops working
    for renew, release and guard), or lost with the slot's holder if any.
    Must be the outermost call.
    """
    op = LockOp(
        op="renew",
        name=check_name(name),
        ttl=check_ttl(ttl),
        owner=check_owner(owner),
        token=check_token(token),
        slot=check_slot(slot),
    )
    return _renew(op, now)


def lock_release(*, name: str, token: int, slot: int = 0, now: datetime | None = None) -> Release:
    """Give back the permit at ``token``; lost when the token is stale.

    Must be the outermost call.
    """
    op = LockOp(op="release", name=check_name(name), token=check_token(token), slot=check_slot(slot))
    return _release(op, now)


def lock_holders(*, name: str, now: datetime | None = None) -> LockState:
    """Every live permit of ``name`` with raw owners and tokens (no masking).

    For the wire's ``get`` and for trusted callers; show ``info()`` to
    people. Takes no lock.
    """
    return _holders(LockOp(op="get", name=check_name(name)), now)
