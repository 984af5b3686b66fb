"""Applying a KV call: a list of commands as one transaction.

Queen's apply order (its planner, ``rsm/planner/kv.rs``): single-key ops
(``get`` and the writes and checks) sorted by (namespace, key), the
position in the call breaking ties, then the multi-key reads. Every read
answers the state after the writes before it in that order, so:

- a ``get`` sees the call's write of its key when that write comes earlier
  in the call, and the state before the call when it comes later (a call
  writes or checks a key at most once);
- ``getMany`` and ``getPrefix`` come last, so they see every write of the
  call wherever they stand in it.

Results come back in request order.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

from django.db import connection, transaction

from queenadmin.domain import clock, events, names
from queenadmin.domain.kv import group, keep, planner
from queenadmin.domain.kv.ops import (
    LOCKS_NAMESPACE,
    WRITES,
    GetManyResult,
    GetResult,
    KVDelete,
    KVGet,
    KVGetMany,
    KVGetPrefix,
    KVOp,
    KVPut,
    KVResult,
    KVWrite,
    PageResult,
    WriteResult,
    refuse_permit_changes,
)
from queenadmin.domain.kv.store import Store, store
from queenadmin.errors import PreconditionFailed


def kv_call(
    ops: Sequence[KVOp], *, now: datetime | None = None, permits: bool = False, by: str | None = None
) -> list[KVResult]:
    """Apply one KV call; must be the outermost transaction.

    Returns one result per command, in request order. Ordinary outcomes
    (``applied=False`` with its reason) are results; a ``required`` command
    that does not apply raises ``PreconditionFailed`` and nothing is
    written. A command that changes a lock permit raises ``KVBadRequest``
    (``refuse_permit_changes``) unless ``permits``, which only the lock
    operations pass. A read-only call takes no write lock. Where the store
    has ``one_statement_writes`` (PostgreSQL), a lone write that
    ``planner.fast_path_of`` names, or a call of unconditional puts only,
    is one autocommit statement. ``by`` (a token's name, a JWT's ``sub``,
    an operator) is who wrote, kept with each version in the key's history
    (``keep``), which every write keeps in its own statement or
    transaction.
    """
    now = now or clock.now()
    by = None if by is None else names.label_of(by, keep.ACTOR_CHARS)
    the_store = store()
    if not any(isinstance(op, WRITES) for op in ops):
        out: dict[int, KVResult] = {}
        _single_reads(the_store, [(i, op) for i, op in enumerate(ops) if isinstance(op, KVGet)], now, out)
        _multi_reads(the_store, ops, now, out)
        return [out[i] for i in range(len(ops))]
    if not permits:
        refuse_permit_changes(ops)
    if the_store.one_statement_writes and not connection.in_atomic_block:
        if len(ops) == 1:
            fast = _fast(the_store, ops[0], now, by)
            if fast is not None:
                return [fast]
        elif all(isinstance(op, KVPut) and op.expect is None for op in ops):
            return _put_many_fast(the_store, ops, now, by)  # type: ignore[arg-type]
    return _call_atomic(ops, now, by)


@transaction.atomic(durable=True)
def _call_atomic(ops: Sequence[KVOp], now: datetime, by: str | None) -> list[KVResult]:
    # ``kv_call`` has applied the permits' rule already.
    return kv_call_in_txn(ops, now=now, permits=True, by=by)


def kv_call_in_txn(
    ops: Sequence[KVOp], *, now: datetime, permits: bool = False, by: str | None = None
) -> list[KVResult]:
    """Apply a call inside the caller's transaction; the inner form of ``kv_call``.

    For callers that own the transaction (transactions, locks guards).
    Raises ``PreconditionFailed`` (``failed_index`` = the position in
    ``ops``) when a ``required`` command does not apply; the caller must
    then roll back, which the exception leaving ``atomic`` does. Events go
    out only if the caller's transaction commits. A command that changes a
    lock permit raises ``KVBadRequest`` unless ``permits`` (the lock
    operations only), as in ``kv_call``. ``by``: as in ``kv_call``.
    """
    assert connection.in_atomic_block, "kv_call_in_txn needs the caller's transaction"
    by = None if by is None else names.label_of(by, keep.ACTOR_CHARS)
    if not permits:
        refuse_permit_changes(ops)
    the_store = store()
    out: dict[int, KVResult] = {}
    writes: list[tuple[int, KVWrite]] = sorted(
        ((i, op) for i, op in enumerate(ops) if isinstance(op, WRITES)),
        key=lambda item: (item[1].namespace, item[1].key.encode(), item[0]),
    )
    idents = [(op.namespace, op.key) for _, op in writes]
    # A get after the write of its key answers what that write left: it is
    # read after the writes; any other get, with the rows the writes decide on.
    written_at: dict[tuple[str, str], int] = {}
    for i, op in writes:
        written_at.setdefault((op.namespace, op.key), i)
    gets: list[tuple[int, KVGet]] = []
    later_gets: list[tuple[int, KVGet]] = []
    for i, item in enumerate(ops):
        if isinstance(item, KVGet):
            (later_gets if written_at.get((item.namespace, item.key), len(ops)) < i else gets).append((i, item))
    if gets:
        the_store.lock_keys(idents)
        stored = the_store.read_keys(idents + [(op.namespace, op.key) for _, op in gets], now)
    else:
        stored = the_store.lock_and_read(idents, now)
    for i, get in gets:
        found = stored.get((get.namespace, get.key))
        out[i] = GetResult(get.key, found.row if found is not None and found.live else None)
    plan = planner.Plan()
    for i, write in writes:
        planner.decide(i, write, stored.get((write.namespace, write.key)), now, plan)
    if plan.failed is not None:
        position, failed = plan.failed
        raise PreconditionFailed(
            failed_index=position,
            kv_reason=failed.reason or "version",
            version=failed.version,
            value=failed.value,
        )
    the_store.delete_pks(plan.deletes)
    the_store.stamp_and_write([u for _, _, u, _ in plan.upserts], now, by=by)
    the_store.keep_deletes(plan.tombstones, now, by=by)
    for position, write, upsert, value in plan.upserts:
        plan.results[position] = WriteResult(write.name, True, write.key, value, upsert.version)
    out.update(plan.results)
    _single_reads(the_store, later_gets, now, out)
    _multi_reads(the_store, ops, now, out)
    if plan.upserts or plan.deletes:
        _changed(sorted({op.namespace for _, op in writes}))
    return [out[i] for i in range(len(ops))]


def _fast(the_store: Store, op: KVOp, now: datetime, by: str | None) -> WriteResult | None:
    """The one-statement answer of a lone write, or None to plan it.

    Concurrent lone writes of this process share one statement and one
    commit (``group``); each is answered only after that commit.
    """
    kind = planner.fast_path_of(op)
    if kind is None:
        return None
    assert isinstance(op, KVPut | KVDelete)
    written = group.write(the_store, kind, op, now, by)
    if written is None:
        # A conditional form whose condition failed: the planner answers why.
        return None
    version, value_json = written
    _changed([op.namespace], committed=True)
    return WriteResult(op.name, True, op.key, json.loads(value_json), version)


def _put_many_fast(the_store: Store, ops: Sequence[KVPut], now: datetime, by: str | None) -> list[KVResult]:
    versions = the_store.put_many_fast(ops, now, by)
    _changed(sorted({op.namespace for op in ops}), committed=True)
    return [
        WriteResult(op.name, True, op.key, json.loads(op.value_json), versions[(op.namespace, op.key)]) for op in ops
    ]


def _changed(namespaces: list[str], *, committed: bool = False) -> None:
    """Tell the dashboards; ``committed``: the write was an autocommit
    statement that returned, so there is no commit left to wait for."""
    broadcast = events.broadcast_committed if committed else events.broadcast_on_commit
    broadcast(events.KV_GROUP, {"type": "kv.changed", "namespaces": namespaces})
    if LOCKS_NAMESPACE in namespaces:
        broadcast(events.LOCKS_GROUP, {"type": "lock.changed"})


def _single_reads(the_store: Store, gets: list[tuple[int, KVGet]], now: datetime, out: dict[int, KVResult]) -> None:
    """Answer ``gets`` (position, command) from the rows as they are now."""
    if gets:
        stored = the_store.read_keys(((op.namespace, op.key) for _, op in gets), now)
        for i, op in gets:
            found = stored.get((op.namespace, op.key))
            out[i] = GetResult(op.key, found.row if found is not None and found.live else None)


def _multi_reads(the_store: Store, ops: Sequence[KVOp], now: datetime, out: dict[int, KVResult]) -> None:
    for i, op in enumerate(ops):
        if isinstance(op, KVGetMany):
            stored = the_store.read_keys(((op.namespace, k) for k in op.keys), now)
            rows = sorted((s.row for s in stored.values() if s.live), key=lambda r: r.key.encode())
            present = {r.key for r in rows}
            missing = tuple(k for k in op.keys if k not in present)
            out[i] = GetManyResult(tuple(rows), missing, False)
        elif isinstance(op, KVGetPrefix):
            rows_page, truncated, next_after = the_store.read_page(
                namespace=op.namespace, prefix=op.prefix, after=op.after, limit=op.limit, now=now
            )
            out[i] = PageResult(rows_page, truncated, next_after, op.keys_only)
