"""Operator actions on a queue's dead letters: replay and purge.

Both act on the dead letters a ``board.DeadLetterFilter`` names, at most
``batch`` of them per call (oldest id first), and write the audit entry in
the same transaction, so an entry exists exactly when the change committed.
A caller acting on "all that match" calls again while ``more`` is true;
each call is its own short transaction, so a large DLQ never holds locks
for long. The filter's ``upto`` keeps the selection to what the operator
saw: a replayed message that fails again lands above it and is left alone.

A replay appends a copy of the dead letter to its partition (a new message
id and transactionId, so the log's dedup does not take it for the original)
and removes the dead letter. Every consumer group of the queue sees the
copy: the log has one sequence per partition, not one per group.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from django.db import connection, transaction

from queenadmin.domain import clock, events
from queenadmin.domain.audit import Who
from queenadmin.domain.queues.board import DeadLetterFilter, dead_letters_matching
from queenadmin.domain.queues.push import PushItem, queue_push_in_txn
from queenadmin.errors import QueueNotFound
from queenadmin.models.queues import DeadLetter, Queue

#: Dead letters per transaction.
DLQ_BATCH = 500

DLQVerb = Literal["replay", "purge"]


@dataclass(frozen=True)
class DLQAction:
    """What one call did: how many dead letters, and whether more match."""

    done: int
    more: bool
    #: Message ids of the copies a replay appended, in dead-letter id order.
    message_ids: tuple[str, ...] = ()


def _select(selection: DeadLetterFilter, ids: tuple[int, ...] | None, batch: int) -> tuple[list[DeadLetter], bool]:
    """Lock and read the dead letters to act on, and whether more match.

    ``ids``: those of them that match; otherwise the next ``batch``
    (oldest id first). Raises ``QueueNotFound`` for an unknown queue.
    """
    if not Queue.objects.filter(name=selection.queue).exists():
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
) -> DLQAction:
    """Replay or purge up to ``batch`` dead letters ``selection`` names
    (``ids``: only those).

    ``replay`` appends a copy of each to its partition, then removes it;
    ``purge`` deletes it. Returns how many were acted on and whether more
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
    if verb == "replay":
        items = [
            PushItem(queue=selection.queue, partition=row.partition.name, payload_json=row.payload) for row in rows
        ]
        copies = tuple(p.message_id for p in queue_push_in_txn(items=items, now=now))
        after = "appended as new messages: " + ", ".join(copies[:20])
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
    return DLQAction(len(rows), more, copies)


#: ``queue_dlq_action_in_txn`` as its own transaction: must be the outermost call.
queue_dlq_action = transaction.atomic(durable=True)(queue_dlq_action_in_txn)
