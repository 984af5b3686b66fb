"""Timers for operators: cancel, move and fire now on a person's word.

Each action aims at the timer the operator saw (its queue, key and the
message id it will fire as), runs in one transaction with its audit entry,
and tells plainly what happened when it lost a race: the timer fired (with
when, read from the log: the fired message carries the timer's ``txn``),
was rescheduled under the same key, or is gone.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from django.db import connection, transaction

from queenadmin.domain import clock
from queenadmin.domain.audit import Who
from queenadmin.domain.timers.calls import timer_hold_in_txn, timer_move_held_in_txn, timers_call_in_txn
from queenadmin.domain.timers.fire import timer_fire_held_in_txn
from queenadmin.domain.timers.ops import TimerCancel, TimerSchedule, check_key, check_name, payload_json_of
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
class _Seen:
    """The timer the operator saw, and what they meant to do with it."""

    verb: Verb
    queue: str
    timer_key: str
    message_id: str
    txn: str
    partition: str

    def hold(self) -> Held | None:
        """The timer's row, held until the transaction ends, while it is still
        the one seen (read once: the action works on this answer)."""
        held = timer_hold_in_txn(queue=self.queue, timer_key=self.timer_key)
        return held if held is not None and held.message_id == self.message_id else None

    def lost(self) -> OperatorOutcome:
        """Why the action found no timer to act on (reads inside the transaction)."""
        verb, queue, timer_key = self.verb, self.queue, self.timer_key
        current = Timer.objects.filter(queue=queue, timer_key=timer_key).only("message_id", "deliver_at").first()
        if current is not None and current.message_id != self.message_id:
            return OperatorOutcome(verb, queue, timer_key, False, "rescheduled", deliver_at=current.deliver_at)
        # The row may be gone: the log has the shown timer's txn if it fired.
        at = fired_at(queue=queue, partition=self.partition, txn=self.txn)
        if at is not None:
            return OperatorOutcome(verb, queue, timer_key, False, "fired", fired_at=at)
        return OperatorOutcome(verb, queue, timer_key, False, "gone")

    def audit(self, who: Who, now: datetime, *, action: str, before: str, after: str) -> None:
        who.record_in_txn(now=now, action=action, target=f"{self.queue}/{self.timer_key}", before=before, after=after)


def _seen(verb: Verb, queue: str, timer_key: str, expect_message_id: str, txn: str, partition: str) -> _Seen:
    return _Seen(verb, check_name(queue, "queue"), check_key(timer_key), expect_message_id, txn, partition)


def _describe(timer: Held) -> str:
    return f"due {clock.iso_micros_z(timer.deliver_at)}, message {timer.message_id}, partition {timer.partition}"


def timer_operator_action_in_txn(
    *,
    verb: Verb,
    queue: str,
    timer_key: str,
    expect_message_id: str,
    txn: str,
    partition: str,
    who: Who,
    to: datetime | None = None,
    by: timedelta | None = None,
    now: datetime | None = None,
) -> OperatorOutcome:
    """Cancel, move (``to`` or ``by``) or fire now the timer the operator saw.

    ``expect_message_id``, ``txn`` and ``partition`` are the shown timer's;
    a timer rescheduled under the same key since is left alone. The timer's
    row is locked and read once. Writes ``who``'s audit entry in the same
    transaction when the action happens. Raises ``TimersBadRequest`` for a
    bad name or key and ``TimerHorizonExceeded`` for a move past the
    horizon. Runs inside the caller's transaction.
    """
    assert connection.in_atomic_block, "timer_operator_action_in_txn needs the caller's transaction"
    now = now or clock.now()
    seen = _seen(verb, queue, timer_key, expect_message_id, txn, partition)
    held = seen.hold()
    if held is None:
        return seen.lost()
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
        return seen.lost()
    seen.audit(who, now, action=f"timer.{verb}", before=_describe(held), after=after)
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
    *,
    queue: str,
    timer_key: str,
    expect_message_id: str,
    txn: str,
    partition: str,
    who: Who,
    to: datetime,
    payload: bytes | None = None,
    now: datetime | None = None,
) -> OperatorOutcome:
    """Replace the timer the operator saw with a new due time ``to`` and payload.

    ``payload`` None keeps the timer's payload. A reschedule under the same
    key with the same ``txn`` and partition (a new message id, as a
    client's reschedule makes), so the timer that fires is the edited one.
    Lost races answer as ``timer_operator_action`` does. Raises
    ``TimersBadRequest`` for an encrypted timer's new payload (its bytes are
    sealed for the consumer) and the schedule's refusals (payload size,
    horizon). Writes ``who``'s audit entry in the same transaction. Runs inside
    the caller's transaction.
    """
    assert connection.in_atomic_block, "timer_operator_reschedule_in_txn needs the caller's transaction"
    now = now or clock.now()
    seen = _seen("move", queue, timer_key, expect_message_id, txn, partition)
    held = seen.hold()
    if held is None:
        return seen.lost()
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
    seen.audit(
        who,
        now,
        action="timer.reschedule",
        before=_describe(held) + (f", payload {held.payload_json[:500]}" if payload is not None else ""),
        after=f"{changed}: due {clock.iso_micros_z(outcome.deliver_at)}, message {outcome.message_id}"
        + (f", payload {payload_json_of(body)[:500]}" if payload is not None else ""),
    )
    return OperatorOutcome(
        "move", seen.queue, seen.timer_key, True, deliver_at=outcome.deliver_at, previous_due=held.deliver_at
    )


#: ``timer_operator_reschedule_in_txn`` as its own transaction: must be the outermost call.
timer_operator_reschedule = transaction.atomic(durable=True)(timer_operator_reschedule_in_txn)
