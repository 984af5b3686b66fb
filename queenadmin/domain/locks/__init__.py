"""Locks and semaphores: leases with fencing tokens, kept in KV rows.

A permit is one KV row in the namespace ``queen-locks`` under the key
``<name>#<slot>``, valued ``{"owner": ...}`` (plus ``caller``, who took it,
when the acquire named one, and ``since`` from the first renew on), living
as long as the acquire or renew asked. The permit's fencing token is the
row's KV version, drawn from the store-wide counter, so a later holder
always has a higher token and every renew answers a new one (protocol.md
section 3). There is no lock table: every operation is a
KV call (``kv.kv_call``), which keeps tokens and their order exactly the
KV store's. These operations are the only writers of the namespace: every
other KV write there is refused (``kv.refuse_permit_changes``), so no raw
put takes a lock an acquire refused as held. So locks have no ``store/``:
their statements are the KV store's.

- ``ops``: the commands (``LockOp``), results, limits and the rules on
  names, owners, callers and numbers, and a permit's key and row;
- ``calls``: the operations (``locks_call`` for a call of ``LockOp``
  commands; ``lock_acquire``, ``lock_renew``, ``lock_release`` and
  ``lock_holders`` one at a time), which return plain results: a held lock
  is ``acquired=False``, not an error;
- ``inprocess``: the API for Django code in the same project (the flexiq
  style): ``hold()`` and ``ahold()`` scoped forms that retry, renew in the
  background and report a lost lease, the explicit ``Lock`` handle,
  ``info()`` with masked credentials, and ``reap_expired()``;
- ``operator``: every live permit page by page, and force release on an
  operator's word, audited.

Callers import this package (``from queenadmin.domain import locks``).
"""

from __future__ import annotations

from queenadmin.domain.locks.calls import lock_acquire, lock_holders, lock_release, lock_renew, locks_call
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
    MAX_CALLER_CHARS,
    MAX_KEYS,
    MAX_LIMIT,
    MAX_NAME_BYTES,
    MAX_OPS,
    MAX_OWNER_BYTES,
    MAX_SLOT,
    NAMESPACE,
    Acquire,
    Holder,
    LockOp,
    LockResult,
    LockState,
    Release,
    Renewal,
    caller_of,
    check_caller,
    check_limit,
    check_name,
    check_owner,
    check_slot,
    check_stored_name,
    check_token,
    check_ttl,
    guard_check,
    owner_of,
    since_of,
    slot_of,
)
from queenadmin.errors import LockLost, LockNotAcquired, LockNotHeld

__all__ = [
    "ACQUIRE_ATTEMPTS",
    "GET_KEYS",
    "MAX_CALLER_CHARS",
    "MAX_KEYS",
    "MAX_LIMIT",
    "MAX_NAME_BYTES",
    "MAX_OPS",
    "MAX_OWNER_BYTES",
    "MAX_SLOT",
    "NAMESPACE",
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
    "ahold",
    "caller_of",
    "check_caller",
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
    "owner_of",
    "reap_expired",
    "since_of",
    "slot_of",
]
