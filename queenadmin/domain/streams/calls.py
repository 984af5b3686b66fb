"""Streams: register a query, run a cycle, apply and read its state.

A cycle's state ops are applied inside its bundle's transaction by
``state.stream_state_apply_in_txn``; ``stream_state_get`` is the read.
Every statement is the store's.
"""

from __future__ import annotations

from collections.abc import Iterable
from uuid import UUID

from django.db import transaction

from queenadmin.domain import clock, queues
from queenadmin.domain import transactions as txn
from queenadmin.domain.streams.ops import (
    Cycle,
    CycleAcked,
    CycleOutcome,
    CyclePushed,
    Registration,
    StreamStateOps,
)
from queenadmin.domain.streams.store import StateFilter, StateRow, store
from queenadmin.domain.tokens import Grants, NotGranted
from queenadmin.models import StreamQuery, TokenScope


def stream_queues(*, query_id: UUID) -> tuple[str, ...]:
    """The stored source and sink queue of the query ``query_id`` (no sink: the
    source alone; an unknown query: none). A read; it locks nothing."""
    row = StreamQuery.objects.filter(pk=query_id).values_list("source_queue", "sink_queue").first()
    return () if row is None else tuple(q for q in row if q)


def stream_require(grants: Grants | None, queues: Iterable[str], need: TokenScope) -> None:
    """Raise ``NotGranted`` unless ``grants`` give ``need`` on each of a stored query's ``queues``.

    A query is reached through every queue it is stored with, whatever the
    body names. The refusal names none of them (nor anything else stored):
    the caller learns only that it may not reach the query it named.
    """
    if grants is not None and not all(grants.allows("queue", queue, need) for queue in queues):
        raise NotGranted(f"no grant of this token gives {need.value} on every queue of the stream query named")


def stream_register(
    *,
    name: str,
    source_queue: str,
    sink_queue: str | None,
    config_hash: str,
    reset: bool,
    grants: Grants | None = None,
) -> Registration:
    """Register the query ``name``, or meet the one registered; outermost.

    A new name gets a row (``fresh``). The same hash updates the queues
    and wipes nothing, ``reset`` or not. A changed hash with ``reset``
    deletes every state row of the query and stores the new hash (the id
    stays); without ``reset`` it answers ``conflict`` and changes nothing.

    ``grants`` (the caller's; None reaches the whole store) must give write
    on the stored source and sink of a registered query, checked under its
    row lock before anything is told or changed: else ``NotGranted``, which
    shows nothing of it (its hash, id and queues stay unknown). The queues
    the body names are the caller's to check before.
    """
    now = clock.now()
    new_id = UUID(queues.uuid7())
    with transaction.atomic(durable=True):
        StreamQuery.objects.bulk_create(
            [
                StreamQuery(
                    id=new_id,
                    name=name,
                    source_queue=source_queue,
                    sink_queue=sink_queue or "",
                    config_hash=config_hash,
                    created_at=now,
                    updated_at=now,
                )
            ],
            ignore_conflicts=True,
        )
        row = StreamQuery.objects.select_for_update().get(name=name)
        if row.id == new_id:
            return Registration(row.id, name, config_hash, fresh=True, reset=False)
        stream_require(grants, (q for q in (row.source_queue, row.sink_queue) if q), TokenScope.WRITE)
        if row.config_hash != config_hash and not reset:
            return Registration(
                row.id, name, config_hash, fresh=False, reset=False, conflict=True, stored_hash=row.config_hash
            )
        wiped = row.config_hash != config_hash
        if wiped:
            store().delete_query(row.id)
        StreamQuery.objects.filter(pk=row.pk).update(
            source_queue=source_queue, sink_queue=sink_queue or "", config_hash=config_hash, updated_at=now
        )
        return Registration(row.id, name, config_hash, fresh=False, reset=wiped)


def stream_cycle(*, cycle: Cycle) -> CycleOutcome:
    """Commit one cycle's state ops, ack and sink pushes, all or nothing; outermost.

    One ``txn_commit`` bundle: the state ops (serialised per query and
    partition), the ack (fenced by its lease; with ``release_lease``
    through the end of the leased batch, as Queen's log engine does, and
    the lease released; without, a gate's partial ack, through
    ``ack.transaction_id`` only, and the lease kept),
    then the pushes (queues and partitions made on first use, a fresh
    message id each, so no dedup). Returns the outcome; a rolled-back cycle
    (unknown query or partition, a stale or repeated ack, a full sink
    queue) is ``success`` false with the reason. Raises
    ``StreamStateTooLarge`` for a key or value over its limit.
    """
    acks: tuple[queues.AckItem, ...] = ()
    if cycle.ack is not None:
        acks = (
            queues.AckItem(
                index=0,
                transaction_id=cycle.ack.transaction_id,
                partition_id=str(cycle.partition_id),
                status="completed",
                lease_id=cycle.ack.lease_id,
                group=cycle.group,
            ),
        )
    bundle = txn.TxnBundle(
        acks=acks,
        pushes=tuple(txn.TxnPush(len(acks) + i, item) for i, item in enumerate(cycle.pushes)),
        stream=StreamStateOps(
            cycle.query_id,
            cycle.partition_id,
            cycle.state_ops,
            release_lease=cycle.ack is not None and cycle.release_lease,
        ),
    )
    outcome = txn.txn_commit(bundle=bundle)
    if not outcome.success:
        return CycleOutcome(False, error=_reason(outcome.error or ""))
    acked: CycleAcked | None = None
    pushed: list[CyclePushed] = []
    for result in outcome.results:
        if isinstance(result, txn.AckDone) and cycle.ack is not None:
            acked = CycleAcked(cycle.ack.count, result.lease_released)
        elif isinstance(result, txn.Pushed):
            pushed.append(CyclePushed(result.message_id, result.transaction_id, result.queue))
    return CycleOutcome(True, len(cycle.state_ops), tuple(pushed), acked)


def _reason(error: str) -> str:
    # The transaction machinery's wording carries its wire prefix ("QTXN ").
    return error.removeprefix("QTXN ").removeprefix("QFULL ")


def stream_state_get(*, query_id: UUID, partition_id: int, which: StateFilter) -> list[StateRow]:
    """The state rows of (query, partition) that ``which`` selects, by key.

    An unknown query or partition has no rows. Never locks.
    """
    return store().read(query_id, partition_id, which)
