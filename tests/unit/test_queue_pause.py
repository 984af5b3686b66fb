"""An operator's pause and resume of a queue, or of one consumer group's
pops of it: pops answer as on an empty queue through either claim path,
pushes, acks and lease extensions go on, the state is the database's, and
each change is audited once.

``transaction=True``: outside a transaction a PostgreSQL claim of one
queue is the one-statement path (``Store.claim_one``), inside one the
transactional path; both must hold the pause.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.db import connections, transaction

from queenadmin.domain import clock, queues
from queenadmin.domain.audit import Who
from queenadmin.domain.queues import board
from queenadmin.domain.queues import operator as queue_operator
from queenadmin.domain.queues.store.postgres_consume import PostgresConsume
from queenadmin.errors import QueueNotFound
from queenadmin.models import AuditEntry
from queenadmin.plumbing.db import is_postgres, json_text
from tests.dashboard_ops.conftest import push

pytestmark = pytest.mark.django_db(transaction=True)

ANN = Who("ann", "downstream outage", "api")


def fast(queue: str, **kw) -> queues.Claim:
    return queues.queue_claim(request=queues.PopRequest(queue=queue, **kw))


def slow(queue: str, **kw) -> queues.Claim:
    with transaction.atomic():
        return queues.queue_claim_in_txn(request=queues.PopRequest(queue=queue, **kw), now=clock.now())


CLAIMS: list[Callable[..., queues.Claim]] = [fast, slow]


def offsets(claim: queues.Claim) -> list[int]:
    return [m.offset for m in claim.messages]


def test_a_paused_queue_pops_empty_takes_pushes_and_acks_its_leases():
    """Through either path a pop of every group answers empty while the
    queue is paused (group b registers on its first, as on an empty queue);
    a push is taken; the batch handed out before may still be extended and
    acked; after the resume the pops read everything."""
    push("q", 3)
    held = fast("q", group="a", batch=1)
    assert offsets(held) == [0]
    change = queue_operator.queue_pause(queue="q", who=ANN)
    assert (change.group, change.paused, change.changed) == (None, True, True)
    for claim in CLAIMS:
        for group in ("a", "b", queues.QUEUE_MODE):
            got = claim("q", group=group, batch=10)
            assert (got.messages, got.retry_at) == ((), None), (claim, group)
    if is_postgres():
        # The pause is part of the one statement's answer: empty, not the
        # transactional path's turn.
        one = PostgresConsume().claim_one(
            queue="q",
            group="a",
            partition=None,
            skip=[],
            budget=10,
            lease_id="x",
            lease_seconds=None,
            auto_ack=False,
            now=clock.now(),
        )
        assert one is not None
        assert (one.outcome, one.messages) == ("empty", ())
    pushed = push("q", 2)
    assert [r.status for r in pushed] == ["queued", "queued"]
    assert queues.queue_lease_extend(lease_id=held.lease_id, seconds=120).renewed == 1
    (message,) = held.messages
    item = queues.AckItem(0, message.transaction_id, str(message.partition_id), "completed", held.lease_id, None, "a")
    (acked,) = queues.queue_ack(items=[item])
    assert (acked.success, acked.lease_released) == (True, True)
    queue_operator.queue_resume(queue="q", who=ANN)
    assert offsets(fast("q", group="a", batch=10)) == [1, 2, 3, 4]
    assert offsets(slow("q", group="b", batch=10)) == [0, 1, 2, 3, 4]


def test_a_paused_queue_is_passed_over_by_a_namespace_pop():
    """A pop of a namespace answers from its queues that are not paused."""
    for name in ("ns-a", "ns-b"):
        queues.queue_configure(request=queues.ConfigureRequest(name, namespace="ns"))
        push(name, 1)
    queue_operator.queue_pause(queue="ns-a", who=ANN)
    got = fast(None, namespace="ns", batch=10, max_partitions=10)
    assert got.queue == "ns-b"
    assert fast(None, namespace="ns", batch=10).messages == ()


def test_a_group_pause_holds_that_group_only_and_may_come_before_its_first_pop():
    """Group a is paused: its pops answer empty, b and queue mode read on;
    group late, paused before it ever popped, registers on its first pop
    (subscription "new" starts there) and reads only after its resume."""
    push("q", 2)
    queue_operator.queue_group_pause(queue="q", group="a", who=ANN)
    queue_operator.queue_group_pause(queue="q", group="late", who=ANN)
    for claim in CLAIMS:
        assert claim("q", group="a", batch=10).messages == ()
    assert offsets(fast("q", group="b", batch=10)) == [0, 1]
    assert offsets(slow("q", batch=10)) == [0, 1]
    assert fast("q", group="late", subscription_mode="new", batch=10).messages == ()
    push("q", 1)
    state = queue_operator.queue_pause_state(name="q")
    assert state == queue_operator.PauseState("q", False, ("a", "late"))
    # A queue pause and resume leave the groups' own pauses alone.
    queue_operator.queue_pause(queue="q", who=ANN)
    queue_operator.queue_resume(queue="q", who=ANN)
    assert fast("q", group="a", batch=10).messages == ()
    queue_operator.queue_group_resume(queue="q", group="late", who=ANN)
    assert offsets(fast("q", group="late", batch=10)) == [2]
    queue_operator.queue_group_resume(queue="q", group="a", who=ANN)
    assert offsets(slow("q", group="a", batch=10)) == [0, 1, 2]


def test_pause_and_resume_are_idempotent_and_audited_once_each():
    """A second pause (or resume) changes nothing and writes no entry; each
    change writes one with who, why and through what."""
    push("q", 1)
    assert queue_operator.queue_pause(queue="q", who=ANN).changed
    again = queue_operator.queue_pause(queue="q", who=Who("bob"))
    assert (again.paused, again.changed) == (True, False)
    assert queue_operator.queue_group_pause(queue="q", group=queues.QUEUE_MODE, who=ANN).changed
    assert not queue_operator.queue_group_pause(queue="q", group=queues.QUEUE_MODE, who=ANN).changed
    assert queue_operator.queue_resume(queue="q", who=ANN).changed
    assert not queue_operator.queue_resume(queue="q", who=ANN).changed
    gone = queue_operator.queue_group_resume(queue="q", group="never", who=ANN)
    assert (gone.paused, gone.changed, gone.state.paused_groups) == (False, False, (queues.QUEUE_MODE,))
    entries = list(AuditEntry.objects.order_by("id").values_list("action", "target", "actor", "reason", "via"))
    assert entries == [
        ("queue.pause", "q", "ann", "downstream outage", "api"),
        ("queue.group_pause", "q/queue mode", "ann", "downstream outage", "api"),
        ("queue.resume", "q", "ann", "downstream outage", "api"),
    ]


def test_an_unknown_queue_is_refused():
    """Each of the four raises QueueNotFound, and nothing is recorded."""
    for call in (queue_operator.queue_pause, queue_operator.queue_resume):
        with pytest.raises(QueueNotFound):
            call(queue="nope", who=ANN)
    for call in (queue_operator.queue_group_pause, queue_operator.queue_group_resume):
        with pytest.raises(QueueNotFound):
            call(queue="nope", group="g", who=ANN)
    assert queue_operator.queue_pause_state(name="nope") is None
    assert queue_operator.queue_pause_state(name="a\x00b") is None
    assert not AuditEntry.objects.exists()


def test_the_state_is_the_database_s_and_every_read_shows_it():
    """After the connections close (a restart, another replica) the state
    reads back from the queue row: the pause state, the API's stats and the
    dashboard's boards, and a pop still answers empty. A deleted queue
    takes it along."""
    push("q", 1)
    queue_operator.queue_pause(queue="q", who=ANN)
    queue_operator.queue_group_pause(queue="q", group="g", who=ANN)
    connections.close_all()
    assert queue_operator.queue_pause_state(name="q") == queue_operator.PauseState("q", True, ("g",))
    stats = queues.queue_stats(name="q")
    assert stats is not None
    assert (stats.paused, stats.paused_groups) == (True, ("g",))
    qb = board.queue_board(name="q")
    assert qb is not None
    assert (qb.paused, qb.paused_groups) == (True, ("g",))
    assert board.queue_boards()[0].paused
    assert fast("q", group="g").messages == ()
    queues.queue_delete(name="q")
    queues.queue_push(items=[queues.PushItem("q", "Default", json_text(1), None)])
    assert queue_operator.queue_pause_state(name="q") == queue_operator.PauseState("q", False, ())
