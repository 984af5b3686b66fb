"""Lock commands, results, and the rules every caller shares.

The permit's KV row: the namespace ``queen-locks``, the key
``<name>#<slot>`` (``_key``, ``slot_of``) and the value ``{"owner": ...}``,
plus ``caller`` when the acquire named who asked and ``since`` from the
first renew on (``owner_of``, ``caller_of``, ``since_of``). The
checks on names, owners and numbers (protocol.md 3.4) hold for every
caller: the wire parser (``api/wire/locks.py``), the calls and the
in-process API.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from queenadmin.domain import kv, names
from queenadmin.errors import LocksBadRequest

NAMESPACE = kv.LOCKS_NAMESPACE
#: Protocol limits (protocol.md 3.4 and 12).
MAX_OPS = 64
MAX_KEYS = 4096
MAX_NAME_BYTES = 256
MAX_OWNER_BYTES = 256
#: The longest caller a permit records (characters; cut beyond).
MAX_CALLER_CHARS = 256
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
    #: acquire: who asks (``check_caller``): the API token's name or the
    #: JWT's ``sub``, or what an in-process caller names; recorded in the
    #: permit for people to read. Not a credential, unlike ``owner``.
    caller: str | None = None

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
    #: Who took the lease (``LockOp.caller``); None when nobody was named.
    caller: str | None = None


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


def check_caller(caller: str | None) -> str | None:
    """``caller`` as a permit records it (``names.label_of``): an identity
    is never refused, only cut and made printable."""
    return None if caller is None else names.label_of(caller, MAX_CALLER_CHARS)


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
# A permit's key and row


def _key(name: str, slot: int) -> str:
    return f"{name}#{slot}"


def slot_of(name: str, key: str) -> int | None:
    """The slot a key names under ``name``; None for a key that is no slot."""
    tail = key[len(name) + 1 :]
    # Plain decimal only: "#07" and "#+7" are not slots (protocol 3.1).
    if not tail.isascii() or not tail.isdigit() or (len(tail) > 1 and tail[0] == "0"):
        return None
    return int(tail)


def owner_of(value: Any) -> str | None:
    """The owner a permit's value names; None for no owner or no permit value."""
    owner = value.get("owner") if isinstance(value, dict) else None
    return owner if isinstance(owner, str) else None


def caller_of(value: Any) -> str | None:
    """Who took the permit (``LockOp.caller``); None when nobody was named."""
    caller = value.get("caller") if isinstance(value, dict) else None
    return caller if isinstance(caller, str) else None


def since_of(row: kv.KVRow) -> datetime:
    """When the permit's holder first took it: ``since``, else the last write."""
    since = row.value.get("since") if isinstance(row.value, dict) else None
    if isinstance(since, str):
        with contextlib.suppress(ValueError):
            return datetime.fromisoformat(since)
    return row.updated_at
