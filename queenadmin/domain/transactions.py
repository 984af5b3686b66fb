"""Transactions: acks, pushes, positions, KV writes and timers, all or nothing.

A stream cycle (``domain/streams``) is a bundle too: its ``stream`` part
(the state ops of one query and source partition) goes first, then its
fenced ack and its sink pushes.

One ``txn_commit`` applies a bundle in the protocol's order (acks, pushes,
positions, KV, timers; protocol.md section 5.2) inside ONE database
transaction, from the inner (``..._in_txn``) forms of each concept. The
first part that cannot apply rolls the whole bundle back, and the answer
says why (``rejected_ack``, ``duplicate``, ``kv_precondition``, ...): a
rollback is an ordinary outcome, not an exception. Nothing of a rolled-back
bundle is visible afterwards, events included (they go out on commit only).

A lock's guard is a required KV ``check`` of its permit at its token: a
holder that was paused past its lease and replaced commits nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from django.db import transaction

from queenadmin.domain import clock, kv, queues, timers
from queenadmin.domain.locks import history as lock_history
from queenadmin.domain.streams.ops import StreamStateOps
from queenadmin.domain.streams.state import stream_state_apply_in_txn
from queenadmin.errors import PreconditionFailed, QueueFull, QueueNotFound, StreamNotFound

RollbackReason = Literal[
    "rejected_ack",
    "duplicate",
    "kv_precondition",
    "queue_not_found",
    "bad_request",
    "too_large",
    "queue_full",
    "stream_not_found",
]
#: Largest position metadata (protocol 5.1).
MAX_POSITION_METADATA = 4096


@dataclass(frozen=True, slots=True)
class TxnPush:
    """A pushed item at its flat result index."""

    index: int
    item: queues.PushItem


@dataclass(frozen=True, slots=True)
class TxnPosition:
    """Set where ``group`` reads ``partition`` of ``queue``: ``offset`` is the
    next offset to read (None = forget the group's cursor there)."""

    index: int
    queue: str
    group: str
    partition: str
    offset: int | None
    metadata: str | None = None


@dataclass(frozen=True)
class TxnBundle:
    """What one transaction commits. Acks and pushes carry their flat result
    index (the ``operations`` order); KV, timer and position results follow
    them in that order."""

    acks: tuple[queues.AckItem, ...] = ()
    pushes: tuple[TxnPush, ...] = ()
    positions: tuple[TxnPosition, ...] = ()
    kv: tuple[kv.KVOp, ...] = ()
    timers: tuple[timers.TimerOp, ...] = ()
    #: A stream cycle's state ops; with it, an ack that would change
    #: nothing (its messages were acked already, under a lease still held)
    #: rolls the bundle back instead of applying the rest a second time.
    stream: StreamStateOps | None = None
    #: Why the bundle cannot apply although its shape was readable (an
    #: inline push without a queue, a partition id that is no number):
    #: the protocol answers those as a ``bad_request`` rollback, not a 400.
    invalid: str | None = None

    @property
    def operations(self) -> int:
        """Results the ``operations`` part answers (acks and pushed items)."""
        return len(self.acks) + len(self.pushes)

    @property
    def empty(self) -> bool:
        return not (self.acks or self.pushes or self.positions or self.kv or self.timers or self.stream)


@dataclass(frozen=True, slots=True)
class AckDone:
    index: int
    transaction_id: str
    dlq: bool
    lease_released: bool = False


@dataclass(frozen=True, slots=True)
class Pushed:
    index: int
    transaction_id: str
    message_id: str
    queue: str
    #: The same transactionId came earlier in this bundle; that one is the message.
    duplicate: bool


@dataclass(frozen=True, slots=True)
class KVDone:
    index: int
    op_index: int
    result: kv.KVResult


@dataclass(frozen=True, slots=True)
class TimerDone:
    index: int
    op_index: int
    outcome: timers.TimerOutcome


@dataclass(frozen=True, slots=True)
class PositionSet:
    index: int


TxnResult = AckDone | Pushed | KVDone | TimerDone | PositionSet


@dataclass(frozen=True)
class TxnOutcome:
    """A committed bundle (``success``) with its results in flat-index order,
    or a rolled-back one with its ``reason`` and ``error`` text (and, for
    ``kv_precondition``, the failed op's flat index, reason, version, value)."""

    transaction_id: str
    success: bool
    results: tuple[TxnResult, ...] = ()
    reason: RollbackReason | None = None
    error: str | None = None
    precondition: PreconditionFailed | None = field(default=None, compare=False)


class _Rollback(Exception):
    def __init__(self, reason: RollbackReason, error: str, precondition: PreconditionFailed | None = None) -> None:
        super().__init__(error)
        self.reason = reason
        self.error = error
        self.precondition = precondition
        #: A lock's guard whose token was stale: kept in the lock's history.
        self.guard: kv.KVCheck | None = None


def txn_commit(
    *,
    bundle: TxnBundle,
    guard: kv.KVCheck | Any | None = None,
    now: datetime | None = None,
    producer_sub: str | None = None,
) -> TxnOutcome:
    """Commit ``bundle`` all or nothing; must be the outermost call.

    ``producer_sub`` (the caller's identity) is stamped on what the bundle
    pushes and on the timers it schedules (``producerSub``).

    ``guard`` (a ``locks.Lock`` handle, e.g. from ``locks.hold()``, or a
    ``KVCheck``) goes first in the KV part: the bundle commits only while
    that lease is current. Returns ``TxnOutcome``: committed with one result
    per item, or rolled back with the first reason in apply order (a lost
    ``guard`` is ``kv_precondition`` with ``failed_index`` -1). Raises
    only for input that no transaction could apply (the refusals of the
    concepts' rules).
    """
    now = now or clock.now()
    transaction_id = queues.uuid7()
    kv_ops = bundle.kv
    if guard is not None:
        check = guard if isinstance(guard, kv.KVCheck) else guard.guard()
        kv_ops = (check, *kv_ops)
    try:
        with transaction.atomic(durable=True):
            results = _apply(bundle, kv_ops, guarded=guard is not None, now=now, producer_sub=producer_sub)
    except _Rollback as exc:
        if exc.guard is not None:
            lock_history.lock_guard_refused(check=exc.guard, now=now)
        return TxnOutcome(transaction_id, False, (), exc.reason, exc.error, exc.precondition)
    return TxnOutcome(transaction_id, True, tuple(sorted(results, key=lambda r: r.index)))


def _apply(
    bundle: TxnBundle, kv_ops: tuple[kv.KVOp, ...], *, guarded: bool, now: datetime, producer_sub: str | None
) -> list[TxnResult]:
    if bundle.invalid is not None:
        raise _Rollback("bad_request", f"QTXN {bundle.invalid}")
    if bundle.empty and not guarded:
        raise _Rollback("bad_request", "QTXN a transaction needs at least one of operations, kv, timers or positions")
    out: list[TxnResult] = []
    if bundle.stream is not None:
        try:
            stream_state_apply_in_txn(ops=bundle.stream, now=now)
        except StreamNotFound as exc:
            raise _Rollback("stream_not_found", exc.detail) from exc
    out += _acks(bundle.acks, now, advance=bundle.stream is not None)
    if bundle.stream is not None and bundle.stream.release_lease:
        out = _complete_batches(bundle.acks, out, now)
    out += _pushes(bundle.pushes, now, producer_sub)
    out += _positions(bundle.positions, now)
    kv_base = bundle.operations
    if kv_ops:
        try:
            results = kv.kv_call_in_txn(kv_ops, now=now, by=producer_sub)
        except PreconditionFailed as exc:
            # The flat index of the failed op. An in-process guard comes
            # first and has no result index of its own: it fails as -1.
            shift = len(kv_ops) - len(bundle.kv)
            flat = -1 if exc.failed_index < shift else kv_base + exc.failed_index - shift
            failed = PreconditionFailed(
                failed_index=flat, kv_reason=exc.kv_reason, version=exc.version, value=exc.value
            )
            refused = _Rollback(
                "kv_precondition", "QKV a required KV precondition failed; the transaction rolled back", failed
            )
            stale = kv_ops[exc.failed_index]
            if isinstance(stale, kv.KVCheck) and stale.namespace == kv.LOCKS_NAMESPACE:
                refused.guard = stale
            raise refused from exc
        own = results[len(kv_ops) - len(bundle.kv) :]
        out += [KVDone(kv_base + i, i, r) for i, r in enumerate(own)]
    timer_base = kv_base + len(bundle.kv)
    if bundle.timers:
        outcomes = timers.timers_call_in_txn(bundle.timers, now=now, producer_sub=producer_sub)
        out += [TimerDone(timer_base + i, i, o) for i, o in enumerate(outcomes)]
    return out


def _acks(acks: tuple[queues.AckItem, ...], now: datetime, *, advance: bool = False) -> list[TxnResult]:
    if not acks:
        return []
    outcomes = queues.queue_ack_in_txn(items=acks, now=now, fence_done=True)
    for outcome in outcomes:
        if not outcome.success:
            raise _Rollback(
                "rejected_ack",
                f"QTXN the ack of {outcome.transaction_id} was rejected ({outcome.error}); the transaction rolled back",
            )
        if advance and outcome.noop:
            raise _Rollback(
                "rejected_ack",
                f"QTXN {outcome.transaction_id} was acknowledged already; the transaction rolled back",
            )
    return [AckDone(o.index, o.transaction_id, o.dlq, o.lease_released) for o in outcomes]


def _complete_batches(acks: tuple[queues.AckItem, ...], out: list[TxnResult], now: datetime) -> list[TxnResult]:
    """A stream cycle that releases its lease completes the lease's batch.

    Its ack names the last message in the runner's order (createdAt, id),
    which need not be the batch's last offset; Queen's log engine moves the
    cursor to the batch's end, and so does this.
    """
    by_index = {a.index: a for a in acks}
    completed: list[TxnResult] = []
    for result in out:
        ack = by_index.get(result.index) if isinstance(result, AckDone) else None
        if isinstance(result, AckDone) and not result.lease_released and ack is not None and ack.lease_id:
            outcome = queues.queue_ack_batch_in_txn(
                partition_id=int(ack.partition_id), group=ack.group, lease_id=ack.lease_id, now=now
            )
            if outcome is not None and outcome.success:
                result = AckDone(result.index, result.transaction_id, result.dlq, outcome.lease_released)
        completed.append(result)
    return completed


def _pushes(pushes: tuple[TxnPush, ...], now: datetime, producer_sub: str | None) -> list[TxnResult]:
    if not pushes:
        return []
    try:
        results = queues.queue_push_in_txn(items=[p.item for p in pushes], now=now, producer_sub=producer_sub)
    except QueueFull as exc:
        raise _Rollback("queue_full", f"QFULL {exc.detail}; the transaction rolled back") from exc
    fresh = {r.message_id for r in results if r.status == "queued"}
    out: list[TxnResult] = []
    for push, result in zip(pushes, results, strict=True):
        if result.status == "duplicate" and result.message_id not in fresh:
            raise _Rollback(
                "duplicate",
                f"QDUP a pushed message to {push.item.queue}/{push.item.partition} is a duplicate "
                f"(original offset {result.offset}); the transaction rolled back",
            )
        out.append(
            Pushed(push.index, result.transaction_id, result.message_id, result.queue, result.status == "duplicate")
        )
    return out


def _positions(positions: tuple[TxnPosition, ...], now: datetime) -> list[TxnResult]:
    out: list[TxnResult] = []
    for position in positions:
        if position.metadata is not None and len(position.metadata.encode()) > MAX_POSITION_METADATA:
            raise _Rollback("too_large", f"QTXN position metadata is over {MAX_POSITION_METADATA} bytes")
        try:
            queues.queue_position_in_txn(
                queue=position.queue,
                group=position.group,
                partition=position.partition,
                offset=position.offset,
                now=now,
            )
        except QueueNotFound as exc:
            raise _Rollback("queue_not_found", f"QTXN queue {position.queue!r} does not exist") from exc
        except ValueError as exc:
            raise _Rollback("bad_request", f"QTXN {exc}") from exc
        out.append(PositionSet(position.index))
    return out
