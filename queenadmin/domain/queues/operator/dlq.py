"""Operator actions on dead letters: replay (one, or in batches) and purge.

A replay appends a copy of the dead letter with transactionId
``dlq:<dead letter id>`` (Queen's rule) to a destination: by default its
own queue and partition, or any queue and partition named
(``ReplayDestination``; created when missing, as a push creates them).
What becomes of the dead letter follows Queen's ``POST /dlq/:id/replay``:

- ``moved``: the copy was appended; the dead letter is removed in the same
  transaction, which records where the copy went (``replays.py``);
- ``duplicate``: a second replay of it finds that record and answers with
  the copy the first appended, whatever destination it names (nothing is
  appended anywhere); or the destination partition already holds
  ``dlq:<id>`` inside its dedup window (someone pushed that
  transactionId): nothing is appended and the dead letter is kept, since
  a move that moved nothing must not destroy the record;
- ``gone`` (``DeadLetterGone``): no such dead letter and no record of its
  replay (never was, purged, or replayed longer ago than records are kept).

Into its own queue, a copy is by default (``target="group"``) marked for
the group that gave up on it (``Message.for_group``) and other groups pass
over it as over a deleted offset; a dead letter whose group no longer
consumes the queue goes to every group, as ``target="all"`` does. Into
another queue, every group of that queue gets it (none of them handled the
original). Why this shape: docs/design.md, "A DLQ replay for one group".
The API's replay (``queue_dlq_replay``) is Queen's: for every group.

The batch actions act on what a ``board.DeadLetterFilter`` names, at most
``batch`` per call (oldest id first; call again from ``last_id`` while
``more``), each call one short transaction with its audit entry; the
filter's ``upto`` keeps a replayed message that fails again out of the
selection. Every write takes the source queue's row first
(``lock_queue_rows``), then the dead letters.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from django.db import connection, transaction

from queenadmin.domain import clock, events
from queenadmin.domain.audit import Who
from queenadmin.domain.names import check_engine_name
from queenadmin.domain.queues.board import DeadLetterFilter, dead_letters_matching, has_nul
from queenadmin.domain.queues.operator.replays import Moved, record_replays_in_txn, replay_record, replayed_ids
from queenadmin.domain.queues.push import PushItem, PushResult, queue_push_in_txn
from queenadmin.domain.queues.refs import lock_queue_rows
from queenadmin.errors import DeadLetterGone, QueueNotFound
from queenadmin.models.queues import ConsumerCursor, ConsumerGroup, DeadLetter, Message, Queue

#: Dead letters per transaction.
DLQ_BATCH = 500

DLQVerb = Literal["replay", "purge"]
#: Who a replayed copy is for: the group that failed it, or every group.
ReplayTarget = Literal["group", "all"]

#: The prefix of a replayed copy's transactionId: ``dlq:<dead letter id>``.
REPLAY_PREFIX = "dlq:"
#: Dead letters (and message ids) an audit entry names.
_NAMED = 20


def replay_transaction_id(dead_letter_id: int) -> str:
    """The transactionId the copy of dead letter ``dead_letter_id`` is pushed with."""
    return f"{REPLAY_PREFIX}{dead_letter_id}"


@dataclass(frozen=True)
class ReplayDestination:
    """Where a replay appends: ``queue`` and ``partition``, each None for
    the dead letter's own."""

    queue: str | None = None
    partition: str | None = None

    def check(self) -> None:
        """Raise ``InvalidArgument`` (or ``NameTooLong``) for a name no queue
        or partition may have (``names.check_engine_name``)."""
        if self.queue is not None:
            check_engine_name(self.queue, "queue")
        if self.partition is not None:
            check_engine_name(self.partition, "partition")

    def elsewhere(self, source_queue: str) -> bool:
        """Whether the copies go to another queue than ``source_queue``."""
        return self.queue is not None and self.queue != source_queue

    def describe(self) -> str:
        queue = self.queue if self.queue is not None else "its own queue"
        partition = self.partition if self.partition is not None else "its own partition"
        return f"{queue}, {partition}"


#: The dead letter's own queue and partition.
OWN_PLACE = ReplayDestination()


@dataclass(frozen=True)
class DLQAction:
    """What one batch call did: how many dead letters, and whether more match."""

    #: Dead letters replayed (moved) or purged.
    done: int
    more: bool
    #: Message ids of the copies a replay appended, in dead-letter id order.
    message_ids: tuple[str, ...] = ()
    #: Copies of a ``target="group"`` replay handed to every group instead,
    #: as their group no longer consumes the queue.
    to_every_group: int = 0
    #: Dead letters whose copy the destination already held (``dlq:<id>``):
    #: nothing appended, the dead letter kept.
    duplicates: int = 0
    #: The highest dead letter id this call looked at: the next call's ``after``.
    last_id: int | None = None
    #: Of the ``ids`` named, those an earlier replay moved (``replays.py``):
    #: duplicates, nothing appended again.
    replayed_before: int = 0


@dataclass(frozen=True)
class DLQReplayed:
    """What ``queue_dlq_replay`` did with one dead letter (Queen's answer)."""

    dead_letter_id: int
    result: Literal["moved", "duplicate"]
    #: The dead letter's queue, and where the copy went.
    source_queue: str
    queue: str
    partition: str
    #: The group that gave up on the message.
    group: str
    original_transaction_id: str
    #: The push's verdict on the copy (``duplicate``: the copy already there).
    pushed: PushResult
    #: Whether the dead letter was removed (``moved`` only).
    row_removed: bool
    #: When an earlier replay moved it: this answer is that replay's record
    #: (``duplicate``; nothing was done now). None: this call's own outcome.
    replayed_at: datetime | None = None


def _source_queue_id(name: str) -> int:
    """The id of queue ``name``, its row locked; ``QueueNotFound`` if there is none."""
    found = None if has_nul(name) else Queue.objects.filter(name=name).values_list("id", flat=True).first()
    if found is None or not lock_queue_rows([found]):
        raise QueueNotFound(f"no queue {name}")
    return found


def _select(
    selection: DeadLetterFilter, ids: tuple[int, ...] | None, batch: int, after: int | None
) -> tuple[list[DeadLetter], bool]:
    """Lock and read the dead letters to act on, and whether more match.

    ``ids``: those of them that match; otherwise the next ``batch`` (oldest
    id first, above ``after``). Raises ``QueueNotFound`` for an unknown queue.
    """
    _source_queue_id(selection.queue)
    rows = dead_letters_matching(selection).select_related("partition").order_by("id")
    if ids is not None:
        rows = rows.filter(pk__in=list(ids))
    if after is not None:
        rows = rows.filter(id__gt=after)
    # Two operators replaying the same filter split it instead of both
    # appending copies. SQLite ignores FOR UPDATE: it has one writer, which
    # does the same.
    rows = rows.select_for_update(skip_locked=True, of=("self",))
    if ids is not None:
        return list(rows), False
    taken = list(rows[: batch + 1])
    return taken[:batch], len(taken) > batch


def queue_dlq_action_in_txn(
    *,
    verb: DLQVerb,
    selection: DeadLetterFilter,
    who: Who,
    ids: tuple[int, ...] | None = None,
    batch: int = DLQ_BATCH,
    now: datetime | None = None,
    target: ReplayTarget = "group",
    to: ReplayDestination = OWN_PLACE,
    after: int | None = None,
) -> DLQAction:
    """Replay or purge up to ``batch`` dead letters ``selection`` names
    (``ids``: only those; ``after``: only ids above it).

    ``replay`` appends a copy of each to ``to`` (transactionId ``dlq:<id>``;
    into its own queue for its failed group only, or with ``target="all"``
    for every group: see the module's docstring) and removes it, recording
    where the copy went, but for a ``duplicate`` (kept); ``purge`` deletes
    it. Returns how many were acted on, the duplicates, the ``ids`` an
    earlier replay moved (nothing appended again), the last id looked at
    and whether more match; writes ``who``'s audit entry when any dead
    letter was acted on. Raises
    ``QueueNotFound`` when the queue does not exist, ``InvalidArgument``
    for a destination no queue or partition may be named, and a replay the
    push's refusals (``maxSize``: nothing is written). Runs inside the
    caller's transaction.
    """
    assert connection.in_atomic_block
    now = now or clock.now()
    if verb == "replay":
        to.check()
    rows, more = _select(selection, ids, batch, after)
    before = replayed_ids(queue=selection.queue, ids=ids, now=now) if verb == "replay" and ids is not None else ()
    if not rows:
        return DLQAction(0, False, replayed_before=len(before))
    copies: tuple[str, ...] = ()
    after_text = "deleted"
    to_every_group = 0
    gone = rows
    kept: list[DeadLetter] = []
    if verb == "replay":
        pushed, to_every_group = _replay(rows, selection.queue, target, to, now)
        gone = [row for row, p in zip(rows, pushed, strict=True) if p.status == "queued"]
        kept = [row for row, p in zip(rows, pushed, strict=True) if p.status != "queued"]
        copies = tuple(p.message_id for p in pushed if p.status == "queued")
        after_text = _replayed_text(selection.queue, target, to, to_every_group, copies, kept)
        moved = [
            Moved(row, _copy_partition(row, to), p) for row, p in zip(rows, pushed, strict=True) if p.status == "queued"
        ]
        record_replays_in_txn(source_queue=selection.queue, moved=moved, who=who, now=now)
    DeadLetter.objects.filter(pk__in=[row.pk for row in gone]).delete()
    what = "ids " + ", ".join(str(i) for i in ids[:_NAMED]) if ids is not None else selection.describe()
    who.record_in_txn(
        now=now,
        action=f"dlq.{verb}",
        target=selection.queue,
        before=f"{len(rows)} dead letters ({what}): " + ", ".join(row.message_id for row in rows[:_NAMED]),
        after=after_text,
    )
    events.broadcast_on_commit(events.QUEUES_GROUP, {"type": "queues.changed", "queues": [selection.queue]})
    return DLQAction(len(gone), more, copies, to_every_group, len(kept), rows[-1].pk, len(before))


def _replayed_text(
    queue: str,
    target: ReplayTarget,
    to: ReplayDestination,
    to_every_group: int,
    copies: tuple[str, ...],
    kept: list[DeadLetter],
) -> str:
    """What a batch replay's audit entry says it did."""
    if to.elsewhere(queue):
        whom = f"into queue {to.queue}" + (f", partition {to.partition}" if to.partition else "")
        whom += ", for every consumer group of it"
    elif target == "all":
        whom = "for every consumer group"
    elif to_every_group:
        whom = f"for the failed group ({to_every_group} for every group: their group no longer consumes)"
    else:
        whom = "for the failed group only"
    if not to.elsewhere(queue) and to.partition:
        whom += f", into partition {to.partition}"
    text = f"{len(copies)} appended as new messages {whom}, transactionId dlq:<id>: " + ", ".join(copies[:_NAMED])
    if kept:
        ids = ", ".join(str(row.pk) for row in kept[:_NAMED])
        text += f"; {len(kept)} already there (duplicate dlq:<id>), kept in the DLQ: ids {ids}"
    return text


def _consumers(queue_id: int) -> set[str]:
    """The groups consuming the queue: registered, or with a cursor (queue mode)."""
    named = set(ConsumerGroup.objects.filter(queue_id=queue_id).values_list("name", flat=True))
    with_cursor = ConsumerCursor.objects.filter(partition__queue_id=queue_id).values_list("group", flat=True)
    return named | set(with_cursor.distinct())


def _copy_partition(row: DeadLetter, to: ReplayDestination) -> str:
    """The partition the copy of ``row`` goes to."""
    return to.partition if to.partition is not None else row.partition.name


def _replay(
    rows: list[DeadLetter], queue: str, target: ReplayTarget, to: ReplayDestination, now: datetime
) -> tuple[list[PushResult], int]:
    """Append the copies of ``rows`` (of ``queue``) to ``to``; into their own
    queue, mark each for its group unless ``target`` is all.

    Returns the push's verdict on each copy and how many of a group replay
    went to every group (their group no longer consumes the queue).
    """
    destination = to.queue if to.queue is not None else queue
    items = [
        PushItem(
            queue=destination,
            partition=_copy_partition(row, to),
            payload_json=row.payload,
            transaction_id=replay_transaction_id(row.pk),
            # The copy keeps who pushed the message.
            producer_sub=row.producer_sub,
        )
        for row in rows
    ]
    pushed = queue_push_in_txn(items=items, now=now)
    to_every_group = 0
    if target == "group" and not to.elsewhere(queue):
        consumers = _consumers(rows[0].queue_id)
        for row, item, result in zip(rows, items, pushed, strict=True):
            if row.group not in consumers:
                to_every_group += 1
            elif result.status == "queued":
                # Inside the push's transaction: no claim has seen it yet.
                Message.objects.filter(
                    partition__queue_id=row.queue_id, partition__name=item.partition, offset=result.offset
                ).update(for_group=row.group)
    return pushed, to_every_group


#: ``queue_dlq_action_in_txn`` as its own transaction: must be the outermost call.
queue_dlq_action = transaction.atomic(durable=True)(queue_dlq_action_in_txn)


def queue_dlq_replay_in_txn(
    *, dead_letter_id: int, who: Who, to: ReplayDestination = OWN_PLACE, now: datetime | None = None
) -> DLQReplayed:
    """Replay one dead letter as Queen's ``POST /dlq/:id/replay`` does.

    Appends its copy (transactionId ``dlq:<id>``, every consumer group gets
    it) to ``to`` (None parts: its own queue and partition), removes it and
    records where the copy went: ``moved``; or finds ``dlq:<id>`` already
    there and keeps it: ``duplicate``. Either writes ``who``'s audit entry
    (``dlq.replay``). A dead letter an earlier replay moved answers
    ``duplicate`` from that replay's record (``replayed_at`` set; its
    copy, wherever ``to`` says): nothing is written, no audit entry.
    Raises ``DeadLetterGone`` when there is no such dead letter and no
    record (never was, purged, or replayed longer ago than records are
    kept), ``InvalidArgument`` for a destination no queue or partition may
    be named, and the push's ``QueueFull`` (the destination's ``maxSize``;
    nothing written). Runs inside the caller's transaction (asserted).
    """
    assert connection.in_atomic_block
    now = now or clock.now()
    to.check()
    source = DeadLetter.objects.filter(pk=dead_letter_id).values_list("queue_id", flat=True).first()
    row = None
    if source is not None and lock_queue_rows([source]):
        # Two replays of one id: the second waits here for the first, then
        # finds the row gone and the first one's record committed. SQLite
        # ignores FOR UPDATE: it runs one writer at a time, to the same end.
        row = (
            DeadLetter.objects.filter(pk=dead_letter_id)
            .select_related("partition", "queue")
            .select_for_update(of=("self",))
            .first()
        )
    if row is None:
        return _replayed_before(dead_letter_id, now)
    queue = row.queue.name
    (pushed,), _ = _replay([row], queue, "all", to, now)
    moved = pushed.status == "queued"
    partition = _copy_partition(row, to)
    if moved:
        DeadLetter.objects.filter(pk=row.pk).delete()
        record_replays_in_txn(source_queue=queue, moved=[Moved(row, partition, pushed)], who=who, now=now)
    where = f"{pushed.queue}/{partition}"
    after = (
        f"appended to {where} at offset {pushed.offset} as message {pushed.message_id}, transactionId "
        f"{pushed.transaction_id}, for every consumer group; the dead letter is removed"
        if moved
        else f"duplicate: {where} already holds transactionId {pushed.transaction_id} (offset {pushed.offset});"
        " nothing appended, the dead letter is kept"
    )
    who.record_in_txn(
        now=now,
        action="dlq.replay",
        target=queue,
        before=(
            f"dead letter {row.pk} of group {row.group}, partition {row.partition.name}, offset {row.offset}:"
            f" message {row.message_id}, transactionId {row.transaction_id}"
        ),
        after=after,
    )
    events.broadcast_on_commit(events.QUEUES_GROUP, {"type": "queues.changed", "queues": [queue]})
    result: Literal["moved", "duplicate"] = "moved" if moved else "duplicate"
    return DLQReplayed(row.pk, result, queue, pushed.queue, partition, row.group, row.transaction_id, pushed, moved)


def _replayed_before(dead_letter_id: int, now: datetime) -> DLQReplayed:
    """The answer for a dead letter that is not there: ``duplicate`` from
    the record of its replay; ``DeadLetterGone`` without one."""
    record = replay_record(dead_letter_id=dead_letter_id, now=now)
    if record is None:
        raise DeadLetterGone()
    copy = PushResult(
        0, record.message_id, replay_transaction_id(dead_letter_id), record.queue, "duplicate", record.offset
    )
    return DLQReplayed(
        dead_letter_id,
        "duplicate",
        record.source_queue,
        record.queue,
        record.partition,
        record.group,
        record.original_transaction_id,
        copy,
        False,
        record.replayed_at,
    )


#: ``queue_dlq_replay_in_txn`` as its own transaction: must be the outermost call.
queue_dlq_replay = transaction.atomic(durable=True)(queue_dlq_replay_in_txn)
