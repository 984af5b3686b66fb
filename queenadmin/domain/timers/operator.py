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
from queenadmin.domain.audit import audit_in_txn
from queenadmin.domain.timers.calls import _locked, timer_move_in_txn, timers_call_in_txn
from queenadmin.domain.timers.fire import timer_fire_now_in_txn
from queenadmin.domain.timers.ops import TimerCancel, TimerSchedule, check_key, check_name, payload_json_of
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


def _lost(verb: Verb, queue: str, timer_key: str, seen: Timer | None, expect_message_id: str) -> OperatorOutcome:
    """Why an action found no timer to act on (reads inside the transaction)."""
    current = Timer.objects.filter(queue=queue, timer_key=timer_key).only("message_id", "deliver_at").first()
    if current is not None and current.message_id != expect_message_id:
        return OperatorOutcome(verb, queue, timer_key, False, "rescheduled", deliver_at=current.deliver_at)
    if seen is not None:
        at = fired_at(queue=queue, partition=seen.partition, txn=seen.txn)
        if at is not None:
            return OperatorOutcome(verb, queue, timer_key, False, "fired", fired_at=at)
    return OperatorOutcome(verb, queue, timer_key, False, "gone")


def _describe(timer: Timer) -> str:
    return f"due {clock.iso_micros_z(timer.deliver_at)}, message {timer.message_id}, partition {timer.partition}"


def _seen(queue: str, timer_key: str, txn: str, partition: str) -> Timer:
    # What the operator saw, for the fired-at lookup when the row is gone.
    return Timer(queue=queue, timer_key=timer_key, txn=txn, partition=partition)


def timer_operator_action_in_txn(
    *,
    verb: Verb,
    queue: str,
    timer_key: str,
    expect_message_id: str,
    txn: str,
    partition: str,
    actor: str,
    reason: str = "",
    to: datetime | None = None,
    by: timedelta | None = None,
    via: str = "dashboard",
    now: datetime | None = None,
) -> OperatorOutcome:
    """Cancel, move (``to`` or ``by``) or fire now the timer the operator saw.

    ``expect_message_id``, ``txn`` and ``partition`` are the shown timer's;
    a timer rescheduled under the same key since is left alone. Writes the
    audit entry in the same transaction when the action happens. Raises
    ``TimersBadRequest`` for a bad name or key and ``TimerHorizonExceeded``
    for a move past the horizon. Runs inside the caller's transaction.
    """
    assert connection.in_atomic_block
    now = now or clock.now()
    queue, timer_key = check_name(queue, "queue"), check_key(timer_key)
    seen = _seen(queue, timer_key, txn, partition)
    row = _locked(queue, timer_key)
    if row is None or row.message_id != expect_message_id:
        return _lost(verb, queue, timer_key, seen, expect_message_id)
    before = _describe(row)
    if verb == "cancel":
        (outcome,) = timers_call_in_txn([TimerCancel(queue, timer_key)], now=now)
        after = "cancelled"
    elif verb == "move":
        outcome = timer_move_in_txn(
            queue=queue, timer_key=timer_key, to=to, by=by, now=now, expect_message_id=expect_message_id
        )
        after = f"due {clock.iso_micros_z(outcome.deliver_at)}"
    else:
        outcome = timer_fire_now_in_txn(queue=queue, timer_key=timer_key, now=now, expect_message_id=expect_message_id)
        after = f"fired at {clock.iso_micros_z(now)}"
    if not outcome.ok:
        return _lost(verb, queue, timer_key, seen, expect_message_id)
    audit_in_txn(
        actor=actor,
        action=f"timer.{verb}",
        kind="timer",
        target=f"{queue}/{timer_key}",
        now=now,
        before=before,
        after=after,
        reason=reason,
        via=via,
    )
    return OperatorOutcome(
        verb,
        queue,
        timer_key,
        True,
        deliver_at=outcome.deliver_at,
        fired_at=now if verb == "fire" else None,
        previous_due=row.deliver_at,
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
    actor: str,
    to: datetime,
    payload: bytes | None = None,
    reason: str = "",
    via: str = "admin",
    now: datetime | None = None,
) -> OperatorOutcome:
    """Replace the timer the operator saw with a new due time ``to`` and payload.

    ``payload`` None keeps the timer's payload. A reschedule under the same
    key with the same ``txn`` and partition (a new message id, as a
    client's reschedule makes), so the timer that fires is the edited one.
    Lost races answer as ``timer_operator_action`` does. Raises
    ``TimersBadRequest`` for an encrypted timer's new payload (its bytes are
    sealed for the consumer) and the schedule's refusals (payload size,
    horizon). Writes the audit entry in the same transaction. Runs inside
    the caller's transaction.
    """
    assert connection.in_atomic_block
    now = now or clock.now()
    queue, timer_key = check_name(queue, "queue"), check_key(timer_key)
    seen = _seen(queue, timer_key, txn, partition)
    row = _locked(queue, timer_key)
    if row is None or row.message_id != expect_message_id:
        return _lost("move", queue, timer_key, seen, expect_message_id)
    if payload is not None and row.encrypted:
        raise TimersBadRequest("an encrypted timer's payload cannot be edited")
    before = _describe(row)
    body = bytes(row.payload) if payload is None else payload
    op = TimerSchedule(
        queue,
        timer_key,
        body,
        to - now,
        row.txn,
        row.partition,
        encrypted=row.encrypted,
        producer_sub=row.producer_sub,
    )
    (outcome,) = timers_call_in_txn([op], now=now)
    changed = "payload and due time" if payload is not None and body != bytes(row.payload) else "due time"
    audit_in_txn(
        actor=actor,
        action="timer.reschedule",
        kind="timer",
        target=f"{queue}/{timer_key}",
        now=now,
        before=before + (f", payload {row.payload_json[:500]}" if payload is not None else ""),
        after=f"{changed}: due {clock.iso_micros_z(outcome.deliver_at)}, message {outcome.message_id}"
        + (f", payload {payload_json_of(body)[:500]}" if payload is not None else ""),
        reason=reason,
        via=via,
    )
    return OperatorOutcome("move", queue, timer_key, True, deliver_at=outcome.deliver_at, previous_due=row.deliver_at)


#: ``timer_operator_reschedule_in_txn`` as its own transaction: must be the outermost call.
timer_operator_reschedule = transaction.atomic(durable=True)(timer_operator_reschedule_in_txn)
