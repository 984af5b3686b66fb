"""Pop, ack and lease extend: the consumer side of the log.

A consumer group has one cursor row per partition. ``committed_offset``
says everything up to it is done; the one leased batch is
``committed_offset + 1 .. batch_last`` under ``lease_id`` until
``leased_until``. So one batch per (partition, group) is out at a time,
FIFO holds per partition, and an expired lease makes the same offsets
claimable again with ``deliveryAttempt + 1``.

Every claim starts at ``committed_offset + 1``, so ``delivery_runs`` (how
many times each pending offset went out) only grows by whole prefixes and
is trimmed as the cursor advances: ``deliveryAttempt`` is exact per message
however batch sizes, partial acks and redeliveries interleave.

Claims lock cursor rows with ``FOR UPDATE SKIP LOCKED`` on PostgreSQL and
then write with a conditional UPDATE (the committed offset and a free lease
must still hold), which also keeps SQLite correct: there the IMMEDIATE
transaction already makes writers take turns. The claim's statements are
the queue store's (``store/``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, NamedTuple, get_args

from django.db import IntegrityError, connection, transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Greatest, Least

from queenadmin.conf import settings
from queenadmin.domain import clock, events
from queenadmin.domain.queues import wakeups
from queenadmin.domain.queues.delivery import Runs, runs_attempts, runs_deliver, runs_delivered_last, runs_trim
from queenadmin.domain.queues.ids import is_uuid, uuid7
from queenadmin.domain.queues.refs import QueueRef, lock_queue_rows
from queenadmin.domain.queues.store import store
from queenadmin.errors import InvalidArgument, QueueNotFound
from queenadmin.models.queues import QUEUE_MODE, ConsumerCursor, ConsumerGroup, DeadLetter, Message, Partition, Queue

#: What an ack can say about a message (protocol section 5.1).
AckStatus = Literal["completed", "failed", "retry", "dlq"]
ACK_STATUSES: frozenset[str] = frozenset(get_args(AckStatus))
#: Where a named group starts on the partitions that exist at its first pop.
SubscriptionMode = Literal["new", "all"]


@dataclass(frozen=True)
class Delivered:
    """One message as a pop hands it out."""

    message_id: str
    transaction_id: str
    trace_id: str | None
    payload_json: str
    created_at: datetime
    partition_id: int
    partition: str
    offset: int
    delivery_attempt: int
    #: Who pushed it (``producerSub``); None when nobody was named.
    producer_sub: str | None = None


@dataclass(frozen=True)
class Claim:
    """What one pop got. ``messages`` empty means nothing was ready.

    ``retry_at`` is the earliest time a partition that has messages but is
    leased to someone else frees up, or whose head message comes out of the
    queue's ``delayedProcessing`` (a waiter may re-try then).
    """

    queue: str | None
    lease_id: str
    group: str
    partitions: tuple[tuple[int, str], ...]
    messages: tuple[Delivered, ...]
    retry_at: datetime | None = None
    #: The group's effective conflation policy on the queue that answered
    #: (on any queue visited, for an empty claim).
    conflation: bool = False
    #: The pop asked for the other policy than the one stored for the group.
    conflation_conflict: bool = False

    @property
    def partition_id(self) -> int | None:
        return self.partitions[0][0] if self.partitions else None

    @property
    def partition(self) -> str | None:
        return self.partitions[0][1] if self.partitions else None


@dataclass(frozen=True)
class PopRequest:
    """A validated pop. ``queue`` or ``namespace``/``task`` picks queues."""

    queue: str | None = None
    partition: str | None = None
    namespace: str | None = None
    task: str | None = None
    group: str = QUEUE_MODE
    batch: int = 200
    max_partitions: int = 1
    #: None means the queue's ``leaseTime``.
    lease_seconds: int | None = None
    subscription_mode: SubscriptionMode | None = None
    #: An aware datetime, or the string "now".
    subscription_from: datetime | str | None = None
    auto_ack: bool = False
    #: Last-value delivery asked for (stored when the group registers).
    conflation: bool = False
    #: How many partitions a pop claims when the group's policy is
    #: conflation, one message each (the wire's ``partitions ?? batch``,
    #: at most 64).
    conflation_width: int = 64


@dataclass(frozen=True)
class ConflationPolicy:
    """A group's effective conflation policy and whether a pop disagreed."""

    conflation: bool
    conflict: bool


@dataclass(frozen=True)
class AckItem:
    """One acknowledgment, at ``index`` of its call.

    ``partition_id`` is the text the consumer sent back; one that names no
    partition is an outcome (``success: false``), not a refusal.
    """

    index: int
    transaction_id: str
    partition_id: str
    status: AckStatus
    lease_id: str | None = None
    error: str | None = None
    group: str = QUEUE_MODE


@dataclass(frozen=True)
class AckOutcome:
    """What became of the acknowledgment at ``index``."""

    index: int
    transaction_id: str
    success: bool
    error: str | None = None
    lease_released: bool = False
    dlq: bool = False
    noop: bool = False


@dataclass(frozen=True)
class LeaseExtension:
    """``renewed`` live leases now end at ``expires_at`` or later."""

    lease_id: str
    renewed: int
    expires_at: datetime | None


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
    ready or the queue does not exist. Must be the outermost transaction
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
    found = [QueueRef(i, n, o) for i, n, o in rows.values_list("id", "name", "options")]
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


# --------------------------------------------------------------------------
# Ack


UNRESOLVABLE = "transaction is unresolvable, already committed, or acknowledgment is stale"
BAD_LEASE = "invalid or expired lease"


def queue_ack(*, items: Sequence[AckItem]) -> list[AckOutcome]:
    """Apply acknowledgments; return one outcome per item, in order.

    ``completed`` moves the group's cursor to the message (earlier ones in
    the batch count as done); ``failed`` spends one of the queue's
    ``retryLimit`` retries and hands the batch back, or files the message
    in the DLQ once they are spent; ``retry`` hands the batch back for
    free; ``dlq`` files the message now. Per (partition, group) the cursor
    stops at the lowest message that will come back. An ack with a
    ``leaseId`` must name the live lease holding the message; without one
    it is unfenced. Refusals are outcomes with ``success: false``. Must be
    the outermost transaction (``queue_ack_in_txn`` runs inside one); where
    the store has ``one_statement_consume`` (PostgreSQL), a call of
    ``completed`` acks only is one autocommit statement (``_ack_at_once``).
    """
    if items and not connection.in_atomic_block and store().one_statement_consume:
        outcomes = _ack_at_once(items)
        if outcomes is not None:
            return outcomes
    return _ack_atomic(items)


@transaction.atomic(durable=True)
def _ack_atomic(items: Sequence[AckItem]) -> list[AckOutcome]:
    return queue_ack_in_txn(items=items, now=clock.now())


_VERDICT_ERRORS: dict[str, str | None] = {
    "applied": None,
    "noop": None,
    "unresolvable": UNRESOLVABLE,
    "bad_lease": BAD_LEASE,
}


def _ack_at_once(items: Sequence[AckItem]) -> list[AckOutcome] | None:
    """``queue_ack`` of ``completed`` acks only, in one statement
    (``Store.ack_completed``); None for anything else, nothing changed."""
    if any(item.status != "completed" or not _is_partition_id(item.partition_id) for item in items):
        return None
    done = store().ack_completed(
        items=[(item.transaction_id, int(item.partition_id), item.lease_id, item.group) for item in items],
        now=clock.now(),
    )
    if done is None:
        return None
    if done.woken:
        wakeups.hub.wake_threadsafe(list(done.woken))
    events.broadcast_on_commit(events.QUEUES_GROUP, {"type": "queues.changed"})
    outcomes = []
    for item, (verdict, released) in zip(items, done.verdicts, strict=True):
        if verdict == "no_partition":
            error: str | None = f"no partition {int(item.partition_id)}"
        else:
            error = _VERDICT_ERRORS[verdict]
        success = verdict in ("applied", "noop")
        outcomes.append(AckOutcome(item.index, item.transaction_id, success, error, released, False, verdict == "noop"))
    return outcomes


def _is_partition_id(raw: str) -> bool:
    return raw.isascii() and raw.isdigit() and len(raw) <= 18


def queue_ack_in_txn(*, items: Sequence[AckItem], now: datetime, fence_done: bool = False) -> list[AckOutcome]:
    """``queue_ack`` inside the caller's transaction, at time ``now``.

    Same outcomes as ``queue_ack``. The caller must hold an open
    transaction (asserted) and commit it: the acked cursors stay row-locked
    until then, and wake-ups and broadcasts go out only on commit. With
    ``fence_done`` (a transaction's acks, protocol 5.1) a fenced ack of a
    message already acked needs the live lease too, instead of being a
    no-op: a bundle sent again then rolls back rather than applying the
    rest of itself a second time.
    """
    assert connection.in_atomic_block
    outcomes: dict[int, AckOutcome] = {}
    by_cursor: dict[tuple[int, str], list[AckItem]] = defaultdict(list)
    wanted: set[int] = set()
    for item in items:
        raw = item.partition_id
        if not _is_partition_id(raw):
            outcomes[item.index] = AckOutcome(
                item.index, item.transaction_id, False, "partitionId is not a partition id"
            )
            continue
        wanted.add(int(raw))
        by_cursor[(int(raw), item.group)].append(item)
    partitions = {
        pid: (qid, qname, opts)
        for pid, qid, qname, opts in Partition.objects.filter(id__in=wanted).values_list(
            "id", "queue_id", "queue__name", "queue__options"
        )
    }
    alive = lock_queue_rows(qid for qid, _, _ in partitions.values())
    partitions = {pid: ref for pid, ref in partitions.items() if ref[0] in alive}
    woken: set[str] = set()
    for (pid, group), group_items in sorted(by_cursor.items()):
        if pid not in partitions:
            for item in group_items:
                outcomes[item.index] = AckOutcome(item.index, item.transaction_id, False, f"no partition {pid}")
            continue
        qid, qname, opts = partitions[pid]
        queue = QueueRef(qid, qname, opts)
        released = _ack_cursor(queue, pid, group, group_items, now, outcomes, fence_done)
        if released:
            woken.add(qname)
    if woken:
        wakeups.notify_on_commit(sorted(woken))
    if outcomes:
        events.broadcast_on_commit(events.QUEUES_GROUP, {"type": "queues.changed"})
    return [outcomes[item.index] for item in items]


def queue_ack_batch_in_txn(*, partition_id: int, group: str, lease_id: str, now: datetime) -> AckOutcome | None:
    """Complete the whole batch ``lease_id`` holds on (partition, group), inside the caller's transaction.

    The ack of the batch's last message, fenced by the lease (as
    ``queue_ack_in_txn`` with ``fence_done``): the cursor moves to the end
    of the batch and the lease is released. None when the lease is not the
    live one there, or its last message is gone (nothing is changed then).
    """
    assert connection.in_atomic_block
    row = (
        ConsumerCursor.objects.filter(partition_id=partition_id, group=group, lease_id=lease_id, leased_until__gt=now)
        .values_list("batch_last", flat=True)
        .first()
    )
    if row is None:
        return None
    last = (
        Message.objects.filter(partition_id=partition_id, offset=row).values_list("transaction_id", flat=True).first()
    )
    if last is None:
        return None
    item = AckItem(0, last, str(partition_id), "completed", lease_id, group=group)
    (outcome,) = queue_ack_in_txn(items=[item], now=now, fence_done=True)
    return outcome


def _ack_cursor(
    queue: QueueRef,
    pid: int,
    group: str,
    items: list[AckItem],
    now: datetime,
    outcomes: dict[int, AckOutcome],
    fence_done: bool = False,
) -> bool:
    """Apply one cursor's acks; return True when messages were handed back."""
    cursors = ConsumerCursor.objects.filter(partition_id=pid, group=group)
    cursor = cursors.select_for_update().first()
    if cursor is None:
        ConsumerCursor.objects.bulk_create([ConsumerCursor(partition_id=pid, group=group)], ignore_conflicts=True)
        cursor = cursors.select_for_update().get()
    offsets: dict[str, list[int]] = defaultdict(list)
    for txn, offset in Message.objects.filter(
        partition_id=pid, transaction_id__in={i.transaction_id for i in items}
    ).values_list("transaction_id", "offset"):
        offsets[txn].append(offset)

    committed = cursor.committed_offset
    delivered_last = max(committed, runs_delivered_last(cursor.delivery_runs))
    live_lease = cursor.lease_id if cursor.lease_id and cursor.leased_until and cursor.leased_until > now else None
    located: list[tuple[int, AckItem]] = []
    for item in items:
        found = offsets.get(item.transaction_id)
        if not found:
            outcomes[item.index] = AckOutcome(item.index, item.transaction_id, False, UNRESOLVABLE)
            continue
        ahead = [o for o in found if o > committed]
        offset = min(ahead) if ahead else max(found)
        if offset <= committed:
            if fence_done and item.lease_id is not None and item.lease_id != live_lease:
                outcomes[item.index] = AckOutcome(item.index, item.transaction_id, False, BAD_LEASE)
            elif item.status == "completed":
                outcomes[item.index] = AckOutcome(item.index, item.transaction_id, True, noop=True)
            else:
                outcomes[item.index] = AckOutcome(item.index, item.transaction_id, False, UNRESOLVABLE)
            continue
        if item.lease_id is not None and (item.lease_id != live_lease or offset > cursor.batch_last):
            outcomes[item.index] = AckOutcome(item.index, item.transaction_id, False, BAD_LEASE)
            continue
        if offset > delivered_last:
            # Never delivered to this group: acking it would move the cursor
            # past messages nobody received.
            outcomes[item.index] = AckOutcome(item.index, item.transaction_id, False, UNRESOLVABLE)
            continue
        located.append((offset, item))
    if not located:
        return False

    located.sort(key=lambda pair: pair[0])
    retry_count = cursor.retry_count
    dead: list[tuple[int, AckItem]] = []
    blocked = False
    results: list[tuple[AckItem, bool, bool]] = []  # item, dlq, noop
    failed = 0
    for offset, item in located:
        if blocked:
            # Below it a message comes back, so this one does too.
            results.append((item, False, False))
            continue
        status = item.status
        if status == "failed":
            failed += 1
        if status == "failed" and retry_count >= queue.retry_limit:
            status = "dlq"
        if status == "completed":
            committed = max(committed, offset)
            retry_count = 0
            results.append((item, False, False))
        elif status == "dlq":
            committed = max(committed, offset)
            dead.append((offset, item))
            retry_count = 0
            results.append((item, True, False))
        else:
            if status == "failed":
                retry_count += 1
            blocked = True
            results.append((item, False, False))

    if dead:
        _dead_letter(queue, pid, group, dead, cursor.retry_count, now)
    next_offset, log_start = Partition.objects.filter(pk=pid).values_list("next_offset", "log_start").get()
    fields: dict[str, Any] = {"committed_offset": committed, "retry_count": retry_count}
    if committed != cursor.committed_offset:
        fields["delivery_runs"] = runs_trim(cursor.delivery_runs, committed)
    skipped = min(committed, log_start - 1) - cursor.committed_offset
    if skipped > 0:
        # Deleted by retention before the group finished them: skipped, not
        # completed (as a claim from below the log start counts them).
        fields["start_offset"] = F("start_offset") + skipped
    # A failed ack hands the rest of the batch back at once, also when the
    # message itself goes to the DLQ: consume loops drop the batch after a
    # nack and pop again.
    nacked = any(item.status == "failed" for _, item in located)
    release = blocked or nacked or committed >= cursor.batch_last
    if release:
        fields.update(lease_id=None, leased_until=None, batch_last=committed)
    if dead:
        fields["dead_lettered"] = F("dead_lettered") + len(dead)
    # Everything the cursor passed that did not go to the DLQ was completed.
    acked = committed - cursor.committed_offset - len(dead)
    if acked:
        fields["acked"] = F("acked") + acked
    if failed:
        fields["failed"] = F("failed") + failed
    ConsumerCursor.objects.filter(pk=cursor.pk).update(**fields)
    released_now = release and cursor.lease_id is not None
    for item, dlq, noop in results:
        outcomes[item.index] = AckOutcome(item.index, item.transaction_id, True, None, released_now, dlq, noop)
    return blocked or (release and committed < next_offset - 1)


def _dead_letter(
    queue: QueueRef, pid: int, group: str, dead: list[tuple[int, AckItem]], retries: int, now: datetime
) -> None:
    errors = {offset: item.error for offset, item in dead}
    rows = Message.objects.filter(partition_id=pid, offset__in=list(errors)).values_list(
        "offset", "transaction_id", "message_id", "payload", "created_at", "producer_sub"
    )
    DeadLetter.objects.bulk_create(
        [
            DeadLetter(
                queue_id=queue.id,
                partition_id=pid,
                group=group,
                offset=offset,
                transaction_id=txn,
                message_id=mid,
                payload=payload,
                error=errors[offset],
                retry_count=retries,
                producer_sub=sub,
                created_at=created,
                failed_at=now,
            )
            for offset, txn, mid, payload, created, sub in rows
        ]
    )


# --------------------------------------------------------------------------
# Lease extend


def queue_lease_extend(*, lease_id: str, seconds: int) -> LeaseExtension:
    """Push back the expiry of every live lease of ``lease_id``.

    The lease then ends ``seconds`` from now, or later: an extension never
    shortens a lease. An expired or released lease, or an id that is no
    UUID (never handed out), is not renewed (``renewed == 0``,
    ``expires_at`` None). Raises ``InvalidArgument`` when ``seconds`` is
    under 1. Must be the outermost transaction
    (``queue_lease_extend_in_txn`` runs inside one).
    """
    if seconds < 1:
        raise InvalidArgument("seconds must be at least 1")
    if not is_uuid(lease_id):
        # Answered without a transaction: BEGIN IMMEDIATE on SQLite would
        # queue this behind every writer for nothing.
        return LeaseExtension(lease_id, 0, None)
    with transaction.atomic(durable=True):
        return queue_lease_extend_in_txn(lease_id=lease_id, seconds=seconds, now=clock.now())


def queue_lease_extend_in_txn(*, lease_id: str, seconds: int, now: datetime) -> LeaseExtension:
    """``queue_lease_extend`` inside the caller's transaction, at ``now``.

    The caller must hold an open transaction (asserted) and commit it.
    """
    assert connection.in_atomic_block
    if seconds < 1:
        raise InvalidArgument("seconds must be at least 1")
    if not is_uuid(lease_id):
        return LeaseExtension(lease_id, 0, None)
    target = now + timedelta(seconds=seconds)
    live = ConsumerCursor.objects.filter(lease_id=lease_id, leased_until__gt=now)
    renewed = live.update(leased_until=Greatest(F("leased_until"), Value(target)))
    if not renewed:
        return LeaseExtension(lease_id, 0, None)
    earliest = (
        ConsumerCursor.objects.filter(lease_id=lease_id)
        .order_by("leased_until")
        .values_list("leased_until", flat=True)
        .first()
    )
    return LeaseExtension(lease_id, renewed, earliest)


# --------------------------------------------------------------------------
# Positions (a transaction's ``positions`` part)


def queue_position_in_txn(*, queue: str, group: str, partition: str, offset: int | None, now: datetime) -> None:
    """Set where ``group`` reads next on ``partition`` of ``queue``.

    ``offset`` is the next offset to read (0 = from the start; past the end
    = after the last message); None forgets the group's cursor there, so it
    starts again like a new one. Releases any lease the group holds on the
    partition. Inside the caller's transaction (asserted). Raises
    ``QueueNotFound`` for a missing queue and ``ValueError`` for a missing
    partition or a negative offset.
    """
    assert connection.in_atomic_block
    queue_id = Queue.objects.filter(name=queue).values_list("id", flat=True).first()
    if queue_id is None or not lock_queue_rows([queue_id]):
        raise QueueNotFound()
    found = Partition.objects.filter(queue_id=queue_id, name=partition).values_list("id", "next_offset").first()
    if found is None:
        raise ValueError(f"queue {queue!r} has no partition {partition!r}")
    pid, next_offset = found
    cursors = ConsumerCursor.objects.filter(partition_id=pid, group=group)
    if offset is None:
        cursors.delete()
        return
    if offset < 0:
        raise ValueError("a position's offset is at least 0")
    committed = min(offset - 1, next_offset - 1)
    if cursors.select_for_update().first() is None:
        ConsumerCursor.objects.bulk_create(
            [ConsumerCursor(partition_id=pid, group=group, committed_offset=committed, start_offset=committed)],
            ignore_conflicts=True,
        )
    cursors.update(
        committed_offset=committed,
        start_offset=Least("start_offset", committed),
        lease_id=None,
        leased_until=None,
        batch_last=committed,
        delivery_runs=[],
        retry_count=0,
    )
    wakeups.notify_on_commit([queue])
