"""Records of replayed dead letters: where each one's copy went.

A replay that moves a dead letter (``dlq.py``) removes it and, in the same
transaction, records where its copy (transactionId ``dlq:<id>``) went: a
``DeadLetterReplay`` row. A later replay of the id finds no dead letter
but the record, and answers ``duplicate`` with that copy, whatever
destination it names: a dead letter has one copy, never a second message
anywhere. A purged dead letter leaves no record (a replay of it is 404
``gone``).

Records are bounded: one older than ``DLQ_REPLAY_KEEP_SECONDS`` counts as
gone at once (the answer does not wait for the trim), and the retention
loop deletes them (``queue_dlq_replays_trim``); 0 keeps none.

Why records beside the dead letters rather than the dead letter kept and
marked as replayed: every DLQ list, count, chart, alert and metric reads
``DeadLetter`` as "what is in the DLQ", and none of them needs a filter.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection, transaction

from queenadmin.conf import settings
from queenadmin.domain import clock
from queenadmin.domain.audit import Who
from queenadmin.domain.queues.push import PushResult
from queenadmin.models.queues import DeadLetter, DeadLetterReplay, Queue

#: Records one trim step deletes at most.
TRIM_BATCH_SIZE = 1000


@dataclass(frozen=True)
class ReplayRecord:
    """Where an earlier replay moved dead letter ``dead_letter_id``."""

    dead_letter_id: int
    source_queue: str
    #: The group that gave up on the message, and the message's own transactionId.
    group: str
    original_transaction_id: str
    #: The copy: its queue, partition, message id and offset.
    queue: str
    partition: str
    message_id: str
    offset: int
    replayed_at: datetime
    actor: str
    via: str


@dataclass(frozen=True)
class Moved:
    """One dead letter a replay moved: the row, and its copy's partition and push result."""

    row: DeadLetter
    partition: str
    pushed: PushResult


def _oldest_kept(now: datetime) -> datetime | None:
    """Records replayed before this count as gone; None: none are kept."""
    seconds = settings.DLQ_REPLAY_KEEP_SECONDS
    return now - timedelta(seconds=seconds) if seconds > 0 else None


def record_replays_in_txn(*, source_queue: str, moved: Sequence[Moved], who: Who, now: datetime) -> None:
    """Record where the copies of the dead letters ``moved`` (of
    ``source_queue``, removed in this transaction) went; nothing when no
    record is kept. Runs inside the caller's transaction (asserted)."""
    assert connection.in_atomic_block
    if not moved or _oldest_kept(now) is None:
        return
    DeadLetterReplay.objects.bulk_create(
        [
            DeadLetterReplay(
                dead_letter_id=m.row.pk,
                source_queue=source_queue,
                group=m.row.group,
                original_transaction_id=m.row.transaction_id,
                queue=m.pushed.queue,
                partition=m.partition,
                message_id=m.pushed.message_id,
                offset=m.pushed.offset,
                replayed_at=now,
                actor=who.actor,
                via=who.via,
            )
            for m in moved
        ]
    )


def replay_record(*, dead_letter_id: int, now: datetime) -> ReplayRecord | None:
    """The record of dead letter ``dead_letter_id``'s replay; None when it
    was never replayed, or longer ago than records are kept."""
    oldest = _oldest_kept(now)
    if oldest is None:
        return None
    row = DeadLetterReplay.objects.filter(dead_letter_id=dead_letter_id, replayed_at__gte=oldest).first()
    if row is None:
        return None
    return ReplayRecord(
        row.dead_letter_id,
        row.source_queue,
        row.group,
        row.original_transaction_id,
        row.queue,
        row.partition,
        row.message_id,
        row.offset,
        row.replayed_at,
        row.actor,
        row.via,
    )


def _kept(ids: Iterable[int], now: datetime) -> list[tuple[int, str]] | None:
    oldest = _oldest_kept(now)
    wanted = sorted(set(ids))
    if oldest is None or not wanted:
        return None
    found = DeadLetterReplay.objects.filter(dead_letter_id__in=wanted, replayed_at__gte=oldest)
    return list(found.order_by("dead_letter_id").values_list("dead_letter_id", "source_queue"))


def replayed_ids(*, queue: str, ids: Iterable[int], now: datetime) -> tuple[int, ...]:
    """Those of ``ids`` that an earlier replay moved out of ``queue`` (their record kept), ascending."""
    return tuple(pk for pk, source in _kept(ids, now) or () if source == queue)


def replayed_dead_letter_queues(*, ids: Iterable[int], now: datetime | None = None) -> dict[str, tuple[int, ...]]:
    """Queue name -> those of ``ids`` an earlier replay moved out of it
    (their record kept), for the queues that still exist."""
    by_queue: dict[str, list[int]] = defaultdict(list)
    for pk, source in _kept(ids, now or clock.now()) or ():
        by_queue[source].append(pk)
    existing = set(Queue.objects.filter(name__in=list(by_queue)).values_list("name", flat=True))
    return {name: tuple(pks) for name, pks in by_queue.items() if name in existing}


def queue_dlq_replays_trim(*, now: datetime | None = None) -> int:
    """Delete the replay records past ``DLQ_REPLAY_KEEP_SECONDS`` (all of
    them when it is 0), oldest first; return how many went.

    Each step is a short transaction of its own over at most
    ``TRIM_BATCH_SIZE`` records: must not be called inside a transaction.
    Safe in several processes at once (each skips the records another one
    is deleting).
    """
    now = now or clock.now()
    oldest = _oldest_kept(now)
    total = 0
    while True:
        step = _trim_step(oldest)
        total += step
        if step < TRIM_BATCH_SIZE:
            return total


@transaction.atomic(durable=True)
def _trim_step(before: datetime | None) -> int:
    rows = DeadLetterReplay.objects.order_by("replayed_at")
    if before is not None:
        rows = rows.filter(replayed_at__lt=before)
    ids = list(rows.select_for_update(skip_locked=True).values_list("dead_letter_id", flat=True)[:TRIM_BATCH_SIZE])
    if not ids:
        return 0
    DeadLetterReplay.objects.filter(dead_letter_id__in=ids).delete()
    return len(ids)
