"""An operator's recovery of a stalled queue: a consumer group's seek,
reset and delete, and a queue purge.

Each writes its audit entry (``audit.Who``) in the transaction of the
change, so an entry exists exactly when the change committed. The group
actions are ``groups``' writes (the wire API's), with the group's position
before and after in the entry; they refuse a group the queue does not
have, so a mistyped name neither creates nor "moves" anything.

A purge deletes every message stored in the queue's partitions, like
retention does (each partition's log start moves up to its end), and keeps
the queue, its options, its consumer groups and its dead letters (the DLQ
has its own purge). A group's cursor below the new log start reads on from
there: the purge moves it up at once (skipped, not completed), and a
leased batch that is gone is handed back. It runs in bounded steps, one short
transaction of at most ``batch`` messages each (a large queue never holds
its partitions for long), each step with its own audit entry; a caller
goes on while ``more`` is true, from ``resume_at``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from django.db import connection, transaction
from django.db.models import F, Q

from queenadmin.domain import clock, events
from queenadmin.domain.audit import Who
from queenadmin.domain.queues import groups, wakeups
from queenadmin.domain.queues.board import has_nul
from queenadmin.domain.queues.delivery import runs_trim
from queenadmin.domain.queues.refs import lock_queue_rows
from queenadmin.domain.queues.store import store
from queenadmin.errors import InvalidArgument, NotFound, QueueNotFound
from queenadmin.models.queues import QUEUE_MODE, ConsumerCursor, ConsumerGroup, Partition, Queue

#: Where a seek puts a group: before the first stored message, past the
#: last, or after the last message pushed at or before a time.
SeekTo = Literal["start", "end", "time"]
GroupAction = Literal["seek", "reset", "delete"]

#: Messages one purge step deletes (one transaction).
PURGE_BATCH = 5_000
#: Earlier than any push: a seek to it puts a cursor at -1 (nothing done).
_BEFORE_ANY = datetime(1970, 1, 1, tzinfo=UTC)
#: Partitions named in an audit entry.
_NAMED = 20


@dataclass(frozen=True)
class GroupRecovery:
    """What a group action did: ``cursors`` cursor rows moved or deleted,
    and the group's lag (messages not done, every partition) before and after."""

    queue: str
    group: str
    action: GroupAction
    cursors: int
    lag_before: int
    lag_after: int


@dataclass(frozen=True)
class QueuePurge:
    """One purge step: ``deleted`` messages; ``more`` from partition ``resume_at``."""

    queue: str
    deleted: int
    more: bool
    resume_at: int | None


def _queue_id(queue: str) -> int:
    """The queue's id, its row locked as every writer of its rows takes it."""
    found = None if has_nul(queue) else Queue.objects.filter(name=queue).values_list("id", flat=True).first()
    if found is None or not lock_queue_rows([found]):
        raise QueueNotFound(f"no queue {queue}")
    return found


def _check_group(queue_id: int, queue: str, group: str) -> None:
    known = not has_nul(group) and (
        ConsumerGroup.objects.filter(queue_id=queue_id, name=group).exists()
        or ConsumerCursor.objects.filter(partition__queue_id=queue_id, group=group).exists()
    )
    if not known:
        raise NotFound(f"no consumer group {group} on queue {queue}")


def _positions(queue_id: int, group: str) -> tuple[int, str]:
    """The group's lag on the queue and where it stands, as an audit entry says it."""
    rows = list(
        ConsumerCursor.objects.filter(partition__queue_id=queue_id, group=group)
        .order_by("partition__name")
        .values_list("partition__name", "committed_offset", "partition__next_offset", "partition__log_start")
    )
    lag = sum(max(0, nxt - 1 - max(done, start - 1)) for _, done, nxt, start in rows)
    where = ", ".join(f"{name}@{done}" for name, done, _, _ in rows[:_NAMED])
    more = f" (+{len(rows) - _NAMED} partitions)" if len(rows) > _NAMED else ""
    return lag, f"lag {lag}; done up to {where or 'nothing'}{more}"


def queue_group_operator_in_txn(
    *,
    queue: str,
    group: str,
    action: GroupAction,
    who: Who,
    to: SeekTo = "start",
    at: datetime | None = None,
    now: datetime | None = None,
) -> GroupRecovery:
    """An operator's ``action`` on consumer group ``group`` of ``queue``.

    ``seek`` moves the group on every partition: ``to="start"`` before the
    first stored message (it reads the queue again), ``"end"`` past the
    last (it skips what is there), ``"time"`` after the last message pushed
    at or before ``at``. ``reset`` puts each cursor back where the group
    started (its subscription start), keeping the group. ``delete``
    forgets the group on the queue (cursors and registration): its next
    pop registers it anew. Each releases the group's leases: a consumer
    holding one gets ``invalid or expired lease`` on its ack.

    Writes ``who``'s audit entry (``queue.group_<action>``) with the
    group's position before and after. Raises ``QueueNotFound``,
    ``NotFound`` for a group the queue does not have, and
    ``InvalidArgument`` for a time seek without ``at``. Runs inside the
    caller's transaction (asserted).
    """
    assert connection.in_atomic_block
    now = now or clock.now()
    if action == "seek" and to == "time" and at is None:
        raise InvalidArgument("a seek to a time needs the time")
    qid = _queue_id(queue)
    _check_group(qid, queue, group)
    lag_before, before = _positions(qid, group)
    if action == "seek":
        # Before the first message: a cursor at -1 reads from the log start.
        moment = _BEFORE_ANY if to == "start" else at
        moved = groups.queue_group_seek_in_txn(
            group=group, queue=queue, to_end=to == "end", timestamp=moment, now=now
        ).partitions
        what = {"start": "to the start", "end": "to the end", "time": f"to {at.isoformat() if at else ''}"}[to]
    else:
        moved = groups.queue_group_delete_in_txn(
            group=group, queue=queue, delete_metadata=action == "delete", now=now
        ).cursors
        what = "to its subscription start" if action == "reset" else "deleted"
    lag_after, after = _positions(qid, group)
    if action == "delete":
        after = "deleted: its next pop registers it anew"
    label = "queue mode" if group == QUEUE_MODE else group
    who.record_in_txn(
        now=now,
        action=f"queue.group_{action}",
        target=f"{queue}/{label}",
        before=before,
        after=f"{what}, {moved} partitions: {after}",
    )
    return GroupRecovery(queue, group, action, moved, lag_before, lag_after if action != "delete" else 0)


#: ``queue_group_operator_in_txn`` as its own transaction: must be the outermost call.
queue_group_operator = transaction.atomic(durable=True)(queue_group_operator_in_txn)


def queue_purge_in_txn(
    *, queue: str, who: Who, resume_at: int | None = None, batch: int = PURGE_BATCH, now: datetime | None = None
) -> QueuePurge:
    """Delete up to ``batch`` of the messages stored in ``queue``.

    Partitions go in id order from ``resume_at`` (None: the first); each
    is cut up to its end as it stands in this transaction. Returns what was
    deleted and whether (and from which partition) to go on; writes
    ``who``'s audit entry (``queue.purge``) when something was deleted.
    The step waits for its first partition (a push holds it briefly) and
    never for another: a busy one ends the step there, so a purge holds
    one partition while it waits and cannot close a cycle with a
    transaction that acks and then pushes. Cursors are only moved, never
    waited for. Raises ``QueueNotFound``. Runs inside the caller's
    transaction (asserted).
    """
    assert connection.in_atomic_block
    now = now or clock.now()
    qid = _queue_id(queue)
    the_store = store()
    parts = Partition.objects.filter(queue_id=qid).filter(Q(id__gte=resume_at or 0)).order_by("id")
    budget = max(1, batch)
    deleted = 0
    touched: list[str] = []
    first = True
    for pid, name in parts.values_list("id", "name"):
        if budget <= 0:
            return _purged(queue, who, now, deleted, touched, pid)
        locked = Partition.objects.filter(pk=pid).select_for_update(skip_locked=not first)
        row = locked.values_list("log_start", "next_offset").first()
        if row is None:
            if first:
                continue  # Deleted meanwhile.
            return _purged(queue, who, now, deleted, touched, pid)  # Busy: the next step waits for it.
        first = False
        log_start, next_offset = row
        if log_start >= next_offset:
            continue
        high = min(next_offset - 1, log_start + budget - 1)
        sizes = the_store.message_sizes(partition_id=pid, first=log_start, last=high)
        cut = the_store.cut_log(
            partition_id=pid, log_start=log_start, boundary=high + 1, freed_bytes=sum(n for _, _, n in sizes)
        )
        if cut is None:
            raise QueueNotFound(f"queue {queue} changed under the purge; try again")
        deleted += cut
        budget -= high + 1 - log_start
        touched.append(name)
        _pass_purged(pid, high, now)
        if high < next_offset - 1:
            return _purged(queue, who, now, deleted, touched, pid)
    return _purged(queue, who, now, deleted, touched, None)


def _pass_purged(pid: int, upto: int, now: datetime) -> None:
    """Move the partition's free cursors below ``upto`` (the last purged
    offset) to it, as their next claim would: skipped, not completed, so
    the subscription start moves too, and a leased batch entirely purged is
    handed back. Done now, so depth and lag read right at once (they are
    arithmetic on offsets). A consumer without a cursor makes none here
    (an insert could wait for a claim's): its next claim reads from the
    log start, and the board counts from there."""
    # Cursors a claim or an ack holds are skipped, never waited for (as
    # retention does): a transaction that acks, then pushes to this
    # partition, would wait for the partition row held here (a deadlock).
    # A skipped one reads on from the log start at its next claim anyway.
    free = list(
        ConsumerCursor.objects.filter(partition_id=pid, committed_offset__lt=upto)
        .select_for_update(skip_locked=True)
        .values_list("id", flat=True)
    )
    # A leased batch that is gone would hold the partition until its lease
    # ran out (its acks find nothing): hand it back.
    ConsumerCursor.objects.filter(id__in=free, lease_id__isnull=False, batch_last__lte=upto).update(
        lease_id=None, leased_until=None
    )
    behind = (
        ConsumerCursor.objects.filter(id__in=free)
        .exclude(lease_id__isnull=False, leased_until__gt=now)
        .values_list("id", "committed_offset", "delivery_runs")
    )
    for cid, committed, runs in behind:
        # Compare-and-set on the committed offset: SQLite ignores FOR UPDATE.
        ConsumerCursor.objects.filter(pk=cid, committed_offset=committed).update(
            committed_offset=upto,
            start_offset=F("start_offset") + (upto - committed),
            batch_last=upto,
            lease_id=None,
            leased_until=None,
            retry_count=0,
            delivery_runs=runs_trim(runs, upto),
        )


def _purged(queue: str, who: Who, now: datetime, deleted: int, touched: list[str], resume: int | None) -> QueuePurge:
    if touched:
        names = ", ".join(touched[:_NAMED]) + (f" (+{len(touched) - _NAMED})" if len(touched) > _NAMED else "")
        who.record_in_txn(
            now=now,
            action="queue.purge",
            target=queue,
            before=f"{deleted} messages stored in partitions {names}",
            after="deleted; consumer groups read on from what is pushed next" + ("; more to purge" if resume else ""),
        )
        wakeups.notify_on_commit([queue])
        events.broadcast_on_commit(events.QUEUES_GROUP, {"type": "queues.changed", "queues": [queue]})
    return QueuePurge(queue, deleted, resume is not None, resume)


#: ``queue_purge_in_txn`` as its own transaction: must be the outermost call.
queue_purge = transaction.atomic(durable=True)(queue_purge_in_txn)
