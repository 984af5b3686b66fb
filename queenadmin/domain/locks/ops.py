"""The lock operations: ``locks_call`` for a call of ``LockOp`` commands
(``api/wire/locks.py`` parses them from ``POST /api/v1/locks``), and
``lock_acquire``, ``lock_renew``, ``lock_release`` and ``lock_holders`` one
at a time. They return plain results: a held lock is ``acquired=False``, not
an error. How permits are kept: the package's docstring (``__init__``).
"""

from __future__ import annotations

import contextlib
import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Literal

from queenadmin.domain import clock, kv, names
from queenadmin.domain.kv.store import store as kv_store
from queenadmin.errors import LocksBadRequest
from queenadmin.plumbing import db

log = logging.getLogger(__name__)

NAMESPACE = kv.LOCKS_NAMESPACE
#: Protocol limits (protocol.md 3.4 and 12).
MAX_OPS = 64
MAX_KEYS = 4096
MAX_NAME_BYTES = 256
MAX_OWNER_BYTES = 256
MAX_LIMIT = 1024
MAX_SLOT = MAX_LIMIT - 1
#: What a ``get`` counts against ``MAX_KEYS``, and its page size.
GET_KEYS = 1000
#: A semaphore acquire re-reads and retries this many times in all before
#: it answers ``contended``.
ACQUIRE_ATTEMPTS = 4
#: A renew whose put lost re-reads once.
RENEW_ATTEMPTS = 2
#: Seconds between tries of a waiting in-process acquire.
RETRY_INTERVAL = 0.05
#: A grant or renew whose call took longer than this share of its lease
#: (it waited for the permit's key while another transaction, a holder's
#: guarded step, kept it) is renewed once more at once, so that the lease
#: runs its whole lifetime from the answer, not from when the call began.
LATE_SHARE = 0.1
#: How many times an acquire takes a permit again when its late grant had
#: already run out (someone else may take it meanwhile).
LATE_ATTEMPTS = 3

Verb = Literal["acquire", "renew", "release", "get"]


# --------------------------------------------------------------------------
# Operations and results


@dataclass(frozen=True)
class LockOp:
    """One lock operation of a call, checked (see the ``check_*`` rules)."""

    op: Verb
    name: str
    #: acquire and renew: the lease's lifetime.
    ttl: timedelta = timedelta(0)
    owner: str | None = None
    #: acquire: permits of the semaphore (1 = a lock).
    limit: int = 1
    #: renew and release: the token of the last grant or renew.
    token: int = 0
    #: renew and release: which permit.
    slot: int = 0

    @property
    def key_count(self) -> int:
        """What this op counts against the call's ``MAX_KEYS`` budget."""
        if self.op == "acquire":
            return self.limit
        if self.op == "get":
            return GET_KEYS
        return 1


@dataclass(frozen=True)
class Holder:
    """A live permit. The lease fields are filled by ``lock_holders`` only."""

    slot: int
    owner: str | None
    token: int = 0
    since: datetime | None = None
    expires_at: datetime | None = None
    renewed_at: datetime | None = None


def guard_check(*, name: str, slot: int, token: int) -> kv.KVCheck:
    """The required KV check that holds while the permit is at ``token``.

    Put it in a KV call (or a transaction) to make it commit only while the
    lease is still the holder's: it aborts the call with
    ``PreconditionFailed`` otherwise.
    """
    return kv.KVCheck(NAMESPACE, _key(name, slot), token, required=True)


@dataclass(frozen=True)
class Acquire:
    """The answer to an acquire: granted (``acquired``) or refused.

    Granted: ``slot``, ``token`` and ``owner`` (the one sent, or None), with
    ``already`` when that owner held the permit before this call. Refused:
    ``reason`` is ``"held"`` (no free permit) or ``"contended"`` (a
    semaphore's free permits kept being taken under it), with ``holders``.
    """

    name: str
    acquired: bool
    slot: int | None = None
    token: int | None = None
    owner: str | None = None
    already: bool = False
    reason: Literal["held", "contended"] | None = None
    holders: tuple[Holder, ...] = ()
    #: Granted: when the lease ends, on the clock of ``domain/clock.py``
    #: (None when the grant cannot tell; not on the wire).
    expires_at: datetime | None = None

    @property
    def guard(self) -> kv.KVCheck | None:
        if not self.acquired or self.slot is None or self.token is None:
            return None
        return guard_check(name=self.name, slot=self.slot, token=self.token)


@dataclass(frozen=True)
class Renewal:
    """The answer to a renew: a NEW ``token`` when ``renewed``, else lost.

    Lost: ``holders`` is empty when the permit's row is gone, else the one
    holder of the slot.
    """

    name: str
    renewed: bool
    slot: int
    token: int | None = None
    reason: Literal["lost"] | None = None
    holders: tuple[Holder, ...] = ()
    #: Renewed: when the new lease ends (not on the wire).
    expires_at: datetime | None = None

    @property
    def guard(self) -> kv.KVCheck | None:
        if not self.renewed or self.token is None:
            return None
        return guard_check(name=self.name, slot=self.slot, token=self.token)


@dataclass(frozen=True)
class Release:
    """The answer to a release: ``released``, or lost with ``holders``."""

    name: str
    released: bool
    slot: int
    reason: Literal["lost"] | None = None
    holders: tuple[Holder, ...] = ()


@dataclass(frozen=True)
class LockState:
    """The answer to a get: every live permit of the name, by slot."""

    name: str
    held: bool
    holders: tuple[Holder, ...]


LockResult = Acquire | Renewal | Release | LockState


# --------------------------------------------------------------------------
# The rules on names, owners and numbers (protocol.md 3.4), for every caller


def _bad(reason: str, detail: str) -> LocksBadRequest:
    return LocksBadRequest(detail, reason=reason)


def _is_control(ch: str) -> bool:
    code = ord(ch)
    return code < 0x20 or 0x7F <= code <= 0x9F


def _utf8_len(text: str) -> int | None:
    try:
        return len(text.encode())
    except UnicodeEncodeError:  # a lone surrogate
        return None


def check_name(name: str) -> str:
    """Return ``name`` if it is a lock name, else raise ``locks_bad_name``."""
    size = _utf8_len(name)
    # The rule of every stored name (domain.names), and no "#": it ends the
    # name in the permit's key.
    if size is None or not name or size > MAX_NAME_BYTES or not names.is_name(name) or "#" in name:
        raise _bad(
            "locks_bad_name",
            f"name is a non-empty string of at most {MAX_NAME_BYTES} bytes, without control characters or '#'",
        )
    return name


def check_stored_name(name: str) -> str:
    """Return ``name`` if a permit may be stored under it, else raise
    ``locks_bad_name``: for an operator's release, which must reach a lock
    named before the rule of names (a newline, a bidi mark), so only the
    empty text and what no database can hold (``names.unstorable``) are
    refused."""
    if not name or names.unstorable(name) is not None:
        raise _bad("locks_bad_name", "name is a non-empty string without NUL")
    return name


def check_owner(owner: str | None) -> str | None:
    """Return ``owner`` (None = no owner), else raise ``locks_bad_owner``."""
    if owner is None:
        return None
    size = _utf8_len(owner)
    if size is None or not owner or size > MAX_OWNER_BYTES or any(_is_control(c) for c in owner):
        raise _bad(
            "locks_bad_owner",
            f"owner is a non-empty string of at most {MAX_OWNER_BYTES} bytes, without control characters",
        )
    return owner


def check_ttl(ttl: timedelta | float) -> timedelta:
    """A lease lifetime: a timedelta (or seconds) above zero, at most 100 years."""
    if not isinstance(ttl, timedelta):
        if isinstance(ttl, bool) or not isinstance(ttl, int | float):
            raise _bad("locks_bad_ttl", "ttl must be a timedelta or a number of seconds")
        ttl = timedelta(seconds=ttl)
    if ttl <= timedelta(0) or ttl > kv.MAX_TTL:
        raise _bad("locks_bad_ttl", f"ttlSeconds must be an integer from 1 to {int(kv.MAX_TTL.total_seconds())}")
    return ttl


def _check_int(value: int, low: int, high: int, reason: str, detail: str) -> int:
    if not low <= value <= high:
        raise _bad(reason, detail)
    return value


def check_limit(limit: int) -> int:
    return _check_int(limit, 1, MAX_LIMIT, "locks_bad_limit", f"limit must be an integer from 1 to {MAX_LIMIT}")


def check_slot(slot: int) -> int:
    return _check_int(slot, 0, MAX_SLOT, "locks_bad_slot", f"slot must be an integer from 0 to {MAX_SLOT}")


def check_token(token: int) -> int:
    # No upper bound: a token past any version is simply not the holder's.
    if token <= 0:
        raise _bad("locks_bad_token", "token must be an integer above 0")
    return token


# --------------------------------------------------------------------------
# The operations, each a few KV calls


def _key(name: str, slot: int) -> str:
    return f"{name}#{slot}"


def _slot_of(name: str, key: str) -> int | None:
    """The slot a key names under ``name``; None for a key that is no slot."""
    tail = key[len(name) + 1 :]
    # Plain decimal only: "#07" and "#+7" are not slots (protocol 3.1).
    if not tail.isascii() or not tail.isdigit() or (len(tail) > 1 and tail[0] == "0"):
        return None
    return int(tail)


def _owner_of(value: Any) -> str | None:
    owner = value.get("owner") if isinstance(value, dict) else None
    return owner if isinstance(owner, str) else None


def _since_of(row: kv.KVRow) -> datetime:
    since = row.value.get("since") if isinstance(row.value, dict) else None
    if isinstance(since, str):
        with contextlib.suppress(ValueError):
            return datetime.fromisoformat(since)
    return row.updated_at


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
) -> kv.WriteResult:
    put = kv.KVPut(NAMESPACE, key, db.json_text(value), ttl, expect=expect, if_absent=op == "putIfAbsent")
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
    return () if result.version == 0 else (Holder(slot, _owner_of(result.value)),)


def _late(op: LockOp, at: datetime, now: datetime | None) -> bool:
    """Whether a lease written at ``at`` came back late (see ``LATE_SHARE``).

    Only a call on real time can be late: a caller's fixed ``now`` is the
    time it asked for."""
    return now is None and clock.now() - at > op.ttl * LATE_SHARE


def _acquire(op: LockOp, now: datetime | None) -> Acquire:
    """``_acquire_at``; a late grant is renewed so its lease runs whole."""
    result = Acquire(op.name, False, reason="held")
    for _attempt in range(LATE_ATTEMPTS):
        at = now or clock.now()
        result = _acquire_at(op, at)
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


def _acquire_at(op: LockOp, now: datetime) -> Acquire:
    value = {"owner": op.owner}

    def granted(slot: int, token: int, *, already: bool = False, expires_at: datetime | None = None) -> Acquire:
        if expires_at is None and not already:
            expires_at = now + op.ttl
        return Acquire(op.name, True, slot, token, op.owner, already, expires_at=expires_at)

    def mine(result_value: Any) -> bool:
        return op.owner is not None and _owner_of(result_value) == op.owner

    if op.limit == 1:
        # A lock: take slot 0 at once, with no read first.
        result = _put(_key(op.name, 0), value, op.ttl, expect=0, op="putIfAbsent", now=now)
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
            slot = _slot_of(op.name, row.key)
            if slot is not None:
                taken[slot] = row
        for slot, row in sorted(taken.items()):
            if mine(row.value):
                return granted(slot, row.version, already=True, expires_at=row.expires_at)
        holders = tuple(Holder(slot, _owner_of(row.value)) for slot, row in sorted(taken.items()))
        free = [s for s in range(op.limit) if s not in taken]
        if not free:
            return Acquire(op.name, False, reason="held", holders=holders)
        # A permit whose row is gone (never taken, or released) first: an
        # expired one's holder may still be in a guarded step that keeps
        # its key, and a put on that key waits for the step to end.
        unused = [s for s in free if _key(op.name, s) not in lapsed]
        slot = random.choice(unused or free)
        result = _put(_key(op.name, slot), value, op.ttl, expect=0, op="putIfAbsent", now=now)
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
        return _renew_at(replace(op, token=result.token), clock.now())
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
        owner = _owner_of(row.value)
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
    result = _write(kv.KVDelete(NAMESPACE, _key(op.name, op.slot), expect=op.token), now)
    if result.applied:
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
            slot = _slot_of(op.name, row.key)
            if slot is None:
                continue
            found.append(
                Holder(
                    slot=slot,
                    owner=_owner_of(row.value),
                    token=row.version,
                    since=_since_of(row),
                    expires_at=row.expires_at,
                    renewed_at=row.updated_at,
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


def locks_call(ops: Sequence[LockOp], *, now: datetime | None = None) -> list[LockResult]:
    """Apply a validated call, op by op; each op is independent.

    Returns one result per op, in request order. Must run outside any
    transaction: every step is its own outermost KV transaction.
    """
    return [_RUN[op.op](op, now) for op in ops]


def lock_acquire(
    *,
    name: str,
    ttl: timedelta | float,
    owner: str | None = None,
    limit: int = 1,
    now: datetime | None = None,
) -> Acquire:
    """Take a permit of ``name`` (a semaphore of ``limit``) for ``ttl``.

    Returns ``Acquire``: granted with its slot and token, ``already`` when
    ``owner`` held a permit before; or refused with reason ``held`` (no free
    permit) or ``contended`` (semaphores only). Raises ``LocksBadRequest``
    for a bad name, owner, ttl or limit. Must be the outermost call.
    """
    op = LockOp(
        op="acquire", name=check_name(name), ttl=check_ttl(ttl), owner=check_owner(owner), limit=check_limit(limit)
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
