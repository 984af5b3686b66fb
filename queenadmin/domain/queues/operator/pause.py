"""An operator's pause and resume of a queue, or of one consumer group's
reading of it, audited.

While a queue is paused its pops answer as an empty queue does (204, or
an empty list at the end of a long-poll; the official client keeps
polling), and the same for one group's pops of a queue where that group
is paused. Pushes are taken, and leases already handed out may still be
acked, extended and renewed. The state lives on the queue row
(``Queue.paused``, ``Queue.paused_groups``), which every claim reads
anyway: it survives restarts, every replica sees it at its next claim, and
it costs a pop no statement of its own (``consume/pop.py``, and the
PostgreSQL claim's ``held`` in ``store/postgres_consume.py``). A resume
wakes the pops waiting on the queue, on every replica (``wakeups``).

A pause takes the queue row ``FOR UPDATE``, so it waits for the claims
running on the queue (they hold it ``FOR KEY SHARE``) and a claim that
starts after it commits sees it; a claim of the transactional path that
read the state just before may still hand out its batch. Pausing what is
paused, or resuming what is not, changes nothing and is not audited.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import connection, transaction

from queenadmin.domain import clock, events
from queenadmin.domain.audit import Who
from queenadmin.domain.queues import wakeups
from queenadmin.domain.queues.board import has_nul
from queenadmin.errors import QueueNotFound
from queenadmin.models.queues import QUEUE_MODE, Queue


@dataclass(frozen=True)
class PauseState:
    """Whose pops of a queue are paused."""

    queue: str
    #: Every pop of the queue.
    paused: bool
    #: The consumer groups paused on it, sorted (``QUEUE_MODE`` for the
    #: pops that name no group).
    paused_groups: tuple[str, ...]

    def paused_for(self, group: str) -> bool:
        return self.paused or group in self.paused_groups


@dataclass(frozen=True)
class PauseChange:
    """What a pause or resume did: ``group`` (None: the queue) is now
    ``paused``; ``changed`` is false when it already was."""

    group: str | None
    paused: bool
    changed: bool
    state: PauseState


def queue_pause_state(*, name: str) -> PauseState | None:
    """Whose pops of queue ``name`` are paused; None when there is no such queue."""
    row = None if has_nul(name) else Queue.objects.filter(name=name).values_list("paused", "paused_groups").first()
    if row is None:
        return None
    paused, groups = row
    return PauseState(name, paused, tuple(groups or ()))


def _set_in_txn(queue: str, group: str | None, paused: bool, who: Who, now: datetime | None) -> PauseChange:
    assert connection.in_atomic_block
    now = now or clock.now()
    # SQLite ignores FOR UPDATE; its IMMEDIATE transaction already makes
    # this read-modify-write one writer's at a time.
    row = (
        None
        if has_nul(queue, group)
        else Queue.objects.select_for_update().filter(name=queue).values_list("id", "paused", "paused_groups").first()
    )
    if row is None:
        raise QueueNotFound(f"no queue {queue}")
    qid, was_paused, stored = row
    groups = set(stored or ())
    if group is None:
        changed = was_paused != paused
        now_paused = paused
    else:
        changed = (group in groups) != paused
        groups = groups | {group} if paused else groups - {group}
        now_paused = was_paused
    state = PauseState(queue, now_paused, tuple(sorted(groups)))
    if not changed:
        return PauseChange(group, paused, False, state)
    Queue.objects.filter(pk=qid).update(paused=state.paused, paused_groups=list(state.paused_groups))
    verb = "pause" if paused else "resume"
    label = None if group is None else "queue mode" if group == QUEUE_MODE else group
    who.record_in_txn(
        now=now,
        action=f"queue.{verb}" if group is None else f"queue.group_{verb}",
        target=queue if label is None else f"{queue}/{label}",
        before="paused" if not paused else "running",
        after=(
            ("paused: its pops answer as an empty queue; pushes, acks and leases go on" if paused else "running")
            if label is None
            else (f"paused for {label}: its pops answer as an empty queue" if paused else f"running for {label}")
        ),
    )
    if not paused:
        # Waiting pops noted the queue empty: look again, on every replica.
        wakeups.notify_on_commit([queue])
    events.broadcast_on_commit(events.QUEUES_GROUP, {"type": "queues.changed", "queues": [queue]})
    return PauseChange(group, paused, True, state)


def queue_pause_in_txn(*, queue: str, who: Who, now: datetime | None = None) -> PauseChange:
    """Pause every pop of ``queue`` on ``who``'s word.

    Its pops answer as an empty queue does until ``queue_resume``; pushes,
    acks and lease extensions go on. Idempotent: pausing a paused queue
    changes nothing (``changed`` false) and writes no audit entry; else
    writes ``who``'s (``queue.pause``). Raises ``QueueNotFound``. Runs
    inside the caller's transaction (asserted).
    """
    return _set_in_txn(queue, None, True, who, now)


def queue_resume_in_txn(*, queue: str, who: Who, now: datetime | None = None) -> PauseChange:
    """Resume the pops of ``queue`` paused by ``queue_pause``, and wake the
    ones waiting on it (after commit). Groups paused on their own stay
    paused. Idempotent as ``queue_pause_in_txn`` (``queue.resume``).
    Raises ``QueueNotFound``. Runs inside the caller's transaction."""
    return _set_in_txn(queue, None, False, who, now)


def queue_group_pause_in_txn(*, queue: str, group: str, who: Who, now: datetime | None = None) -> PauseChange:
    """Pause consumer group ``group``'s pops of ``queue`` (``QUEUE_MODE``:
    the pops that name no group); other groups read on.

    The group need not be registered yet: it is then paused from its first
    pop. Idempotent as ``queue_pause_in_txn`` (``queue.group_pause``).
    Raises ``QueueNotFound``. Runs inside the caller's transaction.
    """
    return _set_in_txn(queue, group, True, who, now)


def queue_group_resume_in_txn(*, queue: str, group: str, who: Who, now: datetime | None = None) -> PauseChange:
    """Resume ``group``'s pops of ``queue`` and wake its waiting ones; a
    pause of the whole queue still holds. Idempotent as
    ``queue_pause_in_txn`` (``queue.group_resume``). Raises
    ``QueueNotFound``. Runs inside the caller's transaction."""
    return _set_in_txn(queue, group, False, who, now)


#: The ``_in_txn`` forms as their own transaction: each must be the outermost call.
queue_pause = transaction.atomic(durable=True)(queue_pause_in_txn)
queue_resume = transaction.atomic(durable=True)(queue_resume_in_txn)
queue_group_pause = transaction.atomic(durable=True)(queue_group_pause_in_txn)
queue_group_resume = transaction.atomic(durable=True)(queue_group_resume_in_txn)
