"""Locks and semaphores: leases with fencing tokens, kept in KV rows.

A permit is one KV row in the namespace ``queen-locks`` under the key
``<name>#<slot>``, valued ``{"owner": ...}`` (plus ``since`` from the first
renew on), living as long as the acquire or renew asked. The permit's
fencing token is the row's KV version, drawn from the store-wide counter,
so a later holder always has a higher token and every renew answers a new
one (protocol.md section 3). There is no lock table: every operation is a
KV call (``kv.kv_call``), which keeps tokens and their order exactly the
KV store's. These operations are the only writers of the namespace: every
other KV write there is refused (``kv.refuse_permit_changes``), so no raw
put takes a lock an acquire refused as held.

Two faces, re-exported here so callers write ``locks.lock_acquire(...)``
and ``locks.hold(...)``:

- the operations (``ops``: ``locks_call`` for a call of ``LockOp``
  commands, which ``api/wire/locks.py`` parses from ``POST /api/v1/locks``;
  ``lock_acquire``, ``lock_renew``, ``lock_release`` and ``lock_holders``
  one at a time), which return plain results: a held lock is
  ``acquired=False``, not an error;
- the in-process API for Django code in the same project (``inprocess``,
  the flexiq style): ``hold()`` and ``ahold()`` scoped forms that retry,
  renew in the background and report a lost lease, the explicit ``Lock``
  handle, ``info()`` with masked credentials, and ``reap_expired()``.

Each operation runs its own KV calls, outside any caller transaction: the
operations of one call are independent (protocol 3.2), and ``kv_call``
opens the outermost, durable transaction of each step itself.
"""

from __future__ import annotations

from queenadmin.domain.locks.inprocess import (
    HolderInfo,
    Lock,
    LockInfo,
    LoopLease,
    ahold,
    hold,
    info,
    lock,
    reap_expired,
)
from queenadmin.domain.locks.ops import (
    ACQUIRE_ATTEMPTS,
    GET_KEYS,
    LATE_ATTEMPTS,
    LATE_SHARE,
    MAX_KEYS,
    MAX_LIMIT,
    MAX_NAME_BYTES,
    MAX_OPS,
    MAX_OWNER_BYTES,
    MAX_SLOT,
    NAMESPACE,
    RENEW_ATTEMPTS,
    RETRY_INTERVAL,
    Acquire,
    Holder,
    LockOp,
    LockResult,
    LockState,
    Release,
    Renewal,
    Verb,
    check_limit,
    check_name,
    check_owner,
    check_slot,
    check_stored_name,
    check_token,
    check_ttl,
    guard_check,
    lock_acquire,
    lock_holders,
    lock_release,
    lock_renew,
    locks_call,
)
from queenadmin.errors import LockLost, LockNotAcquired, LockNotHeld

__all__ = [
    "ACQUIRE_ATTEMPTS",
    "GET_KEYS",
    "LATE_ATTEMPTS",
    "LATE_SHARE",
    "MAX_KEYS",
    "MAX_LIMIT",
    "MAX_NAME_BYTES",
    "MAX_OPS",
    "MAX_OWNER_BYTES",
    "MAX_SLOT",
    "NAMESPACE",
    "RENEW_ATTEMPTS",
    "RETRY_INTERVAL",
    "Acquire",
    "Holder",
    "HolderInfo",
    "Lock",
    "LockInfo",
    "LockLost",
    "LockNotAcquired",
    "LockNotHeld",
    "LockOp",
    "LockResult",
    "LockState",
    "LoopLease",
    "Release",
    "Renewal",
    "Verb",
    "ahold",
    "check_limit",
    "check_name",
    "check_owner",
    "check_slot",
    "check_stored_name",
    "check_token",
    "check_ttl",
    "guard_check",
    "hold",
    "info",
    "lock",
    "lock_acquire",
    "lock_holders",
    "lock_release",
    "lock_renew",
    "locks_call",
    "reap_expired",
]
