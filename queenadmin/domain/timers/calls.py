"""Schedule, cancel, move and fire timers; read them.

Writes come in two forms (style.md section 4): ``timers_call`` opens its
own transaction, ``timers_call_in_txn`` runs inside the caller's (a transaction
of the API composes it with pushes, acks and KV writes). Each write
publishes ``timers.changed`` after commit and wakes the firing loops when
a timer comes due sooner than they would look.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, Min, Q

from queenadmin.domain import clock, events
from queenadmin.domain.kv.store.base import prefix_range
from queenadmin.domain.queues import uuid7
from queenadmin.domain.timers import wake
from queenadmin.domain.timers.ops import (
    DEFAULT_PAGE_LIMIT,
    DEFAULT_PARTITION,
    MAX_COUNT_PREFIX_BYTES,
    MAX_PAGE_LIMIT,
    Status,
    TimerCancel,
    TimerFilter,
    TimerOp,
    TimerOutcome,
    TimerPage,
    TimerRow,
    TimerSchedule,
    check_delay,
    check_filter,
    check_lookup,
    check_schedule,
    check_unique_keys,
    payload_json_of,
)
from queenadmin.domain.timers.store import Held, NewRow, selected, store
from queenadmin.errors import TimersBadRequest
from queenadmin.models import Timer
from queenadmin.plumbing import db


def timers_call_in_txn(ops: Sequence[TimerOp], *, now: datetime) -> list[TimerOutcome]:
    """Apply timer ops inside the caller's transaction; one outcome per op.

    A schedule over a pending timer replaces it (``rescheduled``; it keeps
    ``created_at``, its attempts start again); a cancel that finds nothing
    answers ``absent`` with the ``txn`` it was given. Raises
    ``TimersBadRequest`` when a key appears twice, and the rule refusals of
    ``check_schedule``; nothing is written then.
    """
    assert connection.in_atomic_block, "timers_call_in_txn needs the caller's transaction"
    check_unique_keys(ops)
    schedules = [op for op in ops if isinstance(op, TimerSchedule)]
    for op in schedules:
        check_schedule(op)
    the_store = store()
    cancels = [(op.queue, op.timer_key) for op in ops if isinstance(op, TimerCancel)]
    removed = the_store.delete_keys(cancels) if cancels else {}
    minted = {(op.queue, op.timer_key): uuid7() for op in schedules}
    rows = [
        NewRow(
            queue=op.queue,
            timer_key=op.timer_key,
            partition=op.partition,
            deliver_at=now + op.delay,
            txn=op.txn,
            message_id=minted[(op.queue, op.timer_key)],
            payload=op.payload,
            payload_json=payload_json_of(op.payload),
            encrypted=op.encrypted,
            producer_sub=op.producer_sub,
        )
        for op in schedules
    ]
    existed = the_store.upsert(rows, now)
    out: list[TimerOutcome] = []
    for command in ops:
        ident = (command.queue, command.timer_key)
        if isinstance(command, TimerCancel):
            if ident in removed:
                out.append(TimerOutcome("cancelled", command.queue, command.timer_key, removed[ident]))
            else:
                out.append(TimerOutcome("absent", command.queue, command.timer_key, command.txn))
        else:
            status: Status = "rescheduled" if ident in existed else "scheduled"
            deliver_at = now + command.delay
            out.append(TimerOutcome(status, command.queue, command.timer_key, command.txn, minted[ident], deliver_at))
    if rows or removed:
        _changed(sorted({op.queue for op in ops}))
    if rows:
        wake.on_commit(min(r.deliver_at for r in rows), now)
    return out


@transaction.atomic(durable=True)
def timers_call(ops: Sequence[TimerOp], *, now: datetime | None = None) -> list[TimerOutcome]:
    """``timers_call_in_txn`` as its own transaction; must be the outermost call."""
    return timers_call_in_txn(ops, now=now or clock.now())


def _changed(queues: list[str]) -> None:
    events.broadcast_on_commit(events.TIMERS_GROUP, {"type": "timers.changed", "queues": queues[:20]})


# --------------------------------------------------------------------------
# The in-process API


def timer_schedule(
    *,
    queue: str,
    timer_key: str,
    payload: Any,
    delay: timedelta,
    partition: str = DEFAULT_PARTITION,
    txn: str | None = None,
    now: datetime | None = None,
) -> TimerOutcome:
    """Schedule ``payload`` (any JSON value, or ``bytes`` as they are) ``delay`` from now.

    Returns the outcome with the promised ``message_id`` and ``txn`` (minted
    when not given). Must be the outermost call.
    """
    body = payload if isinstance(payload, bytes) else db.json_text(payload).encode()
    op = TimerSchedule(queue, timer_key, body, delay, txn or uuid7(), partition)
    return timers_call([op], now=now)[0]


def timer_cancel(*, queue: str, timer_key: str, txn: str | None = None, now: datetime | None = None) -> TimerOutcome:
    """Cancel the pending timer: ``cancelled``, or ``absent`` (it may have fired)."""
    return timers_call([TimerCancel(check_lookup(queue, "queue"), check_lookup(timer_key, "timerKey"), txn)], now=now)[
        0
    ]


def timer_hold_in_txn(*, queue: str, timer_key: str) -> Held | None:
    """The pending timer ``(queue, timer_key)``, read whole, its row held
    until the caller's transaction ends; None when none is pending.

    It waits for a fire step that holds the row, then finds the timer gone.
    For callers that look at a timer before they change it: hand the answer
    to ``timer_move_held_in_txn`` or ``timer_fire_held_in_txn``, which do
    not read the row again.
    """
    assert connection.in_atomic_block, "timer_hold_in_txn needs the caller's transaction"
    return store().claim_key(queue, timer_key)


def timer_move_in_txn(
    *,
    queue: str,
    timer_key: str,
    to: datetime | None = None,
    by: timedelta | None = None,
    expect_message_id: str | None = None,
    now: datetime | None = None,
) -> TimerOutcome:
    """Move a pending timer to ``to``, or by ``by`` from its due time; payload kept.

    A time in the past fires it on the next step. Returns ``moved`` with
    the new due time, or ``absent`` when it was not pending (it fired or
    was cancelled: the fire and the move are serialised on the row, so it
    never fires at the old time after a ``moved``). With
    ``expect_message_id``, a timer rescheduled since (a new message id
    under the same key) is left alone: the answer is ``absent``. Raises
    ``TimerHorizonExceeded`` past the horizon. Runs inside the caller's
    transaction.
    """
    assert connection.in_atomic_block, "timer_move_in_txn needs the caller's transaction"
    now = now or clock.now()
    _check_to_or_by(to, by)
    held = store().claim_key(queue, timer_key)
    if held is None or (expect_message_id is not None and held.message_id != expect_message_id):
        return TimerOutcome("absent", queue, timer_key, None)
    return timer_move_held_in_txn(held=held, now=now, to=to, by=by)


#: ``timer_move_in_txn`` as its own transaction: must be the outermost call.
timer_move = transaction.atomic(durable=True)(timer_move_in_txn)


def timer_move_held_in_txn(
    *, held: Held, now: datetime, to: datetime | None = None, by: timedelta | None = None
) -> TimerOutcome:
    """``timer_move_in_txn`` of the timer ``timer_hold_in_txn`` gave the caller.

    Answers ``moved``, or ``absent`` when the row is no longer the one held
    (only possible without row locks and SQLite's one writer). Raises
    ``TimersBadRequest`` unless exactly one of ``to`` and ``by`` is given,
    and ``TimerHorizonExceeded`` past the horizon.
    """
    assert connection.in_atomic_block, "timer_move_held_in_txn needs the caller's transaction"
    _check_to_or_by(to, by)
    deliver_at = to if to is not None else held.deliver_at + by  # type: ignore[operator]
    check_delay(deliver_at - now)
    if not store().move(held, deliver_at=deliver_at, now=now):
        return TimerOutcome("absent", held.queue, held.timer_key, None)
    _changed([held.queue])
    wake.on_commit(deliver_at, now)
    return TimerOutcome("moved", held.queue, held.timer_key, held.txn, held.message_id, deliver_at)


def _check_to_or_by(to: datetime | None, by: timedelta | None) -> None:
    if (to is None) == (by is None):
        raise TimersBadRequest("give exactly one of to or by")


# --------------------------------------------------------------------------
# Reads (no locks)


def _row(timer: Timer, *, with_payload: bool) -> TimerRow:
    return TimerRow(
        id=timer.pk,
        queue=timer.queue,
        timer_key=timer.timer_key,
        partition=timer.partition,
        deliver_at=timer.deliver_at,
        fire_at=timer.fire_at,
        txn=timer.txn,
        message_id=timer.message_id,
        encrypted=timer.encrypted,
        producer_sub=timer.producer_sub,
        attempts=timer.attempts,
        last_error=timer.last_error,
        created_at=timer.created_at,
        updated_at=timer.updated_at,
        payload=bytes(timer.payload) if with_payload else None,
    )


_LIST_FIELDS = [f.name for f in Timer._meta.fields if f.name not in ("payload", "payload_json")]


def timer_peek(*, queue: str, timer_key: str) -> TimerRow | None:
    """The pending timer with its payload, or None."""
    timer = Timer.objects.filter(queue=queue, timer_key=timer_key).first()
    return None if timer is None else _row(timer, with_payload=True)


def timers_list(*, queue: str, after: str = "", limit: int = DEFAULT_PAGE_LIMIT) -> TimerPage:
    """A keyset page of one queue's pending timers by key (``after`` exclusive).

    ``limit`` is clamped to 1..1000, never refused.
    """
    limit = max(1, min(MAX_PAGE_LIMIT, limit))
    rows = Timer.objects.filter(queue=queue).only(*_LIST_FIELDS).order_by("timer_key")
    if after:
        rows = rows.filter(timer_key__gt=after)
    found = list(rows[: limit + 1])
    page = tuple(_row(t, with_payload=False) for t in found[:limit])
    truncated = len(found) > limit
    return TimerPage(page, truncated, page[-1].timer_key if truncated else None)


def timers_count(*, queue: str, prefix: str = "") -> int:
    """How many timers of ``queue`` are pending (under ``prefix`` when given)."""
    if len(prefix.encode()) > MAX_COUNT_PREFIX_BYTES or "\x00" in prefix:
        raise TimersBadRequest(
            f"prefix is at most {MAX_COUNT_PREFIX_BYTES} bytes, without NUL", reason="timers_count_bad_prefix"
        )
    rows = Timer.objects.filter(queue=queue)
    if prefix:
        rows = rows.filter(prefix_range("timer_key", prefix))
    return rows.count()


def _cursor(after: str) -> tuple[datetime, int] | None:
    if not after:
        return None
    stamp, _, ident = after.rpartition("|")
    try:
        moment, number = datetime.fromisoformat(stamp), int(ident)
    except ValueError:
        raise TimersBadRequest("after is not a cursor this list gave out") from None
    if moment.tzinfo is None or not 0 <= number < 2**63:
        raise TimersBadRequest("after is not a cursor this list gave out")
    return moment, number


def timers_pending(
    *,
    queue: str = "",
    key_prefix: str = "",
    after: str = "",
    limit: int = DEFAULT_PAGE_LIMIT,
    selection: TimerFilter | None = None,
    start: datetime | None = None,
) -> TimerPage:
    """Pending timers of every queue (or one) by due time, keyset paged.

    ``selection`` filters (else ``queue`` and ``key_prefix``; a prefix is a
    byte-order range of the key). ``after`` is the ``next_after`` of the
    previous page; without it, ``start`` begins the page at that due time
    (a jump). For dashboards. Raises ``TimersBadRequest`` for a cursor this
    list did not give out and a filter that makes no sense.
    """
    limit = max(1, min(MAX_PAGE_LIMIT, limit))
    selection = check_filter(selection or TimerFilter(queue=queue, key_prefix=key_prefix))
    rows = selected(selection).only(*_LIST_FIELDS).order_by("deliver_at", "id")
    cursor = _cursor(after)
    if cursor is not None:
        rows = rows.filter(Q(deliver_at__gt=cursor[0]) | Q(deliver_at=cursor[0], id__gt=cursor[1]))
    elif start is not None:
        rows = rows.filter(deliver_at__gte=start)
    found = list(rows[: limit + 1])
    page = tuple(_row(t, with_payload=False) for t in found[:limit])
    truncated = len(found) > limit
    last = page[-1] if truncated else None
    return TimerPage(page, truncated, None if last is None else f"{last.deliver_at.isoformat()}|{last.id}")


def timers_cursor(after: str) -> tuple[datetime, int] | None:
    """The ``(deliver_at, id)`` a ``timers_pending`` cursor names, or None
    for none. Raises ``TimersBadRequest`` for one it did not give out."""
    return _cursor(after)


@dataclass(frozen=True, slots=True)
class DueHistogram:
    start: datetime
    bucket: timedelta
    #: Timers due in each bucket from ``start``; the first also holds
    #: every timer already overdue.
    counts: tuple[int, ...]
    next_due: datetime | None
    total: int


def timers_due_histogram(
    *, now: datetime | None = None, bucket: timedelta = timedelta(minutes=1), buckets: int = 60
) -> DueHistogram:
    """Pending timers per ``bucket`` over the next ``buckets`` buckets."""
    now = now or clock.now()
    end = now + bucket * buckets
    counts = [0] * buckets
    step = bucket.total_seconds()
    for deliver_at in Timer.objects.filter(deliver_at__lt=end).values_list("deliver_at", flat=True).iterator():
        index = int(max(0.0, (deliver_at - now).total_seconds()) // step)
        counts[min(index, buckets - 1)] += 1
    totals = Timer.objects.aggregate(n=Count("id"), first=Min("deliver_at"))
    return DueHistogram(now, bucket, tuple(counts), totals["first"], int(totals["n"]))
