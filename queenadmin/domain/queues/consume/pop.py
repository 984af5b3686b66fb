"""Pop: claim a batch of a partition for a consumer group, under a lease.

Claims lock cursor rows with ``FOR UPDATE SKIP LOCKED`` on PostgreSQL and
then write with a conditional UPDATE (the committed offset and a free lease
must still hold), which also keeps SQLite correct: there the IMMEDIATE
transaction already makes writers take turns. The claim's statements are
the queue store's (``store/``).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from django.db import IntegrityError, connection, transaction
from django.db.models import F, Q

from queenadmin.conf import settings
from queenadmin.domain import clock, events
from queenadmin.domain.queues.consume.commands import (
    Claim,
    ConflationPolicy,
    Delivered,
    PopRequest,
)
from queenadmin.domain.queues.delivery import Runs, runs_attempts, runs_deliver, runs_trim
from queenadmin.domain.queues.ids import uuid7
from queenadmin.domain.queues.refs import QueueRef, lock_queue_rows
from queenadmin.domain.queues.store import store
from queenadmin.models.queues import QUEUE_MODE, ConsumerCursor, ConsumerGroup, Message, Partition, Queue

# --------------------------------------------------------------------------
# Pop


def queue_claim(*, request: PopRequest) -> Claim:
    """Lease the next messages for ``request.group``; never blocks on a lock.

    Takes up to ``request.batch`` messages in offset order from up to
    ``request.max_partitions`` free partitions (least recently claimed
    first), all under one new lease id. With ``auto_ack`` the cursor moves
    past them at once and the lease id is ``""``. A named group registers
    on its first claim of a queue, storing ``request.conflation``; where
    the stored policy is conflation the claim takes instead the newest
    visible message of each of up to ``request.conflation_width``
    partitions (``_claim_newest``). A namespace or task claim visits its
    queues by ``priority``, highest first, and answers from the first one
    with anything ready. The claim says the policy it applied and whether
    the request disagreed with it. Returns an empty claim when nothing is
    ready, the queue or the group's reading of it is paused
    (``operator/pause.py``), or the queue does not exist. Must be the outermost transaction
    (``queue_claim_in_txn`` runs inside one); where the store has
    ``one_statement_consume`` (PostgreSQL), a plain claim of one queue is
    one autocommit statement per partition claimed (``_claim_at_once``).
    """
    if not connection.in_atomic_block and store().one_statement_consume:
        claim = _claim_at_once(request)
        if claim is not None:
            return claim
    return _claim_atomic(request)


@transaction.atomic(durable=True)
def _claim_atomic(request: PopRequest) -> Claim:
    return queue_claim_in_txn(request=request, now=clock.now())


def _claim_at_once(request: PopRequest) -> Claim | None:
    """``queue_claim`` of the plain case, one statement per partition.

    Each partition is claimed by its own statement (``Store.claim_one``)
    under the one lease id, until the batch is full, ``max_partitions``
    are claimed, or none is free: a partition's claim stands alone as in
    the transactional path, whose one transaction only holds the claimed
    cursors locked together until commit. None when the first partition
    needs the transactional path (nothing was claimed); a later one that
    does ends the claim with what it has.
    """
    if request.queue is None or request.conflation:
        return None
    the_store = store()
    now = clock.now()
    lease_id = "" if request.auto_ack else uuid7()
    budget = request.batch
    claimed: list[tuple[int, str]] = []
    delivered: list[Delivered] = []
    retry_at: datetime | None = None
    while budget > 0 and len(claimed) < request.max_partitions:
        one = the_store.claim_one(
            queue=request.queue,
            group=request.group,
            partition=request.partition,
            skip=[pid for pid, _ in claimed],
            budget=budget,
            lease_id=lease_id,
            lease_seconds=request.lease_seconds,
            auto_ack=request.auto_ack,
            now=now,
        )
        if one is None or one.outcome == "general":
            if not claimed:
                return None
            break
        if not claimed:
            # As the transactional path: what the candidates said before any claim.
            retry_at = one.retry_at
        if one.outcome == "empty":
            break
        assert one.partition_id is not None
        assert one.partition is not None
        claimed.append((one.partition_id, one.partition))
        first = one.messages[0][0]
        budget -= one.messages[-1][0] - first + 1
        for offset, txn, mid, payload, trace, created, sub in one.messages:
            delivered.append(
                Delivered(mid, txn, trace, payload, created, one.partition_id, one.partition, offset, 1, sub)
            )
    if claimed:
        events.broadcast_on_commit(events.QUEUES_GROUP, {"type": "queues.changed", "queues": [request.queue]})
        return Claim(request.queue, lease_id, request.group, tuple(claimed), tuple(delivered), retry_at)
    return Claim(None, lease_id, request.group, (), (), retry_at, False, False)


def queue_claim_in_txn(*, request: PopRequest, now: datetime) -> Claim:
    """``queue_claim`` inside the caller's transaction, at time ``now``.

    The caller must hold an open transaction (asserted) and commit it: the
    claimed cursors stay row-locked until then (on PostgreSQL), and the
    broadcast goes out on commit.
    """
    assert connection.in_atomic_block
    lease_id = "" if request.auto_ack else uuid7()
    queues = _target_queues(request)
    retry_at: datetime | None = None
    policies: list[Claim] = []
    for queue in queues:
        claim = _claim_queue(queue, request, lease_id, now)
        if claim.messages:
            return claim
        policies.append(claim)
        if claim.retry_at is not None and (retry_at is None or claim.retry_at < retry_at):
            retry_at = claim.retry_at
    conflation = any(c.conflation for c in policies) if policies else request.conflation
    conflict = any(c.conflation_conflict for c in policies)
    return Claim(None, lease_id, request.group, (), (), retry_at, conflation, conflict)


def queue_conflation_policy(*, request: PopRequest) -> ConflationPolicy:
    """The conflation policy a pop of ``request`` gets, read without a claim.

    For each queue the pop would visit: the group's stored policy, or the
    one the request asks for where the group has not registered yet (its
    first pop stores that). ``conflation`` is on when it is on for any of
    them, ``conflict`` when any stored one differs from the request's.
    Queue mode has no policy (both off).
    """
    if request.group == QUEUE_MODE:
        return ConflationPolicy(False, False)
    ids = [queue.id for queue in _target_queues(request)]
    stored = dict(
        ConsumerGroup.objects.filter(queue_id__in=ids, name=request.group).values_list("queue_id", "conflation")
    )
    effective = [stored.get(qid, request.conflation) for qid in ids]
    if not effective:
        return ConflationPolicy(request.conflation, False)
    return ConflationPolicy(any(effective), any(e != request.conflation for e in effective))


def _target_queues(request: PopRequest) -> list[QueueRef]:
    rows = Queue.objects.all()
    if request.queue is not None:
        rows = rows.filter(name=request.queue)
    else:
        if request.namespace:
            rows = rows.filter(namespace=request.namespace)
        if request.task:
            rows = rows.filter(task=request.task)
        rows = rows.order_by("id")
    found = [
        QueueRef(i, n, o, paused, tuple(groups or ()))
        for i, n, o, paused, groups in rows.values_list("id", "name", "options", "paused", "paused_groups")
    ]
    # The option Queen documents for multi-queue consumers: higher-priority
    # queues are drained first; equal ones keep their id order (stable sort).
    found.sort(key=lambda queue: -queue.priority)
    return found


def _register_group(queue: QueueRef, request: PopRequest, now: datetime) -> bool:
    """Store a named group on its first pop and place its cursors.

    ``new`` starts after the messages already in each existing partition;
    ``all`` from the oldest; a ``subscriptionFrom`` time after the last
    message pushed before it. Later partitions are always read from their
    start. A pop that names no mode takes ``DEFAULT_SUBSCRIPTION_MODE``
    (``all``, as Queen's server does: a new group processes everything).
    The pop's conflation policy is stored with it. Returns the group's
    stored conflation policy.
    """
    stored = ConsumerGroup.objects.filter(queue_id=queue.id, name=request.group).values_list("conflation", flat=True)
    policy = stored.first()
    if policy is not None:
        return policy
    mode = request.subscription_mode or ("new" if settings.DEFAULT_SUBSCRIPTION_MODE == "new" else "all")
    if request.subscription_from == "now":
        mode = "new"
    try:
        with transaction.atomic():
            ConsumerGroup.objects.create(
                queue_id=queue.id,
                name=request.group,
                subscription_mode=mode,
                conflation=request.conflation,
                created_at=now,
            )
    except IntegrityError:
        # Another pop registered it first: its policy is the stored one.
        return bool(stored.first())
    start_from = request.subscription_from if isinstance(request.subscription_from, datetime) else None
    if mode == "all" and start_from is None:
        return request.conflation
    cursors = []
    for pid, next_offset in Partition.objects.filter(queue_id=queue.id).values_list("id", "next_offset"):
        start = next_offset - 1
        if start_from is not None:
            last = (
                Message.objects.filter(partition_id=pid, created_at__lt=start_from)
                .order_by("-offset")
                .values_list("offset", flat=True)
                .first()
            )
            start = last if last is not None else -1
        if start >= 0:
            cursors.append(
                ConsumerCursor(
                    partition_id=pid,
                    group=request.group,
                    committed_offset=start,
                    start_offset=start,
                    batch_last=start,
                )
            )
    ConsumerCursor.objects.bulk_create(cursors, ignore_conflicts=True)
    return request.conflation


def _candidates(queue: QueueRef, request: PopRequest, now: datetime) -> tuple[list[tuple[int, bool]], datetime | None]:
    """Partitions with messages the group has not finished: (id, has cursor).

    Free ones come least recently claimed first; also returns the earliest
    expiry among the leased ones.
    """
    rows = store().claim_candidates(queue_id=queue.id, group=request.group, partition=request.partition)
    free: list[tuple[Any, int, bool]] = []
    retry_at: datetime | None = None
    window = timedelta(seconds=queue.window_buffer_seconds)
    for pid, cid, lease, until, last_claim, last_push in rows:
        if lease is not None and until is not None and until > now:
            if retry_at is None or until < retry_at:
                retry_at = until
            continue
        if window and last_push is not None and last_push > now - window:
            # windowBuffer: a partition pushed to within the window delivers
            # nothing until it has been quiet that long.
            quiet_at = last_push + window
            if retry_at is None or quiet_at < retry_at:
                retry_at = quiet_at
            continue
        free.append((last_claim, pid, cid is not None))
    free.sort(key=lambda r: (r[0] is not None, r[0] or now, r[1]))
    return [(pid, has) for _, pid, has in free], retry_at


def _claim_queue(queue: QueueRef, request: PopRequest, lease_id: str, now: datetime) -> Claim:
    if not lock_queue_rows([queue.id]):
        # Deleted meanwhile: a first pop would have stored the request's policy.
        return Claim(queue.name, lease_id, request.group, (), (), None, request.conflation)
    conflating = False
    if request.group != QUEUE_MODE:
        conflating = _register_group(queue, request, now)
    policy = {"conflation": conflating, "conflation_conflict": conflating != request.conflation}
    if queue.paused_for(request.group):
        # Paused by an operator (``operator/pause.py``): answer as an empty
        # queue does, the group registered and its policy said as usual. The
        # state was read just before the queue row was locked: a pause
        # committing in between lets this one claim through.
        return Claim(queue.name, lease_id, request.group, (), (), None, **policy)
    candidates, retry_at = _candidates(queue, request, now)
    missing = [pid for pid, has in candidates if not has]
    if missing:
        ConsumerCursor.objects.bulk_create(
            [ConsumerCursor(partition_id=pid, group=request.group) for pid in missing], ignore_conflicts=True
        )
    if conflating:
        return _claim_newest(queue, request, lease_id, now, candidates, retry_at, **policy)
    lease_seconds = request.lease_seconds or queue.lease_seconds
    leased_until = now + timedelta(seconds=lease_seconds)
    budget = request.batch
    claimed: list[tuple[int, str]] = []
    delivered: list[Delivered] = []
    for pid, _ in candidates:
        if budget <= 0 or len(claimed) >= request.max_partitions:
            break
        cursor = _lock_free_cursor(pid, request.group, now)
        if cursor is None:
            continue  # Leased meanwhile, or locked by another claim.
        cid, committed, stored_runs, next_offset, name, head = cursor
        take = min(budget, next_offset - 1 - head)
        if take <= 0:
            continue
        first, last = head + 1, head + take
        rows = _read_range(pid, first, last, request.group)
        if not rows:
            # Every message of the range was deleted: by an operator
            # (``queue_message_delete``: the group is done with them), or by
            # retention since the log start was read, or is a DLQ replay
            # meant for another group. Go on from the next stored message.
            skipped = _skip_deleted(cid, pid, committed, head, last, next_offset, stored_runs, now, request.group)
            if skipped is None:
                continue
            committed, stored_runs = skipped
            head = committed
            take = min(budget, next_offset - 1 - head)
            first, last = head + 1, head + take
            rows = _read_range(pid, first, last, request.group)
            if not rows:
                continue  # Deleted meanwhile too: the next claim goes on.
        if queue.delay_seconds:
            # Only the prefix pushed at least delay_seconds ago is ready:
            # the first younger message and everything after it wait, so the
            # partition stays FIFO.
            delay = timedelta(seconds=queue.delay_seconds)
            young = next((i for i, r in enumerate(rows) if r[5] > now - delay), None)
            if young is not None:
                if young == 0:
                    ready_at = rows[0][5] + delay
                    retry_at = ready_at if retry_at is None else min(retry_at, ready_at)
                    continue
                rows = rows[:young]
        # The batch ends at its last stored message, so acking what was
        # handed out releases the lease even when deleted offsets follow.
        last = rows[-1][0]
        take = last - head
        runs = runs_deliver(runs_trim(_load_runs(stored_runs), head), first, last)
        seen = runs_attempts(runs, first, last)
        # Counted in messages handed out: offsets an operator deleted between
        # them are neither delivered nor acked.
        fields: dict[str, Any] = {"last_claim_at": now, "delivered": F("delivered") + len(rows)}
        if head > committed:
            # Skipped, not completed: the subscription start moves with it so
            # completed counts stay the messages the group finished.
            fields.update(committed_offset=head, start_offset=F("start_offset") + (head - committed))
        if request.auto_ack:
            fields.update(
                committed_offset=last,
                batch_last=last,
                retry_count=0,
                delivery_runs=runs_trim(runs, last),
                acked=F("acked") + len(rows),
            )
        else:
            fields.update(lease_id=lease_id, leased_until=leased_until, batch_last=last, delivery_runs=runs)
        if not _claim_cursor(cid, committed, now, fields):
            continue
        budget -= take
        claimed.append((pid, name))
        for offset, txn, mid, payload, trace, created, sub in rows:
            delivered.append(Delivered(mid, txn, trace, payload, created, pid, name, offset, seen[offset - first], sub))
    if claimed:
        events.broadcast_on_commit(events.QUEUES_GROUP, {"type": "queues.changed", "queues": [queue.name]})
    return Claim(queue.name, lease_id, request.group, tuple(claimed), tuple(delivered), retry_at, **policy)


class _FreeCursor(NamedTuple):
    """A cursor a claim locked (``lock_free_cursor``), and where it reads on from."""

    id: int
    committed: int
    stored_runs: Any
    next_offset: int
    partition: str
    #: The last offset the group is past: the committed offset, or just
    #: before the log start when retention deleted offsets the group had
    #: not reached (skipped, not delivered).
    head: int


def _lock_free_cursor(pid: int, group: str, now: datetime) -> _FreeCursor | None:
    """``group``'s cursor on ``pid``, locked, or None when a live lease or another claim holds it."""
    row = store().lock_free_cursor(partition_id=pid, group=group, now=now)
    if row is None:
        return None
    cid, committed, stored_runs, next_offset, name, log_start = row
    return _FreeCursor(cid, committed, stored_runs, next_offset, name, max(committed, log_start - 1))


def _claim_cursor(cid: int, committed: int, now: datetime, fields: dict[str, Any]) -> bool:
    """Write a claim's ``fields`` to cursor ``cid`` if it still stands at
    ``committed`` and no live lease holds it; False when another claim won.

    SQLite ignores FOR UPDATE; this compare-and-set is what protects a claim
    there. It also guards ``delivery_runs``: only a claim (which needs a
    free lease) or a moving committed offset ever changes them.
    """
    return bool(
        ConsumerCursor.objects.filter(pk=cid, committed_offset=committed)
        .exclude(lease_id__isnull=False, leased_until__gt=now)
        .update(**fields)
    )


def _claim_newest(
    queue: QueueRef,
    request: PopRequest,
    lease_id: str,
    now: datetime,
    candidates: list[tuple[int, bool]],
    retry_at: datetime | None,
    **policy: bool,
) -> Claim:
    """A conflating group's claim: the newest visible message of each of up
    to ``request.conflation_width`` free partitions, each leased with every
    pending offset up to it (``committed .. tail``).

    Acking that message moves the cursor past everything older (superseded:
    never delivered, not deleted). Under ``delayedProcessing`` the newest
    message old enough is the visible one; ``windowBuffer`` holds a
    partition as for any group (``_candidates``). The wire refuses
    ``autoAck`` with ``conflation=true``; a pop that sends ``autoAck`` to a
    group stored as conflating gets the newest message committed at once.
    ``candidates`` and ``retry_at`` are ``_candidates``', each with its
    cursor row made.
    """
    leased_until = now + timedelta(seconds=request.lease_seconds or queue.lease_seconds)
    delay = timedelta(seconds=queue.delay_seconds)
    claimed: list[tuple[int, str]] = []
    delivered: list[Delivered] = []
    for pid, _ in candidates:
        if len(claimed) >= request.conflation_width:
            break
        cursor = _lock_free_cursor(pid, request.group, now)
        if cursor is None:
            continue  # Leased meanwhile, or locked by another claim.
        cid, committed, stored_runs, next_offset, name, head = cursor
        tail = next_offset - 1
        if tail <= head:
            continue
        pending = Message.objects.filter(_for(request.group), partition_id=pid, offset__gt=head, offset__lte=tail)
        visible = pending.filter(created_at__lte=now - delay) if delay else pending
        newest = (
            visible.order_by("-offset")
            .values_list("offset", "transaction_id", "message_id", "payload", "trace_id", "created_at", "producer_sub")
            .first()
        )
        if newest is None:
            oldest = pending.order_by("offset").values_list("created_at", flat=True).first()
            if oldest is not None:
                # Nothing is out of its delay yet.
                ready_at = oldest + delay
                retry_at = ready_at if retry_at is None else min(retry_at, ready_at)
            else:
                # Every pending offset was deleted, or is a DLQ replay meant
                # for another group: the group is done with them (as
                # ``_skip_deleted``), so the partition stops being a candidate.
                _claim_cursor(
                    cid,
                    committed,
                    now,
                    {
                        "committed_offset": tail,
                        "start_offset": F("start_offset") + (head - committed),
                        "batch_last": tail,
                        "retry_count": 0,
                        "delivery_runs": runs_trim(_load_runs(stored_runs), tail),
                    },
                )
            continue
        last, txn, mid, payload, trace, created, sub = newest
        first = head + 1
        runs = runs_deliver(runs_trim(_load_runs(stored_runs), head), first, last)
        fields: dict[str, Any] = {"last_claim_at": now, "delivered": F("delivered") + 1, "batch_last": last}
        if request.auto_ack:
            fields.update(
                committed_offset=last,
                retry_count=0,
                delivery_runs=runs_trim(runs, last),
                acked=F("acked") + last - head,
            )
        else:
            fields.update(lease_id=lease_id, leased_until=leased_until, delivery_runs=runs)
        if head > committed:
            # Below the log start: skipped, not completed (as in a claim).
            fields.update(committed_offset=head, start_offset=F("start_offset") + (head - committed))
        if not _claim_cursor(cid, committed, now, fields):
            continue
        claimed.append((pid, name))
        (attempt,) = runs_attempts(runs, last, last)
        delivered.append(Delivered(mid, txn, trace, payload, created, pid, name, last, attempt, sub))
    if claimed:
        events.broadcast_on_commit(events.QUEUES_GROUP, {"type": "queues.changed", "queues": [queue.name]})
    return Claim(queue.name, lease_id, request.group, tuple(claimed), tuple(delivered), retry_at, **policy)


def _for(group: str) -> Q:
    """The messages ``group`` is handed: all but DLQ replays meant for another group."""
    return Q(for_group__isnull=True) | Q(for_group=group)


def _read_range(
    pid: int, first: int, last: int, group: str
) -> list[tuple[int, str, str, str, str | None, datetime, str | None]]:
    """The stored messages of ``pid`` from ``first`` to ``last`` that ``group``
    is handed (gaps: deleted ones, and replays meant for another group)."""
    return list(
        Message.objects.filter(_for(group), partition_id=pid, offset__gte=first, offset__lte=last)
        .order_by("offset")
        .values_list("offset", "transaction_id", "message_id", "payload", "trace_id", "created_at", "producer_sub")
    )


def _skip_deleted(
    cid: int,
    pid: int,
    committed: int,
    head: int,
    last: int,
    next_offset: int,
    stored_runs: Any,
    now: datetime,
    group: str,
) -> tuple[int, Runs] | None:
    """Move a cursor past deleted offsets to just before the next stored message.

    Offsets below ``head`` (the log start) were deleted by retention and
    were not completed: the subscription start moves past them, as a claim
    does. Returns the new committed offset and delivery runs, or None when
    the cursor moved meanwhile or nothing is stored past ``last``.
    """
    following = (
        Message.objects.filter(_for(group), partition_id=pid, offset__gt=last, offset__lt=next_offset)
        .order_by("offset")
        .values_list("offset", flat=True)
        .first()
    )
    target = following - 1 if following is not None else next_offset - 1
    runs = runs_trim(_load_runs(stored_runs), target)
    moved = (
        ConsumerCursor.objects.filter(pk=cid, committed_offset=committed)
        .exclude(lease_id__isnull=False, leased_until__gt=now)
        .update(
            committed_offset=target,
            start_offset=F("start_offset") + (head - committed),
            batch_last=target,
            retry_count=0,
            delivery_runs=runs,
        )
    )
    if not moved or following is None:
        return None
    return target, runs


def _load_runs(value: Any) -> Runs:
    # Raw SQL reads JSON as text on both backends (Django loads jsonb as
    # text on psycopg 3); the ORM would have decoded it.
    if isinstance(value, str | bytes):
        return json.loads(value)  # type: ignore[no-any-return]
    return value or []
