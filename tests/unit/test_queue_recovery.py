"""An operator's recovery of a queue: DLQ replay to the failed group or to
every group, a consumer group's seek, reset and delete, and a queue purge;
each audited in its transaction."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import time_machine

from queenadmin.domain import queues
from queenadmin.domain.audit import Who
from queenadmin.domain.queues import board
from queenadmin.domain.queues import operator as queue_operator
from queenadmin.errors import InvalidArgument, NotFound, QueueNotFound
from queenadmin.models import AuditEntry, DeadLetter, Message, Partition
from tests.dashboard_ops.conftest import ack, claim, push

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 10, 8, 10, 0, 0, tzinfo=UTC)


def lag(queue: str, group: str) -> int:
    qb = board.queue_board(name=queue)
    assert qb is not None
    return next(g.lag for g in qb.groups if g.name == group)


def two_groups_one_failed(queue: str = "q") -> int:
    """Groups a and b read 3 messages; a dead-letters the third. The dead letter's id."""
    push(queue, 3)
    a = claim(queue, group="a", batch=3)
    ack_items = [
        queues.AckItem(
            i, m.transaction_id, str(m.partition_id), "completed" if i < 2 else "dlq", a.lease_id, "bad", "a"
        )
        for i, m in enumerate(a.messages)
    ]
    queues.queue_ack(items=ack_items)
    ack(claim(queue, group="b", batch=3))
    return DeadLetter.objects.get().pk


# -- DLQ replay ----------------------------------------------------------------


def test_a_replay_goes_to_the_failed_group_only_with_transaction_id_dlq_id():
    """The copy is pushed as dlq:<id>; group a is handed it, b passes over it
    and stays caught up, and both read what is pushed after it."""
    dead_id = two_groups_one_failed()
    result = queue_operator.queue_dlq_action(
        verb="replay", selection=board.DeadLetterFilter(queue="q"), who=Who("ann", "fixed")
    )
    assert (result.done, result.to_every_group) == (1, 0)
    copy = Message.objects.get(message_id=result.message_ids[0])
    assert (copy.transaction_id, copy.for_group, copy.offset) == (f"dlq:{dead_id}", "a", 3)
    assert claim("q", group="b", batch=10).messages == ()
    assert lag("q", "b") == 0
    got = claim("q", group="a", batch=10)
    assert [(m.transaction_id, m.offset) for m in got.messages] == [(f"dlq:{dead_id}", 3)]
    ack(got)
    push("q", 1)
    assert [m.offset for m in claim("q", group="b", batch=10).messages] == [4]
    assert [m.offset for m in claim("q", group="a", batch=10).messages] == [4]
    entry = AuditEntry.objects.get(action="dlq.replay")
    assert "for the failed group only" in entry.after
    assert "dlq:<id>" in entry.after


def test_a_group_behind_the_copy_reads_around_it():
    """A group that has not read the partition yet gets everything but the
    copy meant for another group, and its cursor passes it."""
    two_groups_one_failed()
    queue_operator.queue_dlq_action(verb="replay", selection=board.DeadLetterFilter(queue="q"), who=Who("ann"))
    push("q", 1)
    late = claim("q", group="c", subscription_mode="all", batch=10)
    assert [m.offset for m in late.messages] == [0, 1, 2, 4]
    ack(late)
    assert lag("q", "c") == 0


def test_a_replay_to_every_group():
    dead_id = two_groups_one_failed()
    result = queue_operator.queue_dlq_action(
        verb="replay", selection=board.DeadLetterFilter(queue="q"), who=Who("ann"), target="all"
    )
    copy = Message.objects.get(message_id=result.message_ids[0])
    assert (copy.transaction_id, copy.for_group) == (f"dlq:{dead_id}", None)
    for group in ("a", "b"):
        assert [m.transaction_id for m in claim("q", group=group, batch=10).messages] == [f"dlq:{dead_id}"]
    assert "for every consumer group" in AuditEntry.objects.get(action="dlq.replay").after


def test_the_copy_of_a_dead_letter_is_appended_once():
    """The transactionId is deterministic: a second append of the same dead
    letter's copy is the partition's duplicate, not a second delivery."""
    dead_id = two_groups_one_failed()
    queue_operator.queue_dlq_action(verb="replay", selection=board.DeadLetterFilter(queue="q"), who=Who("ann"))
    again = queues.queue_push(
        items=[
            queues.PushItem("q", queues.DEFAULT_PARTITION, '{"i": 2}', queue_operator.replay_transaction_id(dead_id))
        ]
    )
    assert again[0].status == "duplicate"
    assert Message.objects.filter(transaction_id=f"dlq:{dead_id}").count() == 1


def test_a_dead_letter_of_a_group_that_no_longer_consumes_goes_to_every_group():
    two_groups_one_failed()
    queue_operator.queue_group_operator(queue="q", group="a", action="delete", who=Who("ann"))
    result = queue_operator.queue_dlq_action(verb="replay", selection=board.DeadLetterFilter(queue="q"), who=Who("ann"))
    assert result.to_every_group == 1
    assert Message.objects.get(message_id=result.message_ids[0]).for_group is None
    assert len(claim("q", group="b", batch=10).messages) == 1


def test_queue_mode_dead_letters_replay_to_queue_mode():
    push("m", 2)
    c = claim("m", batch=2)
    ack(c, "dlq", "boom")
    result = queue_operator.queue_dlq_action(verb="replay", selection=board.DeadLetterFilter(queue="m"), who=Who("ann"))
    assert {m.for_group for m in Message.objects.filter(message_id__in=result.message_ids)} == {queues.QUEUE_MODE}
    assert len(claim("m", batch=10).messages) == 2


# -- consumer groups -----------------------------------------------------------


def test_seek_to_start_end_and_a_time_moves_the_group_and_audits():
    with time_machine.travel(T0, tick=False) as traveller:
        push("s", 3)
        traveller.shift(60)
        push("s", 2)
        ack(claim("s", group="g", batch=10))
        assert lag("s", "g") == 0
        done = queue_operator.queue_group_operator(
            queue="s", group="g", action="seek", to="start", who=Who("ann", "redo")
        )
        assert (done.lag_before, done.lag_after, done.cursors) == (0, 5, 1)
        assert lag("s", "g") == 5
        queue_operator.queue_group_operator(queue="s", group="g", action="seek", to="time", at=T0, who=Who("ann"))
        assert [m.offset for m in claim("s", group="g", batch=10).messages] == [3, 4]
        queue_operator.queue_group_operator(queue="s", group="g", action="seek", to="end", who=Who("ann"))
        assert lag("s", "g") == 0
        assert claim("s", group="g", batch=10).messages == ()
    entries = list(AuditEntry.objects.filter(action="queue.group_seek").order_by("id"))
    assert len(entries) == 3
    first = entries[0]
    assert (first.actor, first.target, first.reason, first.kind) == ("ann", "s/g", "redo", "queue")
    assert first.before.startswith("lag 0;")
    assert first.after.startswith("to the start, 1 partitions: lag 5;")


def test_seek_releases_the_groups_lease():
    push("l", 3)
    held = claim("l", group="g", batch=3)
    queue_operator.queue_group_operator(queue="l", group="g", action="seek", to="start", who=Who("ann"))
    again = claim("l", group="g", batch=3)
    assert [m.offset for m in again.messages] == [0, 1, 2]
    outcomes = ack(held)
    assert not any(o.success for o in outcomes)


def test_reset_rewinds_to_the_subscription_start_and_delete_forgets_the_group():
    push("r", 2)
    ack(claim("r", group="g", batch=10))
    push("r", 1)
    reset = queue_operator.queue_group_operator(queue="r", group="g", action="reset", who=Who("ann"))
    assert (reset.lag_before, reset.lag_after) == (1, 3)
    gone = queue_operator.queue_group_operator(queue="r", group="g", action="delete", who=Who("ann", "retired"))
    assert gone.cursors == 1
    qb = board.queue_board(name="r")
    assert qb is not None
    assert "g" not in [g.name for g in qb.groups]
    actions = list(AuditEntry.objects.order_by("id").values_list("action", flat=True))
    assert actions == ["queue.group_reset", "queue.group_delete"]


def test_group_actions_refuse_unknown_names_and_write_nothing():
    push("u", 1)
    with pytest.raises(NotFound):
        queue_operator.queue_group_operator(queue="u", group="typo", action="seek", to="end", who=Who("ann"))
    with pytest.raises(QueueNotFound):
        queue_operator.queue_group_operator(queue="nope", group="g", action="delete", who=Who("ann"))
    ack(claim("u", group="g"))
    with pytest.raises(InvalidArgument):
        queue_operator.queue_group_operator(queue="u", group="g", action="seek", to="time", who=Who("ann"))
    assert not AuditEntry.objects.exists()


# -- purge ---------------------------------------------------------------------


def test_purge_deletes_every_stored_message_in_steps_and_keeps_groups_and_dlq():
    push("p", 5, "one")
    push("p", 4, "two")
    held = claim("p", group="g", partition="one", batch=2)
    c = claim("p", group="g", partition="two", batch=1)
    ack(c, "dlq", "bad")
    first = queue_operator.queue_purge(queue="p", who=Who("ann", "poison"), batch=4)
    assert (first.deleted, first.more) == (4, True)
    total = first.deleted
    step = first
    while step.more:
        step = queue_operator.queue_purge(queue="p", who=Who("ann", "poison"), resume_at=step.resume_at, batch=4)
        total += step.deleted
    assert total == 9
    assert not Message.objects.filter(partition__queue__name="p").exists()
    assert DeadLetter.objects.filter(queue__name="p").count() == 1
    assert sorted(Partition.objects.filter(queue__name="p").values_list("log_start", "next_offset")) == [
        (4, 4),
        (5, 5),
    ]
    assert lag("p", "g") == 0
    assert not any(o.success for o in ack(held))
    assert queue_operator.queue_purge(queue="p", who=Who("ann")).deleted == 0
    push("p", 1, "one")
    assert [m.offset for m in claim("p", group="g", batch=10).messages] == [5]
    entries = AuditEntry.objects.filter(action="queue.purge")
    assert entries.count() == 3
    assert set(entries.values_list("reason", flat=True)) == {"poison"}


def test_purge_of_a_missing_queue_raises():
    with pytest.raises(QueueNotFound):
        queue_operator.queue_purge(queue="nope", who=Who("ann"))


def test_the_board_counts_from_the_log_start_for_a_consumer_without_a_cursor():
    """A purge makes no cursor for a consumer that has none; depth and lag
    still count only what is stored (last - max(committed, log_start - 1))."""
    push("b", 4)
    queue_operator.queue_purge(queue="b", who=Who("ann"))
    qb = board.queue_board(name="b")
    assert qb is not None
    assert (qb.claimable, [g.lag for g in qb.groups]) == (0, [0])
    push("b", 2)
    qb = board.queue_board(name="b")
    assert qb is not None
    assert (qb.claimable, [g.lag for g in qb.groups]) == (2, [2])
    assert [m.offset for m in claim("b", batch=10).messages] == [4, 5]


def test_the_board_counts_from_a_log_start_of_1():
    """Only offset 0 purged: the log start is 1 and the board counts from it."""
    push("one", 1)
    queue_operator.queue_purge(queue="one", who=Who("ann"))
    push("one", 2)
    qb = board.queue_board(name="one")
    assert qb is not None
    assert (qb.claimable, [g.lag for g in qb.groups]) == (2, [2])
    assert [m.offset for m in claim("one", batch=10).messages] == [1, 2]


def test_a_nul_in_a_name_finds_nothing():
    """No stored name holds a NUL and PostgreSQL refuses one in a query: the
    reads answer nothing and the writes refuse, on both databases."""
    push("n", 1)
    ack(claim("n", group="g"))
    assert board.queue_board(name="n\x00") is None
    assert board.dead_letters_across(queue="n\x00") == []
    assert board.dead_letter_page(selection=board.DeadLetterFilter(queue="n", group="g\x00")) == []
    with pytest.raises(QueueNotFound):
        queue_operator.queue_group_operator(queue="n\x00", group="g", action="reset", who=Who("ann"))
    with pytest.raises(NotFound):
        queue_operator.queue_group_operator(queue="n", group="g\x00", action="reset", who=Who("ann"))
    with pytest.raises(QueueNotFound):
        queue_operator.queue_purge(queue="n\x00", who=Who("ann"))
    with pytest.raises(QueueNotFound):
        queue_operator.queue_dlq_action(verb="purge", selection=board.DeadLetterFilter(queue="n\x00"), who=Who("ann"))
    assert not AuditEntry.objects.exists()
