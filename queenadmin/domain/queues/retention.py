"""Retention: delete old messages and move each partition's log start.

Queen's rules, per queue: ``retentionSeconds`` deletes a message older than
that, consumed or not; ``completedRetentionSeconds`` one that every consumer
of the partition is past (the queue's named groups, and queue mode once
anyone popped the queue in queue mode; a partition nobody consumes keeps
everything); ``maxWaitTimeSeconds`` evicts like the first (the shorter
window wins), ``retentionEnabled`` or not.

Only a prefix of each partition goes, and ``log_start`` moves past it in
the same transaction: every offset below it is gone, every offset from it
on is stored. Each step is one short transaction over one partition and at
most ``batch`` messages, taking the queue row and then the partition row
``SKIP LOCKED`` as pushes do, so replicas sweep at once without waiting or
deleting twice (docs/design.md, "The message log's modules"). A message
deleted here no longer deduplicates a later push.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction

from queenadmin.conf import settings
from queenadmin.domain import clock, events
from queenadmin.domain.queues import wakeups
from queenadmin.domain.queues.refs import lock_queue_rows
from queenadmin.domain.queues.store import store
from queenadmin.models.queues import QUEUE_MODE, ConsumerCursor, ConsumerGroup, Queue


@dataclass(frozen=True)
class RetentionPolicy:
    """A queue's retention cutoffs at one moment (None: the rule is off)."""

    queue_id: int
    queue: str
    #: Rule 1: messages pushed before this go.
    all_before: datetime | None
    #: Rule 2: consumed messages pushed before this go.
    completed_before: datetime | None


@dataclass(frozen=True)
class RetentionSweep:
    """What one sweep deleted: messages, and partitions whose start moved."""

    deleted: int = 0
    partitions: int = 0
    #: Partitions left for a later pass because a push or another sweeper
    #: held them.
    skipped: int = 0


def retention_policies(*, now: datetime) -> list[RetentionPolicy]:
    """The queues retention applies to, with their cutoffs at ``now``.

    A queue takes part when one of its two windows is above zero (and, with
    ``RETENTION_REQUIRES_ENABLED``, Queen's opt-in, ``retentionEnabled`` is
    true), or when its ``maxWaitTimeSeconds`` is above zero.
    """
    policies = []
    opt_in = settings.RETENTION_REQUIRES_ENABLED
    for qid, name, options in Queue.objects.order_by("id").values_list("id", "name", "options"):
        enabled = bool(options.get("retentionEnabled")) or not opt_in
        all_s = int(options.get("retentionSeconds") or 0) if enabled else 0
        done_s = int(options.get("completedRetentionSeconds") or 0) if enabled else 0
        wait_s = int(options.get("maxWaitTimeSeconds") or 0)
        # maxWaitTimeSeconds evicts like rule 1, with or without retentionEnabled.
        windows = [w for w in (all_s, wait_s) if w > 0]
        if not windows and done_s <= 0:
            continue
        policies.append(
            RetentionPolicy(
                qid,
                name,
                now - timedelta(seconds=min(windows)) if windows else None,
                now - timedelta(seconds=done_s) if done_s > 0 else None,
            )
        )
    return policies


def queue_retention_sweep(*, now: datetime | None = None, batch: int | None = None) -> RetentionSweep:
    """Delete every message retention allows at ``now`` (default: the clock).

    Runs one short transaction per partition and per ``batch`` messages
    (default ``RETENTION_BATCH_SIZE``) until nothing more can go; returns
    the counts. Never opens one long transaction, and must not be called
    inside one (each step is a durable transaction). Safe to run in
    several processes at once.
    """
    now = clock.now() if now is None else now
    batch = max(1, batch or settings.RETENTION_BATCH_SIZE)
    deleted = moved = skipped = 0
    for policy in retention_policies(now=now):
        for pid in _due_partitions(policy):
            step_moved = False
            while True:
                step = _sweep_partition(policy, pid, now, batch)
                if step is None:
                    skipped += 1
                    break
                count, done = step
                deleted += count
                step_moved = step_moved or count > 0
                if done:
                    break
            moved += step_moved
    return RetentionSweep(deleted, moved, skipped)


def _due_partitions(policy: RetentionPolicy) -> list[int]:
    """Partitions of the queue whose oldest stored message is past a cutoff.

    One indexed probe per partition (the message at its log start), in
    one statement per queue: partitions with nothing old enough cost no
    transaction. Read without locks; the step checks again under them.
    """
    cutoffs = [c for c in (policy.all_before, policy.completed_before) if c is not None]
    return store().due_partitions(queue_id=policy.queue_id, before=max(cutoffs))


@transaction.atomic(durable=True)
def _sweep_partition(policy: RetentionPolicy, pid: int, now: datetime, batch: int) -> tuple[int, bool] | None:
    """Delete the next prefix of partition ``pid`` that retention allows.

    Returns (messages deleted, whether the partition is done for now), or
    None when the partition was busy (a push or another sweeper holds it)
    or is gone.
    """
    if not lock_queue_rows([policy.queue_id]):
        return 0, True
    the_store = store()
    row = the_store.lock_partition_for_sweep(pid)
    if row is None:
        return None
    log_start, next_offset = row
    high = min(next_offset - 1, log_start + batch - 1)
    if high < log_start:
        return 0, True
    consumed = _consumed_by_all(policy.queue_id, pid) if policy.completed_before is not None else -1
    rows = the_store.message_sizes(partition_id=pid, first=log_start, last=high)
    # Push times rise with offsets only roughly (a push reads the clock
    # before it waits for the partition), so the walk stops at the first
    # message that must stay: the log start never skips a kept message.
    boundary = log_start
    freed = 0
    for offset, created_at, nbytes in rows:
        expired = policy.all_before is not None and created_at < policy.all_before
        finished = policy.completed_before is not None and offset <= consumed and created_at < policy.completed_before
        if not (expired or finished):
            break
        boundary = offset + 1
        freed += nbytes
    if boundary == log_start:
        return 0, True
    # Compare-and-set on the log start: SQLite ignores FOR UPDATE.
    deleted = the_store.cut_log(partition_id=pid, log_start=log_start, boundary=boundary, freed_bytes=freed)
    if deleted is None:
        transaction.set_rollback(True)
        return None
    # A leased batch that is gone entirely would hold the partition until
    # the lease ran out (its acks only find unknown messages): hand it back.
    # Cursors a claim or an ack holds are skipped, never waited for: a
    # transaction that acks then pushes to this partition would wait for the
    # partition row this step holds (a deadlock); they are busy anyway.
    gone = list(
        ConsumerCursor.objects.filter(partition_id=pid, lease_id__isnull=False, batch_last__lt=boundary)
        .select_for_update(skip_locked=True)
        .values_list("id", flat=True)
    )
    released = ConsumerCursor.objects.filter(id__in=gone, batch_last__lt=boundary).update(
        lease_id=None, leased_until=None
    )
    if released:
        wakeups.notify_on_commit([policy.queue])
    events.broadcast_on_commit(events.QUEUES_GROUP, {"type": "queues.changed", "queues": [policy.queue]})
    return deleted, boundary <= high


def _consumed_by_all(queue_id: int, pid: int) -> int:
    """The highest offset every consumer of partition ``pid`` is done with.

    The consumers are the queue's named groups and, once any pop in queue
    mode made a cursor on the queue, queue mode; one without a cursor on
    this partition has consumed nothing of it. No consumer: nothing
    (-1: offsets start at 0).
    """
    committed = dict(ConsumerCursor.objects.filter(partition_id=pid).values_list("group", "committed_offset"))
    consumers = set(ConsumerGroup.objects.filter(queue_id=queue_id).values_list("name", flat=True))
    if ConsumerCursor.objects.filter(partition__queue_id=queue_id, group=QUEUE_MODE).exists():
        consumers.add(QUEUE_MODE)
    consumers.update(committed)
    if not consumers or consumers - committed.keys():
        return -1
    return min(committed.values())
