"""Firing due timers: one step, and the loop that runs steps under a lease.

A step fires up to ``TIMER_FIRE_BATCH`` due timers in ONE transaction: it
claims them (the store skips rows another step holds on PostgreSQL, so
several loops split the work), appends each message through the log's push
path with ``transactionId = txn`` and the promised message id, and deletes
the rows. The log's dedup window makes a second delivery of a txn
impossible.

The loop holds a permit of the lock ``queenadmin.timers`` (a semaphore of
``TIMER_LOOPS`` permits) and every step carries the permit's guard, so a
loop whose lease was lost (or taken over) commits nothing. A loop paused
past its lease in the middle of a step (SIGSTOP, a long GC, a VM pause)
also commits nothing: the step checks, just before commit, that the lease
it started under has not run out by the monotonic clock.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import close_old_connections, connection, transaction

from queenadmin.conf import internal, settings
from queenadmin.domain import clock, events, kv
from queenadmin.domain import queues as log_domain
from queenadmin.domain.timers import wake
from queenadmin.domain.timers.ops import DLQ_GROUP, LOOP_LOCK, MAX_ATTEMPTS, TimerOutcome
from queenadmin.domain.timers.store import Due, Held, Resume, WakeListener, store
from queenadmin.errors import LeaseExpired, PreconditionFailed, QueenError
from queenadmin.plumbing import db

logger = logging.getLogger(__name__)

#: A step stops adding timers past this many payload bytes.
FIRE_MAX_BYTES = 4 * 1024 * 1024
#: The lease of a loop's permit of ``LOOP_LOCK``, in seconds. Internal, not
#: a setting (docs/settings.md, "Internal constants"); a test hook
#: (conf.TEST_HOOKS): the frozen-loop test makes it short.
TIMER_LEASE_SECONDS = 10.0


def grid_wait(at: float, turn: int, loops: int, grid: float) -> float:
    """Seconds from ``at`` (``time.time()``) to the next point of ``turn`` (0
    to ``loops - 1``) on the grid: the points ``(k * loops + turn) * grid``.
    More than 0, at most ``loops * grid``."""
    period = grid * loops
    wait = (turn * grid - at) % period
    return wait if wait > 0 else period


@dataclass(frozen=True, slots=True)
class FireStep:
    """What one step did."""

    #: Messages appended.
    fired: int = 0
    #: Timers whose txn was already in the destination's dedup window: done
    #: and deleted, nothing appended.
    duplicates: int = 0
    #: Timers whose push was refused, pushed back by a backoff.
    backed_off: int = 0
    dead_lettered: int = 0
    #: The batch was full: more may be due now.
    more: bool = False
    #: When the earliest timer left is due (None: none is), if ``known_next``.
    next_fire_at: datetime | None = None
    known_next: bool = False
    #: With ``more``: the ``after`` of the next step.
    resume: Resume | None = None


def _backoff(attempts: int) -> timedelta:
    return timedelta(seconds=min(1.0 * 2**attempts, 60.0))


def _push_items(due: Sequence[Due]) -> list[log_domain.PushItem]:
    """The messages ``due`` timers put in the log."""
    return [
        log_domain.PushItem(
            queue=d.queue,
            partition=d.partition,
            payload_json=d.payload_json,
            transaction_id=d.txn,
            message_id=d.message_id,
            producer_sub=d.producer_sub,
        )
        for d in due
    ]


def _fire(due: Sequence[Due], now: datetime) -> FireStep:
    """Push ``due`` and delete the fired rows; inside the caller's transaction."""
    items = _push_items(due)
    try:
        with transaction.atomic():
            results = log_domain.queue_push_in_txn(items=items, now=now)
    except QueenError:
        # One timer's push refused the batch: fire them one by one, so only
        # the bad ones back off.
        return _fire_one_by_one(due, now)
    store().delete_ids([d.id for d in due])
    duplicates = sum(1 for r in results if r.status == "duplicate")
    return FireStep(fired=len(due) - duplicates, duplicates=duplicates)


def _fire_one_by_one(due: Sequence[Due], now: datetime) -> FireStep:
    fired = duplicates = backed_off = dead = 0
    done: list[int] = []
    for d in due:
        item = log_domain.PushItem(
            queue=d.queue,
            partition=d.partition,
            payload_json=d.payload_json,
            transaction_id=d.txn,
            message_id=d.message_id,
            producer_sub=d.producer_sub,
        )
        try:
            with transaction.atomic():
                (result,) = log_domain.queue_push_in_txn(items=[item], now=now)
        except QueenError as exc:
            attempts = d.attempts + 1
            error = f"{exc.code}: {exc.detail}"
            if attempts >= MAX_ATTEMPTS:
                log_domain.queue_dead_letter_in_txn(
                    queue=d.queue,
                    partition=d.partition,
                    group=DLQ_GROUP,
                    transaction_id=d.txn,
                    message_id=d.message_id,
                    payload_json=d.payload_json,
                    error=error,
                    retry_count=attempts,
                    now=now,
                    producer_sub=d.producer_sub,
                )
                done.append(d.id)
                dead += 1
            else:
                store().back_off(d.id, attempts=attempts, error=error, fire_at=now + _backoff(d.attempts), now=now)
                backed_off += 1
            continue
        done.append(d.id)
        if result.status == "duplicate":
            duplicates += 1
        else:
            fired += 1
    store().delete_ids(done)
    return FireStep(fired=fired, duplicates=duplicates, backed_off=backed_off, dead_lettered=dead)


class _PushRefused(Exception):
    """The fast step's push raised a ``QueenError``: its transaction rolls back."""


def timers_fire_due(
    *,
    now: datetime | None = None,
    limit: int | None = None,
    guard: kv.KVCheck | None = None,
    deadline: float | None = None,
    after: Resume | None = None,
) -> FireStep:
    """Fire the timers due at ``now`` (at most ``limit``) in one transaction.

    ``guard`` (a lease's KV check) makes the step commit only while the
    lease is the caller's: otherwise it raises ``PreconditionFailed`` and
    nothing is written. ``deadline`` (``time.monotonic()``) makes it raise
    ``LeaseExpired``, nothing written, when the step ends after it.
    ``after`` (the ``resume`` of a step that answered ``more``) lets the
    store start past the timers that step took. Must be the outermost call.

    The batch is taken (claimed and deleted) and, on PostgreSQL, appended
    to the log in one statement (``Store.move_due``); what the store did
    not append is pushed in one call, without a savepoint. When that push
    is refused, the step's transaction rolls back and a second one fires
    the batch timer by timer, so that only the refused ones back off.
    """
    now = now or clock.now()
    limit = limit or settings.TIMER_FIRE_BATCH
    try:
        return _step(now, limit, guard, deadline, after)
    except _PushRefused:
        return _step_one_by_one(now, limit, guard, deadline)


def _step(
    now: datetime, limit: int, guard: kv.KVCheck | None, deadline: float | None, after: Resume | None
) -> FireStep:
    with transaction.atomic(durable=True):
        if guard is not None:
            kv.kv_call_in_txn([guard], now=now)
        moved = store().move_due(now, limit, FIRE_MAX_BYTES, after)
        if not moved.taken:
            return FireStep(next_fire_at=moved.upcoming, known_next=moved.known_next)
        duplicates = moved.taken - len(moved.left) - moved.appended
        if moved.appended:
            log_domain.queue_appended_in_txn(queues=moved.queues)
        if moved.left:
            try:
                results = log_domain.queue_push_in_txn(items=_push_items(moved.left), now=now)
            except QueenError as exc:
                raise _PushRefused() from exc
            duplicates += sum(1 for r in results if r.status == "duplicate")
        if deadline is not None and time.monotonic() > deadline:
            raise LeaseExpired()
        events.broadcast_on_commit(events.TIMERS_GROUP, {"type": "timers.changed", "queues": moved.due_queues[:20]})
    more = moved.taken >= limit
    return FireStep(
        moved.taken - duplicates,
        duplicates,
        more=more,
        next_fire_at=moved.upcoming,
        known_next=moved.known_next,
        resume=moved.last if more else None,
    )


def _step_one_by_one(now: datetime, limit: int, guard: kv.KVCheck | None, deadline: float | None) -> FireStep:
    with transaction.atomic(durable=True):
        if guard is not None:
            kv.kv_call_in_txn([guard], now=now)
        due = store().claim_due(now, limit, FIRE_MAX_BYTES)
        if not due:
            return FireStep()
        step = _fire(due, now)
        if deadline is not None and time.monotonic() > deadline:
            raise LeaseExpired()
        events.broadcast_on_commit(
            events.TIMERS_GROUP, {"type": "timers.changed", "queues": sorted({d.queue for d in due})[:20]}
        )
    return FireStep(step.fired, step.duplicates, step.backed_off, step.dead_lettered, more=len(due) >= limit)


@transaction.atomic(durable=True)
def timer_fire_now(*, queue: str, timer_key: str, now: datetime | None = None) -> TimerOutcome:
    """Fire one pending timer now, whatever its due time; ``absent`` if not pending.

    Locks the row like a loop step does, so the timer is delivered exactly
    once whoever fires it. Must be the outermost call.
    """
    return timer_fire_now_in_txn(queue=queue, timer_key=timer_key, now=now or clock.now())


def timer_fire_now_in_txn(
    *, queue: str, timer_key: str, now: datetime, expect_message_id: str | None = None
) -> TimerOutcome:
    """``timer_fire_now`` inside the caller's transaction.

    With ``expect_message_id``, a timer rescheduled since (a new message id
    under the same key) is not fired: the answer is ``absent``.
    """
    assert connection.in_atomic_block, "timer_fire_now_in_txn needs the caller's transaction"
    held = store().claim_key(queue, timer_key)
    if held is None or (expect_message_id is not None and held.message_id != expect_message_id):
        return TimerOutcome("absent", queue, timer_key, None)
    return timer_fire_held_in_txn(held=held, now=now)


def timer_fire_held_in_txn(*, held: Held, now: datetime) -> TimerOutcome:
    """``timer_fire_now_in_txn`` of the timer ``timer_hold_in_txn`` gave the
    caller (its row is not read again); answers ``fired``."""
    assert connection.in_atomic_block, "timer_fire_held_in_txn needs the caller's transaction"
    _fire([held], now)
    events.broadcast_on_commit(events.TIMERS_GROUP, {"type": "timers.changed", "queues": [held.queue]})
    return TimerOutcome("fired", held.queue, held.timer_key, held.txn, held.message_id, now)


# --------------------------------------------------------------------------
# The loop


def _owner() -> str:
    return f"timers:{socket.gethostname()[:64]}:{os.getpid()}:{threading.get_ident()}"


class TimerLoop:
    """Fire due timers until ``stop`` is set, holding a permit of ``queenadmin.timers``.

    ``serve`` runs one in every worker (unless ``TIMER_LOOP_IN_SERVE`` is
    off) and ``manage.py run_timers`` runs one alone. Only permit holders
    fire, and each step is fenced by the permit's token.
    """

    def __init__(self, *, on_step: Callable[[FireStep], Any] | None = None) -> None:
        from queenadmin.domain import locks

        self.lease_seconds = internal("TIMER_LEASE_SECONDS", TIMER_LEASE_SECONDS)
        self.lock = locks.Lock(LOOP_LOCK, ttl=self.lease_seconds, limit=settings.TIMER_LOOPS, owner=_owner())
        self.on_step = on_step
        self._lease = locks.LoopLease(self.lock)
        self.fired = 0
        self._listen: WakeListener | None = None
        #: Loops holding a permit and this one's turn among them (by slot),
        #: as last counted, and when to count again.
        self._loops = 1
        self._turn = 0
        self._count_at = 0.0

    # -- waiting ---------------------------------------------------------

    def _open_listen(self) -> None:
        if self._listen is not None:
            return
        try:
            # None where the database has no channel to listen on (SQLite).
            self._listen = store().listen_wake()
        except Exception:
            logger.warning(
                "listening for timer wakes failed; timers of other replicas wake this loop within %s s",
                wake.idle_seconds(),
                exc_info=True,
            )

    def _sleep(self, seen: int, seconds: float, stop: threading.Event) -> None:
        if seconds <= 0 or stop.is_set():
            return
        if self._listen is None:
            wake.wait_local(seen, seconds)
            return
        # Local wakes (a stop among them) also make ``wake.local_fd()``
        # readable: one wait covers the other replicas' writes, this
        # process's and a stop, with no polling while idle.
        wake.drain_local()
        if wake.generation() != seen:
            return
        deadline = time.monotonic() + seconds
        try:
            while not stop.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                if self._listen.wait(left, wake.local_fd()):
                    wake.drain_local()
                    return
        except Exception:
            logger.warning("the wake listener's connection was lost; reconnecting", exc_info=True)
            with contextlib.suppress(Exception):
                self._listen.close()
            self._listen = None

    def _next_sleep(self, now: datetime, step: FireStep) -> float:
        idle = wake.idle_seconds()
        upcoming = step.next_fire_at if step.known_next else store().next_fire_at()
        until_due = idle if upcoming is None else (upcoming - now).total_seconds()
        return max(0.0, min(idle, until_due, self._lease.renew_due_in()))

    def turn_wait(self) -> float:
        """After a step that fired: seconds until this loop's next turn.

        While timers keep coming due, the loops holding a permit take turns
        on one wall-clock grid of ``TIMER_TICK_SECONDS``: loop i of n steps
        at the points (k * n + i) * tick (``grid_wait``), so together they
        step once a tick however many run, each step firing what came due
        meanwhile and waking the consumers once. A full batch does not wait;
        a schedule that wakes the loops, or a loop that found nothing due,
        steps off the grid. The turn and the count are read again every
        third of a lease.
        """
        from queenadmin.domain import locks

        at = time.monotonic()
        if at >= self._count_at:
            self._count_at = at + self.lease_seconds / 3
            try:
                slots = sorted(h.slot for h in locks.lock_holders(name=LOOP_LOCK).holders)
                mine = self.lock.slot
                self._loops = max(1, len(slots))
                self._turn = slots.index(mine) if mine in slots else 0
            except Exception:
                logger.warning("counting the timer loops failed", exc_info=True)
        return grid_wait(time.time(), self._turn, self._loops, settings.TIMER_TICK_SECONDS)

    # -- running ---------------------------------------------------------

    def step(self, after: Resume | None = None) -> FireStep | None:
        """One step: hold the permit, fire what is due. None without a permit.

        ``after``: the ``resume`` of the step before, when it answered ``more``.
        """
        if self._lease.hold() is None:
            return None
        deadline = self.lock.valid_until
        assert deadline is not None
        try:
            result = timers_fire_due(now=clock.now(), guard=self.lock.guard(), deadline=deadline, after=after)
        except (PreconditionFailed, LeaseExpired):
            logger.warning("timer loop lost its lease; it fired nothing and will try again")
            self._lease.give_up()
            return None
        self.fired += result.fired
        if self.on_step is not None:
            self.on_step(result)
        return result

    def run(self, stop: threading.Event) -> None:
        tick = settings.TIMER_TICK_SECONDS
        after: Resume | None = None
        while not stop.is_set():
            seen = wake.generation()
            try:
                close_old_connections()
                self._open_listen()
                result, after = self.step(after), None
                if result is None:
                    wait = min(wake.idle_seconds(), self.lease_seconds / 3)
                elif result.more:
                    # A run of full batches goes on past the last one taken;
                    # the step after it starts from the earliest again.
                    after = result.resume
                    continue
                else:
                    wait = self._next_sleep(clock.now(), result)
                    if result.fired:
                        wait = max(min(wait, tick), self.turn_wait())
                    elif wait <= 0:
                        # Due timers that another step holds (a peer loop, a
                        # cancel or move in flight): look again a tick later,
                        # not in a tight loop.
                        wait = tick
            except Exception as exc:
                # A pooler this process was not told about fails every step:
                # db logs one line a minute naming the setting, not a
                # traceback per step.
                if not db.pooler_session_error(exc):
                    logger.exception("timer loop step failed")
                connection.close()
                wait = 1.0
            # Pooled: give the connection back while the loop sleeps.
            close_old_connections()
            self._sleep(seen, wait, stop)
        with contextlib.suppress(Exception):
            self.lock.release()
        if self._listen is not None:
            with contextlib.suppress(Exception):
                self._listen.close()
        connection.close()
