"""KV for operators: edit and delete as compare-and-set, revert from the audit.

Every write here aims at the version the operator saw: if the key moved
since, nothing is written and the answer carries the current value and
version (Vault KV v2's check-and-set, not Consul's blind write). Each write
and its audit entry share one transaction. The audit entry records the
value and version before and after as JSON, which is what a revert reads:
a revert puts the old value back only while the key is still at the
version the edit wrote, so a newer write always wins.

Lock permits (the ``queen-locks`` namespace) are not edited here: they
hold credentials and change through the locks' own operations.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Literal

from django.db import connection, transaction

from queenadmin.domain import clock
from queenadmin.domain.audit import Who
from queenadmin.domain.kv import history
from queenadmin.domain.kv.calls import kv_call_in_txn
from queenadmin.domain.kv.ops import (
    LOCKS_NAMESPACE,
    GetResult,
    KVDelete,
    KVGet,
    KVPut,
    KVResult,
    KVRow,
    WriteResult,
    check_key,
    check_namespace,
    check_stored_namespace,
    check_ttl,
    check_value_json,
)
from queenadmin.errors import KVBadRequest, NotFound
from queenadmin.models import AuditEntry
from queenadmin.plumbing import db

Expiry = Literal["keep", "forever"] | timedelta
#: Audit actions a revert can undo.
REVERTIBLE = frozenset({"kv.edit", "kv.delete", "kv.revert"})


@dataclass(frozen=True)
class OperatorWrite:
    """The outcome of an operator's edit, delete or revert.

    ``applied``: written; ``version`` is the new version (0 after a delete).
    Not applied: the key moved (``current_version``/``current_value``, 0 and
    None when it is gone), or, for a revert, ``why`` names what stops it.
    """

    namespace: str
    key: str
    applied: bool
    version: int = 0
    current_version: int = 0
    current_value: Any = None
    current_expires_at: datetime | None = None
    why: Literal["moved", "not_revertible"] | None = None


def _refuse_locks(namespace: str) -> None:
    if namespace == LOCKS_NAMESPACE:
        raise KVBadRequest(
            "lock permits change through locks only (force release on /locks/)", reason="kv_locks_namespace"
        )


def _snapshot(row: KVRow | WriteResult | None, expires_at: datetime | None = None) -> str:
    """The audit's before/after text of a key: JSON of version, value, expiry."""
    if row is None or (isinstance(row, WriteResult) and row.version == 0):
        return json.dumps({"version": 0, "value": None, "expires_at": None})
    if isinstance(row, KVRow):
        expires_at = row.expires_at
    return db.json_text({"version": row.version, "value": row.value, "expires_at": clock.iso_jsonb(expires_at)})


def _read(namespace: str, key: str, now: datetime) -> KVRow | None:
    (got,) = kv_call_in_txn([KVGet(namespace, key)], now=now)
    assert isinstance(got, GetResult)
    return got.row


def _moved(namespace: str, key: str, now: datetime) -> OperatorWrite:
    row = _read(namespace, key, now)
    if row is None:
        return OperatorWrite(namespace, key, False, why="moved")
    return OperatorWrite(namespace, key, False, 0, row.version, row.value, row.expires_at, why="moved")


def _put_in_txn(
    *, namespace: str, key: str, value_json: str, expect: int, expiry: Expiry, now: datetime, by: str
) -> tuple[KVRow | None, WriteResult, datetime | None]:
    row = _read(namespace, key, now)
    if expiry == "keep":
        ttl = row.expires_at - now if row is not None and row.expires_at is not None else None
    elif expiry == "forever":
        ttl = None
    else:
        ttl = check_ttl(expiry)
    if ttl is not None and ttl <= timedelta(0):
        ttl = timedelta(seconds=1)
    (result,) = kv_call_in_txn([KVPut(namespace, key, value_json, ttl, expect=expect)], now=now, by=by)
    assert isinstance(result, WriteResult)
    return row, result, None if ttl is None else now + ttl


def _audited(
    result: KVResult,
    who: Who,
    now: datetime,
    action: str,
    namespace: str,
    key: str,
    before: KVRow | None,
    *,
    deleted: bool = False,
    expires_at: datetime | None = None,
) -> OperatorWrite:
    """The answer to an operator's compare-and-set write: ``moved`` when it
    did not apply, else the write, audited in its transaction."""
    assert isinstance(result, WriteResult)
    if not result.applied:
        return _moved(namespace, key, now)
    written = None if deleted else result
    who.record_in_txn(
        now=now,
        action=action,
        target=f"{namespace}/{key}",
        before=_snapshot(before),
        after=_snapshot(written, expires_at),
    )
    return OperatorWrite(namespace, key, True, 0 if written is None else written.version)


def kv_operator_edit_in_txn(
    *,
    namespace: str,
    key: str,
    value: Any,
    expect: int,
    expiry: Expiry = "keep",
    who: Who,
    now: datetime | None = None,
) -> OperatorWrite:
    """Put ``value`` at ``key`` only while it is at version ``expect``.

    ``expiry``: ``keep`` the key's expiry, ``forever``, or a new TTL;
    ``who`` is audited. Raises ``KVBadRequest`` for a bad namespace or
    key, the locks' namespace, or a bad TTL; ``KVPayloadTooLarge`` for a
    big value. Runs inside the caller's transaction.
    """
    assert connection.in_atomic_block
    now = now or clock.now()
    namespace, key = check_namespace(namespace), check_key(key)
    _refuse_locks(namespace)
    value_json = check_value_json(db.json_text(value))
    before, result, expires_at = _put_in_txn(
        namespace=namespace, key=key, value_json=value_json, expect=expect, expiry=expiry, now=now, by=who.actor
    )
    return _audited(result, who, now, "kv.edit", namespace, key, before, expires_at=expires_at)


#: ``kv_operator_edit_in_txn`` as its own transaction: must be the outermost call.
kv_operator_edit = transaction.atomic(durable=True)(kv_operator_edit_in_txn)


def kv_operator_delete_in_txn(
    *, namespace: str, key: str, expect: int, who: Who, now: datetime | None = None
) -> OperatorWrite:
    """Delete ``key`` only while it is at version ``expect``, inside the
    caller's transaction; ``who`` is audited. A namespace stored before
    the namespace pattern held is found too (``check_stored_namespace``)."""
    assert connection.in_atomic_block
    now = now or clock.now()
    namespace, key = check_stored_namespace(namespace), check_key(key)
    _refuse_locks(namespace)
    before = _read(namespace, key, now)
    (result,) = kv_call_in_txn([KVDelete(namespace, key, expect=expect)], now=now, by=who.actor)
    return _audited(result, who, now, "kv.delete", namespace, key, before, deleted=True)


#: ``kv_operator_delete_in_txn`` as its own transaction: must be the outermost call.
kv_operator_delete = transaction.atomic(durable=True)(kv_operator_delete_in_txn)


@dataclass(frozen=True)
class Revertible:
    """What a revert of an audit entry would do: put ``value`` back (or
    delete, when ``value_version`` is 0) while the key is at ``expect``."""

    namespace: str
    key: str
    expect: int
    value: Any
    value_version: int
    expires_at: datetime | None


def kv_revertible(entry: AuditEntry) -> Revertible | None:
    """The revert of an operator's KV edit or delete, or None if it has none."""
    if entry.action not in REVERTIBLE or entry.kind != "kv" or "/" not in entry.target:
        return None
    try:
        before, after = json.loads(entry.before), json.loads(entry.after)
        expect, version = int(after["version"]), int(before["version"])
    except (ValueError, KeyError, TypeError):
        return None
    namespace, _, key = entry.target.partition("/")
    expires = before.get("expires_at")
    expires_at = datetime.fromisoformat(expires) if isinstance(expires, str) else None
    return Revertible(namespace, key, expect, before.get("value"), version, expires_at)


@transaction.atomic(durable=True)
def kv_operator_revert(*, entry_id: int, who: Who, now: datetime | None = None) -> OperatorWrite:
    """Undo the KV edit or delete of audit entry ``entry_id``, as a CAS.

    The key gets its value from before the entry back (or is deleted, if it
    did not exist then) only while it is still at the version the entry
    wrote; otherwise the answer is ``moved`` with the current value. The
    old expiry comes back if it is still ahead, else the value is kept for
    good. ``who`` is audited (with a reason naming the entry if it gives
    none). Raises ``NotFound`` for an unknown entry. Outermost call.
    """
    now = now or clock.now()
    entry = AuditEntry.objects.filter(pk=entry_id).first()
    if entry is None:
        raise NotFound(f"audit entry {entry_id} does not exist")
    plan = kv_revertible(entry)
    if plan is None:
        return OperatorWrite("", "", False, why="not_revertible")
    namespace, key = check_namespace(plan.namespace), check_key(plan.key)
    _refuse_locks(namespace)
    before = _read(namespace, key, now)
    expires_at: datetime | None = None
    if plan.value_version == 0:
        (result,) = kv_call_in_txn([KVDelete(namespace, key, expect=plan.expect)], now=now, by=who.actor)
    else:
        ttl = plan.expires_at - now if plan.expires_at is not None and plan.expires_at > now else None
        expires_at = None if ttl is None else now + ttl
        put = KVPut(namespace, key, check_value_json(db.json_text(plan.value)), ttl, expect=plan.expect)
        (result,) = kv_call_in_txn([put], now=now, by=who.actor)
    if not who.reason:
        who = replace(who, reason=f"revert of audit entry {entry_id}")
    deleted = plan.value_version == 0
    return _audited(result, who, now, "kv.revert", namespace, key, before, deleted=deleted, expires_at=expires_at)


@transaction.atomic(durable=True)
def kv_operator_revert_to(
    *, namespace: str, key: str, version: int, expect: int, who: Who, now: datetime | None = None
) -> OperatorWrite:
    """Put back the value of ``key``'s history version ``version`` (delete
    the key, for a delete's version), only while the key is at ``expect``
    (the version on the operator's screen; 0 = absent): a compare-and-set.

    Not applied: ``moved`` with the current value and version, or
    ``not_revertible`` when the version is not kept or kept only as a digest.
    The key's expiry is kept. ``who`` is audited (``kv.revert``, with a
    reason naming the version if it gives none). Raises ``KVBadRequest`` for
    a bad namespace or key, or the locks' namespace. Outermost call.
    """
    now = now or clock.now()
    namespace, key = check_namespace(namespace), check_key(key)
    _refuse_locks(namespace)
    target = history.kv_version(namespace=namespace, key=key, version=version)
    if target is None or (target.op != "delete" and not target.kept):
        return OperatorWrite(namespace, key, False, why="not_revertible")
    if not who.reason:
        who = replace(who, reason=f"revert to version {version}")
    if target.op == "delete":
        before = _read(namespace, key, now)
        (result,) = kv_call_in_txn([KVDelete(namespace, key, expect=expect)], now=now, by=who.actor)
        return _audited(result, who, now, "kv.revert", namespace, key, before, deleted=True)
    value_json = check_value_json(db.json_text(target.value))
    before, result, expires_at = _put_in_txn(
        namespace=namespace, key=key, value_json=value_json, expect=expect, expiry="keep", now=now, by=who.actor
    )
    return _audited(result, who, now, "kv.revert", namespace, key, before, expires_at=expires_at)
