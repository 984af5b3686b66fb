"""Operator actions on a queue's dead letters: replay and purge.

Both act on the dead letters a ``board.DeadLetterFilter`` names, at most
``batch`` of them per call (oldest id first), and write the audit entry in
the same transaction, so an entry exists exactly when the change committed.
A caller acting on "all that match" calls again while ``more`` is true;
each call is its own short transaction, so a large DLQ never holds locks
for long. The filter's ``upto`` keeps the selection to what the operator
saw: a replayed message that fails again lands above it and is left alone.

A replay appends a copy of the dead letter to its partition and removes
the dead letter. The copy gets a new message id and the transactionId
``dlq:<dead letter id>`` (``replay_transaction_id``), Queen's documented
rule for ``POST /dlq/:id/replay``: deterministic, so the partition's dedup
answers "duplicate" to a second append of the same dead letter instead of
delivering it twice, and distinct from the original's, which the dedup
would otherwise take it for.

By default (``target="group"``) only the consumer group that gave up on
the message is handed the copy. The log has one sequence per partition and
a group's position is one committed offset, so the copy cannot be left out
of the other groups' sequences; instead it is marked with the group
(``Message.for_group``) and a claim of any other group passes over it as
over an operator-deleted offset (``consume.pop._read_range``): those groups
commit past it without receiving it, and the failed group reads it in
order, after what the partition already holds. A dead letter whose group
no longer consumes the queue (deleted since, or ``__timer__``: a timer's
message that never reached the queue) would then reach nobody, so it is
handed to every group and the result counts it. ``target="all"`` hands
every copy to every group of the queue.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from django.db import connection, transaction

from queenadmin.domain import clock, events
from queenadmin.domain.audit import Who
from queenadmin.domain.queues.board import DeadLetterFilter, dead_letters_matching, has_nul
from queenadmin.domain.queues.push import PushItem, queue_push_in_txn
from queenadmin.errors import QueueNotFound
from queenadmin.models.queues import ConsumerCursor, ConsumerGroup, DeadLetter, Message, Queue

#: Dead letters per transaction.
DLQ_BATCH = 500

DLQVerb = Literal["replay", "purge"]
#: Who a replayed copy is for: the group that failed it, or every group.
ReplayTarget = Literal["group", "all"]

#: The prefix of a replayed copy's transactionId: ``dlq:<dead letter id>``.
REPLAY_PREFIX = "dlq:"


def replay_transaction_id(dead_letter_id: int) -> str:
    """The transactionId the copy of dead letter ``dead_letter_id`` is pushed with."""
    return f"{REPLAY_PREFIX}{dead_letter_id}"


@dataclass(frozen=True)
class DLQAction:
    """What one call did: how many dead letters, and whether more match."""

    done: int
    more: bool
    #: Message ids of the copies a replay appended, in dead-letter id order.
    message_ids: tuple[str, ...] = ()
    #: Copies of a ``target="group"`` replay handed to every group instead,
    #: as their group no longer consumes the queue.
    to_every_group: int = 0


def _select(selection: DeadLetterFilter, ids: tuple[int, ...] | None, batch: int) -> tuple[list[DeadLetter], bool]:
    """Lock and read the dead letters to act on, and whether more match.

    ``ids``: those of them that match; otherwise the next ``batch``
    (oldest id first). Raises ``QueueNotFound`` for an unknown queue.
    """
    if has_nul(selection.queue) or not Queue.objects.filter(name=selection.queue).exists():
        raise QueueNotFound(f"no queue {selection.queue}")
    rows = dead_letters_matching(selection).select_related("partition").order_by("id")
    if ids is not None:
        rows = rows.filter(pk__in=list(ids))
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
) -> DLQAction:
    """Replay or purge up to ``batch`` dead letters ``selection`` names
    (``ids``: only those).

    ``replay`` appends a copy of each to its partition (transactionId
    ``dlq:<id>``; for its failed group only, or with ``target="all"`` for
    every group: see the module's docstring), then removes it; ``purge``
    deletes it. Returns how many were acted on and whether more
    match; writes ``who``'s audit entry when there were any. Raises
    ``QueueNotFound`` when the queue does not exist, and a replay the
    push's refusals (``maxSize``: nothing is written). Runs inside the
    caller's transaction.
    """
    assert connection.in_atomic_block
    now = now or clock.now()
    rows, more = _select(selection, ids, batch)
    if not rows:
        return DLQAction(0, False)
    copies: tuple[str, ...] = ()
    after = "deleted"
    to_every_group = 0
    if verb == "replay":
        copies, to_every_group = _replay(rows, selection.queue, target, now)
        if target == "all":
            whom = "for every consumer group"
        elif to_every_group:
            whom = f"for the failed group ({to_every_group} for every group: their group no longer consumes)"
        else:
            whom = "for the failed group only"
        after = f"appended as new messages {whom}, transactionId dlq:<id>: " + ", ".join(copies[:20])
    DeadLetter.objects.filter(pk__in=[row.pk for row in rows]).delete()
    what = "ids " + ", ".join(str(i) for i in ids[:20]) if ids is not None else selection.describe()
    who.record_in_txn(
        now=now,
        action=f"dlq.{verb}",
        target=selection.queue,
        before=f"{len(rows)} dead letters ({what}): " + ", ".join(row.message_id for row in rows[:20]),
        after=after,
    )
    events.broadcast_on_commit(events.QUEUES_GROUP, {"type": "queues.changed", "queues": [selection.queue]})
    return DLQAction(len(rows), more, copies, to_every_group)


def _consumers(queue_id: int) -> set[str]:
    """The groups consuming the queue: registered, or with a cursor (queue mode)."""
    named = set(ConsumerGroup.objects.filter(queue_id=queue_id).values_list("name", flat=True))
    with_cursor = ConsumerCursor.objects.filter(partition__queue_id=queue_id).values_list("group", flat=True)
    return named | set(with_cursor.distinct())


def _replay(rows: list[DeadLetter], queue: str, target: ReplayTarget, now: datetime) -> tuple[tuple[str, ...], int]:
    """Append the copies of ``rows``; mark each for its group unless ``target`` is all.

    Returns the copies' message ids and how many of a group replay went
    to every group (their group no longer consumes the queue).
    """
    items = [
        PushItem(
            queue=queue,
            partition=row.partition.name,
            payload_json=row.payload,
            transaction_id=replay_transaction_id(row.pk),
        )
        for row in rows
    ]
    pushed = queue_push_in_txn(items=items, now=now)
    to_every_group = 0
    if target == "group":
        consumers = _consumers(rows[0].queue_id)
        for row, result in zip(rows, pushed, strict=True):
            if row.group not in consumers:
                to_every_group += 1
            elif result.status == "queued":
                # Inside the push's transaction: no claim has seen it yet.
                Message.objects.filter(partition_id=row.partition_id, offset=result.offset).update(for_group=row.group)
    return tuple(p.message_id for p in pushed), to_every_group


#: ``queue_dlq_action_in_txn`` as its own transaction: must be the outermost call.
queue_dlq_action = transaction.atomic(durable=True)(queue_dlq_action_in_txn)
