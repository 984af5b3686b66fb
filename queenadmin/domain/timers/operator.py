"""Timers for operators: cancel, move and fire now on a person's word.

Each action aims at the timer the operator saw (its queue, key and the
message id it will fire as), runs in one transaction with its audit entry,
and tells plainly what happened when it lost a race: the timer fired (with
when, read from the log: the fired message carries the timer's ``txn``),
was rescheduled under the same key, or is gone.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Literal

from django.db import connection, transaction

from queenadmin.domain import clock
from queenadmin.domain.audit import Who
from queenadmin.domain.timers.calls import timer_hold_in_txn, timer_move_held_in_txn, timers_call_in_txn
from queenadmin.domain.timers.fire import timer_fire_held_in_txn
from queenadmin.domain.timers.ops import TimerCancel, TimerSchedule, check_lookup, payload_json_of
from queenadmin.domain.timers.store import Held
from queenadmin.errors import TimersBadRequest
from queenadmin.models import Message, Timer

Verb = Literal["cancel", "move", "fire"]


@dataclass(frozen=True)
class OperatorOutcome:
    """What an operator's cancel, move or fire did.

    ``done`` True: it happened (``deliver_at`` is the new due time of a
    move). Otherwise ``why`` says what the operator lost to: ``fired``
    (``fired_at`` from the log), ``rescheduled`` (the key holds a newer
    timer, due ``deliver_at``), or ``gone`` (cancelled, or fired and no
    longer in the log).
    """

    verb: Verb
    queue: str
    timer_key: str
    done: bool
    why: Literal["fired", "rescheduled", "gone"] | None = None
    deliver_at: datetime | None = None
    fired_at: datetime | None = None
    previous_due: datetime | None = None


def fired_at(*, queue: str, partition: str, txn: str) -> datetime | None:
    """When the timer with ``txn`` fired into ``queue``/``partition``, if it did.

    One indexed lookup (partition, transactionId). Takes no lock.
    """
    found = (
        Message.objects.filter(partition__queue__name=queue, partition__name=partition, transaction_id=txn)
        .order_by("offset")
        .values_list("created_at", flat=True)
        .first()
    )
    return found


@dataclass(frozen=True)
class SeenTimer:
    """The timer an operator saw: its queue and key, the message id it will
    fire as (a reschedule under the key gives it a new one), and its txn and
    partition (where the log has it once it fired)."""

    queue: str
    timer_key: str
    message_id: str
    txn: str
    partition: str


def _checked(seen: SeenTimer) -> SeenTimer:
    return replace(seen, queue=check_lookup(seen.queue, "queue"), timer_key=check_lookup(seen.timer_key, "timerKey"))


def _hold(seen: SeenTimer) -> Held | None:
    """The timer's row, held until the transaction ends, while it is still
    the one seen (read once: the action works on this answer)."""
    held = timer_hold_in_txn(queue=seen.queue, timer_key=seen.timer_key)
    return held if held is not None and held.message_id == seen.message_id else None


def _lost(verb: Verb, seen: SeenTimer) -> OperatorOutcome:
    """Why the action found no timer to act on (reads inside the transaction)."""
    queue, timer_key = seen.queue, seen.timer_key
    current = Timer.objects.filter(queue=queue, timer_key=timer_key).only("message_id", "deliver_at").first()
    if current is not None and current.message_id != seen.message_id:
        return OperatorOutcome(verb, queue, timer_key, False, "rescheduled", deliver_at=current.deliver_at)
    # The row may be gone: the log has the shown timer's txn if it fired.
    at = fired_at(queue=queue, partition=seen.partition, txn=seen.txn)
    if at is not None:
        return OperatorOutcome(verb, queue, timer_key, False, "fired", fired_at=at)
    return OperatorOutcome(verb, queue, timer_key, False, "gone")


def _describe(timer: Held) -> str:
    return f"due {clock.iso_micros_z(timer.deliver_at)}, message {timer.message_id}, partition {timer.partition}"


def timer_operator_action_in_txn(
    *,
    verb: Verb,
    seen: SeenTimer,
    who: Who,
    to: datetime | None = None,
    by: timedelta | None = None,
    now: datetime | None = None,
) -> OperatorOutcome:
    """Cancel, move (``to`` or ``by``) or fire now the timer the operator saw.

    A timer rescheduled under ``seen``'s key since is left alone. The
    timer's row is locked and read once. Writes ``who``'s audit entry in
    the same transaction when the action happens. Raises
    ``TimersBadRequest`` for a bad name or key and ``TimerHorizonExceeded``
    for a move past the horizon. Runs inside the caller's transaction.
    """
    assert connection.in_atomic_block, "timer_operator_action_in_txn needs the caller's transaction"
    now = now or clock.now()
    seen = _checked(seen)
    held = _hold(seen)
    if held is None:
        return _lost(verb, seen)
    if verb == "cancel":
        (outcome,) = timers_call_in_txn([TimerCancel(seen.queue, seen.timer_key)], now=now)
        after = "cancelled"
    elif verb == "move":
        outcome = timer_move_held_in_txn(held=held, to=to, by=by, now=now)
        after = f"due {clock.iso_micros_z(outcome.deliver_at)}"
    else:
        outcome = timer_fire_held_in_txn(held=held, now=now)
        after = f"fired at {clock.iso_micros_z(now)}"
    if not outcome.ok:
        return _lost(verb, seen)
    target = f"{seen.queue}/{seen.timer_key}"
    who.record_in_txn(now=now, action=f"timer.{verb}", target=target, before=_describe(held), after=after)
    return OperatorOutcome(
        verb,
        seen.queue,
        seen.timer_key,
        True,
        deliver_at=outcome.deliver_at,
        fired_at=now if verb == "fire" else None,
        previous_due=held.deliver_at,
    )


#: ``timer_operator_action_in_txn`` as its own transaction: must be the outermost call.
timer_operator_action = transaction.atomic(durable=True)(timer_operator_action_in_txn)


def timer_operator_reschedule_in_txn(
    *, seen: SeenTimer, who: Who, to: datetime, payload: bytes | None = None, now: datetime | None = None
) -> OperatorOutcome:
    """Replace the timer the operator saw with a new due time ``to`` and payload.

    ``payload`` None keeps the timer's payload. A reschedule under the same
    key with the same ``txn`` and partition (a new message id, as a
    client's reschedule makes), so the timer that fires is the edited one.
    Lost races answer as ``timer_operator_action`` does. Raises
    ``TimersBadRequest`` for an encrypted timer's new payload (its bytes are
    sealed for the consumer) and the schedule's refusals (payload size,
    horizon). Writes ``who``'s audit entry in the same transaction. Runs
    inside the caller's transaction.
    """
    assert connection.in_atomic_block, "timer_operator_reschedule_in_txn needs the caller's transaction"
    now = now or clock.now()
    seen = _checked(seen)
    held = _hold(seen)
    if held is None:
        return _lost("move", seen)
    if payload is not None and held.encrypted:
        raise TimersBadRequest("an encrypted timer's payload cannot be edited")
    body = held.payload if payload is None else payload
    op = TimerSchedule(
        seen.queue,
        seen.timer_key,
        body,
        to - now,
        held.txn,
        held.partition,
        encrypted=held.encrypted,
        producer_sub=held.producer_sub,
    )
    (outcome,) = timers_call_in_txn([op], now=now)
    changed = "payload and due time" if payload is not None and body != held.payload else "due time"
    who.record_in_txn(
        now=now,
        action="timer.reschedule",
        target=f"{seen.queue}/{seen.timer_key}",
        before=_describe(held) + (f", payload {held.payload_json[:500]}" if payload is not None else ""),
        after=f"{changed}: due {clock.iso_micros_z(outcome.deliver_at)}, message {outcome.message_id}"
        + (f", payload {payload_json_of(body)[:500]}" if payload is not None else ""),
    )
    return OperatorOutcome(
        "move", seen.queue, seen.timer_key, True, deliver_at=outcome.deliver_at, previous_due=held.deliver_at
    )


#: ``timer_operator_reschedule_in_txn`` as its own transaction: must be the outermost call.
timer_operator_reschedule = transaction.atomic(durable=True)(timer_operator_reschedule_in_txn)
