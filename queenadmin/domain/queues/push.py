"""Push: append messages to partitions, with dedup, in one transaction.

The decisions (dedup, offsets, ``maxSize``) are here; the statements that
find, lock and write the rows are the queue store's (``store/``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Literal

from django.db import connection, transaction

from queenadmin.domain import clock, events
from queenadmin.domain.names import check_engine_name
from queenadmin.domain.queues import wakeups
from queenadmin.domain.queues.ids import uuid7s
from queenadmin.domain.queues.options import AUTO_CREATE_OPTIONS, inferred_namespace_task
from queenadmin.domain.queues.refs import QueueRef
from queenadmin.domain.queues.stats import queue_pending
from queenadmin.domain.queues.store import Append, store
from queenadmin.domain.queues.store.base import LonePush, MessageRow, RecentRow
from queenadmin.errors import QueueBusy, QueueFull
from queenadmin.models.queues import NEVER_LOGGED, DeadLetter, Partition, Queue
from queenadmin.plumbing.shapes import quick_init

#: The partition of a push that names none.
DEFAULT_PARTITION = "Default"


@quick_init
@dataclass(frozen=True)
class PushItem:
    """One message to append.

    Names are checked by whoever builds the item (the wire parser checks
    the protocol's shape and key budget).
    """

    queue: str
    partition: str
    #: The payload as compact JSON text (``db.json_text``), stored verbatim.
    payload_json: str
    #: The dedup key; None means "use the minted message id".
    transaction_id: str | None = None
    trace_id: str | None = None
    #: The id the message gets; None mints a UUIDv7. Timers pass the id they
    #: promised at schedule time.
    message_id: str | None = None
    #: Who pushes it, when the items of one call differ (a timer's fire: its
    #: scheduler); None takes the call's ``producer_sub``.
    producer_sub: str | None = None


@quick_init
@dataclass(frozen=True)
class PushResult:
    """What became of the item at ``index`` of the push.

    ``failed``: the queue's ``maxSize`` refused it (``error`` says why);
    nothing of it was written, ``message_id`` is ``""`` and ``offset``
    ``NEVER_LOGGED`` (the wire shows none).
    """

    index: int
    message_id: str
    transaction_id: str
    queue: str
    status: Literal["queued", "duplicate", "failed"]
    offset: int
    error: str | None = None


def queue_push(*, items: Sequence[PushItem], producer_sub: str | None = None) -> list[PushResult]:
    """Append ``items`` in order; return one result per item, index-aligned.

    ``producer_sub`` is the caller's identity (a JWT's ``sub``, our token's
    name), stored with each message whose item names none (``producerSub``).

    Queues and partitions are created on first use. An item whose
    (queue, partition, transactionId) is already in the log inside the
    queue's ``dedupWindowSeconds``, or earlier in the same call, answers
    ``duplicate`` with the original message id and offset. The items of a
    queue whose ``maxSize`` they would overflow answer ``failed`` and are
    not written; the other queues' items are (Queen's push answer). Must
    be the outermost transaction (``queue_push_in_txn`` runs inside one).
    Where the store has ``pushes_one_committed`` (PostgreSQL), a push of
    one item to a queue and partition that exist is one autocommit
    statement (``_push_one_committed``).
    """
    if len(items) == 1 and not connection.in_atomic_block and store().pushes_one_committed:
        pushed = _push_one_committed(items[0], producer_sub)
        if pushed is not None:
            return [pushed]
    return _push_atomic(items, producer_sub)


@transaction.atomic(durable=True)
def _push_atomic(items: Sequence[PushItem], producer_sub: str | None) -> list[PushResult]:
    return queue_push_in_txn(items=items, now=clock.now(), partial=True, producer_sub=producer_sub)


def _push_one_committed(item: PushItem, producer_sub: str | None) -> PushResult | None:
    """``queue_push`` of ``item`` alone, committed when it returns; None,
    nothing written, for the cases the transactional path must take."""
    mid = uuid7s(1)[0] if item.message_id is None else item.message_id
    txn = item.transaction_id if item.transaction_id is not None else mid
    sub = producer_sub if item.producer_sub is None else item.producer_sub
    push = LonePush(
        queue=item.queue,
        partition=item.partition,
        transaction_id=txn,
        dedup=item.transaction_id is not None,
        message_id=mid,
        payload_json=item.payload_json,
        trace_id=item.trace_id,
        now=clock.now(),
        producer_sub=sub,
    )
    done = store().push_one_committed(push)
    if done is None:
        return None
    if done.outcome == "duplicate":
        return PushResult(0, done.message_id, txn, item.queue, "duplicate", done.offset)
    # The statement committed, its NOTIFY with it: what ``notify_on_commit``
    # and ``broadcast_on_commit`` would run on commit runs now.
    wakeups.hub.wake_threadsafe([item.queue])
    events.broadcast_committed(events.QUEUES_GROUP, {"type": "queues.changed", "queues": [item.queue]})
    return PushResult(0, done.message_id, txn, item.queue, "queued", done.offset)


#: Tries at reading, creating and locking the queues of a push before it
#: answers ``QueueBusy``: each try loses only to a delete that committed
#: in between, so more than a few means the queue is being deleted in a loop.
_ENSURE_TRIES = 10


def _read_and_lock_queues(names: list[str]) -> dict[str, QueueRef]:
    """The queues of ``names`` that exist, their rows locked (``lock_queue_rows``)."""
    if not names:
        return {}
    return {n: QueueRef(i, n, o) for n, i, o in store().lock_queues_by_name(names)}


def _ensure_queues(names: Iterable[str], now: datetime) -> dict[str, QueueRef]:
    """The queues named, created when missing, each row locked (``lock_queue_rows``)."""
    wanted = sorted(set(names))
    found: dict[str, QueueRef] = {}
    created: list[str] = []
    for _try in range(_ENSURE_TRIES):
        # A queue deleted since the read counts as missing: the push creates it anew.
        found.update(_read_and_lock_queues([n for n in wanted if n not in found]))
        missing = [n for n in wanted if n not in found]
        for name in missing:
            # The floor under every caller (push, transactions, timers'
            # fires, streams' sinks): a new queue keeps the rule of names.
            check_engine_name(name, "queue")
        if not missing:
            if created:
                events.broadcast_on_commit(events.QUEUES_GROUP, {"type": "queues.changed", "created": created})
            return found
        Queue.objects.bulk_create(
            [
                Queue(
                    name=n,
                    namespace=inferred_namespace_task(n)[0],
                    task=inferred_namespace_task(n)[1],
                    options=dict(AUTO_CREATE_OPTIONS),
                    created_at=now,
                )
                for n in missing
            ],
            ignore_conflicts=True,
        )
        created.extend(n for n in missing if n not in created)
    raise QueueBusy(f"queue {missing[0]!r} is being deleted over and over; retry the push")


def _ensure_partitions(pairs: set[tuple[int, str]], now: datetime) -> dict[tuple[int, str], int]:
    queue_ids = {q for q, _ in pairs}
    names = {n for _, n in pairs}
    rows = Partition.objects.filter(queue_id__in=queue_ids, name__in=names).values_list("queue_id", "name", "id")
    found = {(q, n): i for q, n, i in rows if (q, n) in pairs}
    missing = pairs - found.keys()
    for _queue, name in missing:
        check_engine_name(name, "partition")
    if missing:
        Partition.objects.bulk_create(
            [Partition(queue_id=q, name=n, created_at=now) for q, n in sorted(missing)],
            ignore_conflicts=True,
        )
        created = Partition.objects.filter(queue_id__in={q for q, _ in missing}, name__in={n for _, n in missing})
        for q, n, i in created.values_list("queue_id", "name", "id"):
            if (q, n) in missing:
                found[(q, n)] = i
    return found


def _lock_partitions(ids: list[int]) -> dict[int, int]:
    """Lock the partitions (by id, so no deadlocks) and read next offsets.

    ``FOR NO KEY UPDATE``, not ``FOR UPDATE``: a push changes no key of the
    row, and the weaker lock leaves the ``FOR KEY SHARE`` that foreign-key
    checks take free. Those checks run at COMMIT (Django's constraints are
    deferred), so a claim inserting a cursor or an ack filing a dead letter
    would otherwise wait on a push at its commit while the push waited on
    it: a deadlock, measured with pushes, claims and acks on one queue.
    """
    return store().lock_partitions(ids)


def _recent_of(
    rows: list[RecentRow], pairs: set[tuple[int, str]], cutoffs: dict[int, datetime]
) -> dict[tuple[int, str], tuple[str, int]]:
    """The originals of (partition, transactionId) ``pairs`` among ``rows``
    read from the log: only rows newer than their partition's cutoff
    count; the earliest wins."""
    found: dict[tuple[int, str], tuple[str, int]] = {}
    for pid, txn, mid, offset, created_at in rows:
        key = (pid, txn)
        if key not in pairs or created_at <= cutoffs[pid]:
            continue
        if key not in found or offset < found[key][1]:
            found[key] = (mid, offset)
    return found


_Located = tuple[dict[str, QueueRef], dict[tuple[int, str], int], dict[int, int]]


def _locate(items: Sequence[PushItem]) -> _Located | None:
    """The queues, partition ids and next offsets of ``items`` in one statement.

    None when a queue or partition is missing, or a queue is capped: the
    caller then takes the general path (which creates what is missing).
    Where the store locks rows, the partitions are locked as
    ``_lock_partitions`` does.
    """
    pairs = sorted({(i.queue, i.partition) for i in items})
    rows = store().locate(pairs)
    if rows is None:
        return None
    queues: dict[str, QueueRef] = {}
    partitions: dict[tuple[int, str], int] = {}
    next_offsets: dict[int, int] = {}
    for qname, qid, options, pname, pid, next_offset in rows:
        if qname not in queues:
            queues[qname] = QueueRef(qid, qname, options)
        if pid is not None and pname is not None and next_offset is not None:
            partitions[(qid, pname)] = pid
            next_offsets[pid] = next_offset
    for qname, pname in pairs:
        ref = queues.get(qname)
        if ref is None or ref.max_size or (ref.id, pname) not in partitions:
            return None
    return queues, partitions, next_offsets


def _full_queues(queues: dict[str, QueueRef], items: Sequence[PushItem], now: datetime) -> dict[str, str]:
    """The queues whose ``maxSize`` the items would overflow, with the reason.

    Capped queues are checked one at a time under a lock that only capped
    pushes take (a transaction advisory lock per queue, in id order, after
    the queue rows and before any partition row, so the lock order stays
    the one every writer follows): two pushes cannot both fit into the
    last free places. The depth is arithmetic (``queue_pending``); like
    Queen, the batch counts every item sent to the queue.
    """
    batches: dict[str, int] = {}
    for item in items:
        if queues[item.queue].max_size:
            batches[item.queue] = batches.get(item.queue, 0) + 1
    full: dict[str, str] = {}
    for name in sorted(batches, key=lambda n: queues[n].id):
        ref = queues[name]
        store().lock_capped_queue(ref.id)
        current = queue_pending(queue_id=ref.id, now=now)
        if current + batches[name] > ref.max_size:
            full[name] = (
                f"Queue '{name}' would exceed max capacity ({ref.max_size}). Current: {current}, Batch: {batches[name]}"
            )
    return full


def queue_push_in_txn(
    *, items: Sequence[PushItem], now: datetime, partial: bool = False, producer_sub: str | None = None
) -> list[PushResult]:
    """``queue_push`` inside the caller's transaction, at time ``now``.

    Same outcomes as ``queue_push``, but for a queue's ``maxSize``: it
    raises ``QueueFull`` (nothing written) unless ``partial`` asks for
    ``failed`` answers beside the written items, as ``queue_push`` does.
    The caller must hold an open transaction (asserted) and commit it: the
    partitions stay row-locked until then, and wake-ups and broadcasts go
    out only on commit.
    """
    assert connection.in_atomic_block
    if not items:
        return []
    located = _locate(items)
    if located is not None:
        queues, partitions, next_offsets = located
        return _append(items, queues, partitions, next_offsets, now, producer_sub)
    queues = _ensure_queues((i.queue for i in items), now)
    full = _full_queues(queues, items, now) if any(q.max_size for q in queues.values()) else {}
    if full and not partial:
        raise QueueFull(next(iter(full.values())))
    if full:
        kept = [item for item in items if item.queue not in full]
        written = iter(queue_push_in_txn(items=kept, now=now, producer_sub=producer_sub) if kept else [])
        results: list[PushResult] = []
        for index, item in enumerate(items):
            if item.queue in full:
                # Like Queen, a refused item without a transactionId gets one minted.
                tid = item.transaction_id if item.transaction_id is not None else uuid7s(1)[0]
                results.append(PushResult(index, "", tid, item.queue, "failed", NEVER_LOGGED, full[item.queue]))
            else:
                results.append(replace(next(written), index=index))
        return results
    pairs = {(queues[i.queue].id, i.partition) for i in items}
    partitions = _ensure_partitions(pairs, now)
    next_offsets = _lock_partitions(sorted(set(partitions.values())))
    return _append(items, queues, partitions, next_offsets, now, producer_sub)


def _append(
    items: Sequence[PushItem],
    queues: dict[str, QueueRef],
    partitions: dict[tuple[int, str], int],
    next_offsets: dict[int, int],
    now: datetime,
    producer_sub: str | None,
) -> list[PushResult]:
    """Dedup and write ``items`` to their partitions, locked and read by the caller."""
    if len(items) == 1 and store().appends_one:
        return [_append_one(items[0], queues[items[0].queue], partitions, next_offsets, now, producer_sub)]
    # Per (queue, partition) of the items, once: the partition and its
    # dedup cutoff (None: no dedup). A push's items share a few of them.
    where: dict[tuple[str, str], tuple[int, datetime | None]] = {}
    for item in items:
        key = (item.queue, item.partition)
        if key not in where:
            queue = queues[item.queue]
            window = queue.dedup_window_seconds
            cutoff = now - timedelta(seconds=window) if window > 0 else None
            where[key] = (partitions[(queue.id, item.partition)], cutoff)
    pids = [where[(item.queue, item.partition)] for item in items]
    cutoffs: dict[int, datetime] = {}
    wanted: set[tuple[int, str]] = set()
    for item, (pid, cutoff) in zip(items, pids, strict=True):
        if cutoff is not None and item.transaction_id is not None:
            cutoffs[pid] = cutoff
            wanted.add((pid, item.transaction_id))
    originals: dict[tuple[int, str], tuple[str, int]] = {}
    rows, results, moves, names = _plan(items, pids, cutoffs, originals, dict(next_offsets), producer_sub)
    if wanted and rows:
        # Written as planned unless the log holds a transactionId of the
        # push: the dedup read and the write are one statement, and a push
        # without duplicates (the usual one) is done in it. Otherwise the
        # plan is made again with the originals found.
        found = store().write_new_messages(rows, moves, now, names, sorted(wanted), min(cutoffs.values()))
        if found:
            originals = _recent_of(found, wanted, cutoffs)
            rows, results, moves, names = _plan(items, pids, cutoffs, originals, dict(next_offsets), producer_sub)
            if rows:
                store().write_messages(rows, moves, now, names)
    elif rows:
        store().write_messages(rows, moves, now, names)
    if rows:
        queue_appended_in_txn(queues=names)
    return results


def queue_appended_in_txn(*, queues: Sequence[str]) -> None:
    """Wake the pops of ``queues`` and tell the dashboards, on commit, after
    a store statement of the caller's transaction appended messages to them
    and sent their NOTIFY (a push's write, or ``append_from_sql``: timers'
    fire). Inside the caller's transaction (asserted)."""
    assert connection.in_atomic_block
    names = sorted(set(queues))
    if not names:
        return
    wakeups.notify_on_commit(names, notified=True)
    events.broadcast_on_commit(events.QUEUES_GROUP, {"type": "queues.changed", "queues": names[:20]})


_Plan = tuple[list[MessageRow], list[PushResult], dict[int, tuple[int, int]], list[str]]


def _plan(
    items: Sequence[PushItem],
    pids: list[tuple[int, datetime | None]],
    cutoffs: dict[int, datetime],
    originals: dict[tuple[int, str], tuple[str, int]],
    next_offsets: dict[int, int],
    producer_sub: str | None,
) -> _Plan:
    """The rows to write, the answers, each touched partition's (next
    offset, added bytes) and the queues written to, given the ``originals``
    already in the log (extended with the call's own; ``next_offsets`` is
    moved past the rows)."""
    fresh = iter(uuid7s(len(items)))
    results: list[PushResult] = []
    rows: list[MessageRow] = []
    sizes: dict[int, int] = {}
    queued: set[str] = set()
    for index, (item, (pid, _)) in enumerate(zip(items, pids, strict=True)):
        txn = item.transaction_id
        if txn is not None and pid in cutoffs and (pid, txn) in originals:
            mid, offset = originals[(pid, txn)]
            results.append(PushResult(index, mid, txn, item.queue, "duplicate", offset))
            continue
        mid = next(fresh) if item.message_id is None else item.message_id
        txn = txn if txn is not None else mid
        offset = next_offsets[pid]
        next_offsets[pid] = offset + 1
        if pid in cutoffs:
            originals[(pid, txn)] = (mid, offset)
        sub = producer_sub if item.producer_sub is None else item.producer_sub
        text = item.payload_json
        rows.append((pid, offset, txn, mid, text, item.trace_id, sub))
        sizes[pid] = sizes.get(pid, 0) + (len(text) if text.isascii() else len(text.encode()))
        queued.add(item.queue)
        results.append(PushResult(index, mid, txn, item.queue, "queued", offset))
    moves = {p: (next_offsets[p], sizes[p]) for p in sorted(sizes)}
    return rows, results, moves, sorted(queued)


def _append_one(
    item: PushItem,
    queue: QueueRef,
    partitions: dict[tuple[int, str], int],
    next_offsets: dict[int, int],
    now: datetime,
    producer_sub: str | None,
) -> PushResult:
    pid = partitions[(queue.id, item.partition)]
    window = queue.dedup_window_seconds
    txn = item.transaction_id
    cutoff = now - timedelta(seconds=window) if window > 0 and txn is not None else None
    mid = uuid7s(1)[0] if item.message_id is None else item.message_id
    txn = txn if txn is not None else mid
    offset = next_offsets[pid]
    sub = producer_sub if item.producer_sub is None else item.producer_sub
    append = Append(pid, txn, cutoff, offset, mid, item.payload_json, item.trace_id, item.queue, now, sub)
    duplicate = store().append_one(append)
    if duplicate is not None:
        return PushResult(0, duplicate[0], txn, item.queue, "duplicate", duplicate[1])
    queue_appended_in_txn(queues=[item.queue])
    return PushResult(0, mid, txn, item.queue, "queued", offset)


def queue_dead_letter_in_txn(
    *,
    queue: str,
    partition: str,
    group: str,
    transaction_id: str,
    message_id: str,
    payload_json: str,
    error: str,
    retry_count: int,
    now: datetime,
    producer_sub: str | None = None,
) -> None:
    """File a message that never reached the log in its queue's DLQ.

    Its offset is ``NEVER_LOGGED`` (-1): offsets start at 0, so it names no
    message of the partition.

    Creates the queue and partition when missing, so the dead letter can be
    found where the message was going. For timers that exhausted their
    attempts. Inside the caller's transaction (asserted).
    """
    assert connection.in_atomic_block
    ref = _ensure_queues([queue], now)[queue]
    pid = _ensure_partitions({(ref.id, partition)}, now)[(ref.id, partition)]
    DeadLetter.objects.create(
        queue_id=ref.id,
        partition_id=pid,
        group=group,
        offset=NEVER_LOGGED,
        transaction_id=transaction_id,
        message_id=message_id,
        payload=payload_json,
        error=error,
        retry_count=retry_count,
        producer_sub=producer_sub,
        created_at=now,
        failed_at=now,
    )
