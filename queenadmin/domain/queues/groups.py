"""Consumer-group writes an operator makes: delete, seek, re-subscribe.

Each takes its queue rows first (``lock_queue_rows``, in id order) and then
the group's cursor rows (``FOR UPDATE``, by partition), the order a claim
and an ack use, so none of them deadlocks with consumers. A moved cursor
releases its lease: a consumer holding it then gets ``invalid or expired
lease`` on its ack, and the next pop reads from the new position.

Given a ``who`` (the API's caller, ``api/audit.py``), each records its
audit entry in its transaction, one per queue it changed (``<queue>/<group>``,
as the dashboard's group actions name theirs), so a queue's trail holds a
change made on every queue at once; a group never seen changes nothing and
records nothing. The dashboard's actions (``operator/recovery.py``) call
the ``_in_txn`` forms without ``who`` and record their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import connection, transaction
from django.db.models import Count, F, Q

from queenadmin.domain import clock, events
from queenadmin.domain.audit import Who
from queenadmin.domain.queues import wakeups
from queenadmin.domain.queues.refs import lock_queue_rows
from queenadmin.models.queues import QUEUE_MODE, ConsumerCursor, ConsumerGroup, Message, Partition, Queue


@dataclass(frozen=True)
class GroupDeleted:
    """``cursors`` cursor rows were deleted (or rewound, metadata kept)."""

    group: str
    queue: str | None
    cursors: int
    metadata_deleted: bool


@dataclass(frozen=True)
class GroupSeek:
    """``partitions`` cursors of ``group`` on ``queue`` were moved."""

    group: str
    queue: str
    to_end: bool
    timestamp: datetime | None
    partitions: int


@dataclass(frozen=True)
class GroupResubscribed:
    """``queues`` registrations of ``group`` took the new start time."""

    group: str
    timestamp: datetime
    queues: int
    cursors: int


def _locked_queue_ids(group: str, queue: str | None) -> dict[int, str]:
    """The queues the group is on (or ``queue``), their rows locked."""
    if queue is not None:
        rows = Queue.objects.filter(name=queue)
    else:
        on = Q(groups__name=group) | Q(partitions__cursors__group=group)
        rows = Queue.objects.filter(on)
    found = dict(rows.values_list("id", "name").distinct())
    alive = lock_queue_rows(found)
    return {qid: name for qid, name in found.items() if qid in alive}


def _lock_cursors(group: str, queue_ids: list[int]) -> list[int]:
    # By partition, the order an ack of several partitions locks them in.
    return list(
        ConsumerCursor.objects.filter(group=group, partition__queue_id__in=queue_ids)
        .order_by("partition_id")
        .select_for_update(of=("self",))
        .values_list("id", flat=True)
    )


def _release(cursor_ids: list[int], queues: list[str]) -> None:
    if cursor_ids:
        wakeups.notify_on_commit(sorted(queues))
    events.broadcast_on_commit(events.QUEUES_GROUP, {"type": "queues.changed", "queues": sorted(queues)})


def _label(group: str) -> str:
    return "queue mode" if group == QUEUE_MODE else group


def _presence(group: str, queues: dict[int, str]) -> dict[int, int]:
    """The queues of ``queues`` the group is on (registered or with a
    cursor), with its cursors on each: what a delete changes."""
    on = dict(
        ConsumerCursor.objects.filter(group=group, partition__queue_id__in=list(queues))
        .values_list("partition__queue_id")
        .annotate(n=Count("id"))
        .values_list("partition__queue_id", "n")
    )
    for qid in ConsumerGroup.objects.filter(name=group, queue_id__in=list(queues)).values_list("queue_id", flat=True):
        on.setdefault(qid, 0)
    return on


@transaction.atomic(durable=True)
def queue_group_delete(
    *, group: str, queue: str | None = None, delete_metadata: bool = True, who: Who | None = None
) -> GroupDeleted:
    """Forget consumer group ``group`` on ``queue`` (None: on every queue).

    With ``delete_metadata`` its cursors and its registration go: the next
    pop registers it anew and places it by its subscription mode. Without,
    the registration stays and each cursor goes back to where the group
    started (its subscription start), so it reads again what it read since.
    A group never seen deletes nothing. With ``who``, writes ``who``'s
    audit entry (``queue.group_delete``, or ``queue.group_reset`` for a
    rewind) for each queue the group was on. Must be the outermost
    transaction (``queue_group_delete_in_txn`` runs inside one).
    """
    return queue_group_delete_in_txn(
        group=group, queue=queue, delete_metadata=delete_metadata, now=clock.now(), who=who
    )


def queue_group_delete_in_txn(
    *, group: str, queue: str | None, delete_metadata: bool, now: datetime, who: Who | None = None
) -> GroupDeleted:
    """``queue_group_delete`` inside the caller's transaction (asserted)."""
    assert connection.in_atomic_block
    queues = _locked_queue_ids(group, queue)
    ids = list(queues)
    cursor_ids = _lock_cursors(group, ids)
    if who is not None:
        every = "" if queue is not None else " (a delete on every queue)"
        for qid, cursors_on in sorted(_presence(group, queues).items()):
            who.record_in_txn(
                now=now,
                action="queue.group_delete" if delete_metadata else "queue.group_reset",
                target=f"{queues[qid]}/{_label(group)}",
                before=f"{cursors_on} cursors{every}",
                after=(
                    "deleted: its next pop registers it anew"
                    if delete_metadata
                    else "each cursor back to its subscription start"
                ),
            )
    cursors = ConsumerCursor.objects.filter(id__in=cursor_ids)
    if delete_metadata:
        cursors.delete()
        ConsumerGroup.objects.filter(queue_id__in=ids, name=group).delete()
    else:
        for cid, start in cursors.values_list("id", "start_offset"):
            _place(cid, start, forget_dead_letters=True)
    _release(cursor_ids, list(queues.values()))
    return GroupDeleted(group, queue, len(cursor_ids), delete_metadata)


def _last_before(pid: int, moment: datetime) -> int:
    """The offset of the last message of ``pid`` pushed at or before ``moment`` (-1: none)."""
    last = (
        Message.objects.filter(partition_id=pid, created_at__lte=moment)
        .order_by("-offset")
        .values_list("offset", flat=True)
        .first()
    )
    return last if last is not None else -1


def _place(cursor_id: int, committed: int, *, forget_dead_letters: bool = False) -> None:
    """Put the cursor at ``committed`` with no lease and nothing to retry;
    ``forget_dead_letters`` also zeroes its dead-letter count (a rewind to
    its start offset: nothing after it has been dead-lettered yet)."""
    forgotten = {"dead_lettered": 0} if forget_dead_letters else {}
    ConsumerCursor.objects.filter(id=cursor_id).update(
        committed_offset=committed,
        batch_last=committed,
        lease_id=None,
        leased_until=None,
        delivery_runs=[],
        retry_count=0,
        **forgotten,
    )


@transaction.atomic(durable=True)
def queue_group_seek(
    *, group: str, queue: str, to_end: bool, timestamp: datetime | None = None, who: Who | None = None
) -> GroupSeek:
    """Move ``group``'s cursors on every partition of ``queue``.

    ``to_end`` skips everything pushed so far; otherwise the group reads
    next the first message pushed after ``timestamp`` (from the start when
    none was pushed before it). Partitions the group never read get a
    cursor too, so the seek covers the whole queue. An unknown queue, or a
    group never seen on it, moves nothing. With ``who``, a seek that moved
    the group writes ``who``'s audit entry (``queue.group_seek``). Must be
    the outermost transaction (``queue_group_seek_in_txn`` runs inside one).
    """
    return queue_group_seek_in_txn(
        group=group, queue=queue, to_end=to_end, timestamp=timestamp, now=clock.now(), who=who
    )


def queue_group_seek_in_txn(
    *, group: str, queue: str, to_end: bool, timestamp: datetime | None, now: datetime, who: Who | None = None
) -> GroupSeek:
    """``queue_group_seek`` inside the caller's transaction (asserted)."""
    assert connection.in_atomic_block
    if not to_end and timestamp is None:
        raise ValueError("a seek needs to_end or a timestamp")
    queues = _locked_queue_ids(group, queue)
    ids = list(queues)
    known = (
        ConsumerGroup.objects.filter(queue_id__in=ids, name=group).exists()
        or ConsumerCursor.objects.filter(partition__queue_id__in=ids, group=group).exists()
    )
    if not known:
        # A group never seen on the queue is left unseen, as Queen moves only
        # existing positions: a mistyped name must not create a group.
        return GroupSeek(group, queue, to_end, timestamp, 0)
    parts = dict(Partition.objects.filter(queue_id__in=ids).values_list("id", "next_offset"))
    ConsumerCursor.objects.bulk_create(
        [ConsumerCursor(partition_id=pid, group=group) for pid in sorted(parts)], ignore_conflicts=True
    )
    cursor_ids = _lock_cursors(group, ids)
    cursors = ConsumerCursor.objects.filter(id__in=cursor_ids).order_by("partition__name")
    before: list[str] = []
    for cid, pid, partition, was in cursors.values_list("id", "partition_id", "partition__name", "committed_offset"):
        last = parts[pid] - 1
        _place(cid, last if to_end or timestamp is None else _last_before(pid, timestamp))
        before.append(f"{partition}@{was}")
    _release(cursor_ids, list(queues.values()))
    if who is not None:
        more = f" (+{len(before) - 20} partitions)" if len(before) > 20 else ""
        where = "to the end" if to_end or timestamp is None else f"to {timestamp.isoformat()}"
        who.record_in_txn(
            now=now,
            action="queue.group_seek",
            target=f"{queue}/{_label(group)}",
            before=f"done up to {', '.join(before[:20]) or 'nothing'}{more}",
            after=f"{where}, {len(cursor_ids)} partitions",
        )
    return GroupSeek(group, queue, to_end, timestamp, len(cursor_ids))


@transaction.atomic(durable=True)
def queue_group_resubscribe(*, group: str, timestamp: datetime, who: Who | None = None) -> GroupResubscribed:
    """Start ``group`` at ``timestamp`` wherever it has not read yet.

    On every queue the group is registered on, each partition it never
    claimed from (no cursor, or one still at its subscription start) is
    placed after the last message pushed at or before ``timestamp``.
    Cursors that moved keep their place, as Queen's subscription timestamp
    only applies where a group has no position. An unknown group changes
    nothing (``queues == 0``). With ``who``, writes ``who``'s audit entry
    (``queue.group_resubscribe``) for each queue where a cursor moved. Must
    be the outermost transaction (``queue_group_resubscribe_in_txn`` runs
    inside one).
    """
    return queue_group_resubscribe_in_txn(group=group, timestamp=timestamp, now=clock.now(), who=who)


def queue_group_resubscribe_in_txn(
    *, group: str, timestamp: datetime, now: datetime, who: Who | None = None
) -> GroupResubscribed:
    """``queue_group_resubscribe`` inside the caller's transaction (asserted)."""
    assert connection.in_atomic_block
    registered = set(ConsumerGroup.objects.filter(name=group).values_list("queue_id", flat=True))
    ids = sorted(lock_queue_rows(registered))
    parts = dict(Partition.objects.filter(queue_id__in=ids).values_list("id", "queue_id"))
    ConsumerCursor.objects.bulk_create(
        [ConsumerCursor(partition_id=pid, group=group) for pid in sorted(parts)], ignore_conflicts=True
    )
    cursor_ids = _lock_cursors(group, ids)
    untouched = ConsumerCursor.objects.filter(
        id__in=cursor_ids, last_claim_at__isnull=True, lease_id__isnull=True, committed_offset=F("start_offset")
    ).values_list("id", "partition_id")
    moved = 0
    per_queue: dict[int, int] = {}
    for cid, pid in untouched:
        start = _last_before(pid, timestamp)
        ConsumerCursor.objects.filter(id=cid).update(
            committed_offset=start, start_offset=start, batch_last=start, delivery_runs=[], retry_count=0
        )
        moved += 1
        per_queue[parts[pid]] = per_queue.get(parts[pid], 0) + 1
    named = dict(Queue.objects.filter(id__in=ids).values_list("id", "name"))
    names = list(named.values())
    _release(cursor_ids, names)
    if who is not None:
        for qid, count in sorted(per_queue.items()):
            who.record_in_txn(
                now=now,
                action="queue.group_resubscribe",
                target=f"{named[qid]}/{_label(group)}",
                before=f"{count} partitions not read yet",
                after=f"each placed after the last message pushed at or before {timestamp.isoformat()}",
            )
    return GroupResubscribed(group, timestamp, len(ids), moved)
