"""Timers: messages scheduled for later (protocol.md section 4).

A timer is a row keyed by ``(queue, timer_key)``. Scheduling the same key
again replaces it (``rescheduled``), a cancel deletes it, and when it comes
due a firing loop appends its message to the log through the push path,
with ``transactionId = txn`` and the message id promised at schedule time,
and deletes the row in the same transaction. The log's dedup window makes a
second delivery impossible; the row lock (PostgreSQL) or the single writer
(SQLite) makes cancel and move race safely with the fire: either the timer
is changed before it fires, or the answer is ``absent`` and it fired once.

- ``ops``: commands, results and the rules on names and sizes;
- ``store``: the only SQL of the ``Timer`` table, one class per database
  (``base``, ``postgres``, ``sqlite``), and the loops' wake channel;
- ``calls``: schedule, cancel, move, fire now, and the reads;
- ``fire``: one firing step, and the loop that runs it under a lease;
- ``wake``: waking the firing loops when a timer comes due soon;
- ``operator``: cancel, move, fire and reschedule on a person's word, audited;
- ``bulk``: what a filter selects, counted and charted, and cancelled or
  moved in batches on a person's word, audited once.
"""

from __future__ import annotations

from queenadmin.domain.timers.calls import (
    DueHistogram,
    timer_cancel,
    timer_move,
    timer_peek,
    timer_schedule,
    timers_call,
    timers_call_in_txn,
    timers_count,
    timers_cursor,
    timers_due_histogram,
    timers_list,
    timers_pending,
)
from queenadmin.domain.timers.fire import FireStep, TimerLoop, timer_fire_now, timers_fire_due
from queenadmin.domain.timers.ops import (
    DEFAULT_PAGE_LIMIT,
    DEFAULT_PARTITION,
    DLQ_GROUP,
    LOOP_LOCK,
    MAX_PAGE_LIMIT,
    TimerCancel,
    TimerFilter,
    TimerOp,
    TimerOutcome,
    TimerPage,
    TimerRow,
    TimerSchedule,
    check_schedule,
    payload_json_of,
)

__all__ = [
    "DEFAULT_PAGE_LIMIT",
    "DEFAULT_PARTITION",
    "DLQ_GROUP",
    "LOOP_LOCK",
    "MAX_PAGE_LIMIT",
    "DueHistogram",
    "FireStep",
    "TimerCancel",
    "TimerFilter",
    "TimerLoop",
    "TimerOp",
    "TimerOutcome",
    "TimerPage",
    "TimerRow",
    "TimerSchedule",
    "check_schedule",
    "payload_json_of",
    "timer_cancel",
    "timer_fire_now",
    "timer_move",
    "timer_peek",
    "timer_schedule",
    "timers_call",
    "timers_call_in_txn",
    "timers_count",
    "timers_cursor",
    "timers_due_histogram",
    "timers_fire_due",
    "timers_list",
    "timers_pending",
]
