"""The dashboard's reads of the log (depth by state, lag, pages) and the DLQ actions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from queenadmin.domain.audit import Who
from queenadmin.domain.queues import board
from queenadmin.domain.queues import operator as queue_operator
from queenadmin.errors import QueueNotFound
from queenadmin.models import AuditEntry, DeadLetter, Message
from tests.dashboard_ops.conftest import ack, claim, configure, dead_letter, push

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 10, 8, 10, 0, 0, tzinfo=UTC)


def only(name: str = "q") -> board.QueueBoard:
    qb = board.queue_board(name=name)
    assert qb is not None
    return qb


def test_depth_splits_claimable_in_flight_and_dead_letters():
    """Claimable, in flight and DLQ come from offsets and cursors; the head's age is read."""
    with time_machine.travel(T0, tick=False) as traveller:
        push("q", 5)
        traveller.shift(30)
        claim("q", batch=2)
        dead_letter("q", 1, "dead")
        traveller.shift(10)
        qb = only()
    by_name = {p.name: p for p in qb.partitions}
    part, dead = by_name["Default"], by_name["dead"]
    assert (part.last_offset, part.claimable, part.parked, part.in_flight, part.dlq) == (4, 3, 0, 2, 0)
    assert (dead.last_offset, dead.claimable, dead.parked, dead.in_flight, dead.dlq) == (0, 0, 0, 0, 1)
    assert (qb.claimable, qb.parked, qb.in_flight, qb.dlq, qb.total) == (3, 0, 2, 1, 6)
    # The oldest claimable message is the third, pushed at T0 with the rest.
    assert part.oldest_claimable_at == T0
    assert dead.oldest_claimable_at is None
    assert qb.oldest_claimable_at == T0


def test_delayed_messages_are_parked_until_old_enough():
    """With delayedProcessing, the young tail is parked, and a claim agrees."""
    configure("d", delayedProcessing=60)
    with time_machine.travel(T0, tick=False) as traveller:
        push("d", 3)
        traveller.shift(45)
        push("d", 4)
        traveller.shift(30)  # the first 3 are 75 s old, the last 4 are 30 s old
        qb = only("d")
        assert (qb.claimable, qb.parked, qb.in_flight) == (3, 4, 0)
        assert len(claim("d", batch=100).messages) == 3
        qb = only("d")
        assert (qb.claimable, qb.parked, qb.in_flight) == (0, 4, 3)
        traveller.shift(31)
        qb = only("d")
        assert (qb.claimable, qb.parked, qb.in_flight) == (4, 0, 3)


def test_a_delayed_partition_of_one_message_parks_it():
    """Its only message is offset 0 (next offset 1): still a partition to search."""
    configure("one", delayedProcessing=60)
    with time_machine.travel(T0, tick=False) as traveller:
        push("one", 1)
        traveller.shift(10)
        qb = only("one")
        assert (qb.claimable, qb.parked) == (0, 1)
        traveller.shift(60)
        qb = only("one")
        assert (qb.claimable, qb.parked) == (1, 0)


def test_parked_search_finds_the_boundary_at_every_position():
    """The binary search for the parked tail is exact wherever the tail starts."""
    configure("b", delayedProcessing=10)
    with time_machine.travel(T0, tick=False) as traveller:
        for _ in range(13):
            push("b", 1)
            traveller.shift(1)
        # The message at offset i was pushed at T0 + i; now is T0 + 13.
        for wait in range(16):
            cutoff = T0 + timedelta(seconds=13 + wait - 10)
            young = sum(1 for i in range(13) if T0 + timedelta(seconds=i) > cutoff)
            qb = only("b")
            assert (qb.parked, qb.claimable) == (young, 13 - young), wait
            traveller.shift(1)


def test_groups_have_their_own_lag_in_messages_and_time():
    """Each consumer group's lag counts what it has not finished, and how old that is."""
    with time_machine.travel(T0, tick=False) as traveller:
        push("g", 4, "p1")
        push("g", 2, "p2")
        traveller.shift(60)
        fast = claim("g", group="fast", batch=10, max_partitions=2)
        ack(fast)
        claim("g", group="slow", batch=1, partition="p1")
        traveller.shift(30)  # inside the 60 s lease
        qb = only("g")
    lags = {g.name: g for g in qb.groups}
    assert set(lags) == {"fast", "slow"}
    assert (lags["fast"].lag, lags["fast"].in_flight, lags["fast"].oldest_pending_at) == (0, 0, None)
    assert (lags["slow"].lag, lags["slow"].in_flight, lags["slow"].oldest_pending_at) == (6, 1, T0)
    # A partition's numbers are its slowest group's.
    assert [(p.name, p.claimable, p.in_flight) for p in qb.partitions] == [("p1", 3, 1), ("p2", 2, 0)]


def test_dead_letter_counts_stop_at_the_cap(monkeypatch):
    """A list counts dead letters up to one cap, a queue's page up to another, and says so."""
    monkeypatch.setattr(board, "DLQ_COUNT_CAP", 3)
    monkeypatch.setattr(board, "DLQ_DETAIL_CAP", 4)
    dead_letter("c", 5)
    dead_letter("small", 2)
    listed = {b.name: b for b in board.queue_boards()}
    assert (listed["c"].dlq, listed["c"].dlq_capped) == (3, True)
    assert (listed["small"].dlq, listed["small"].dlq_capped) == (2, False)
    qb = only("c")
    assert (qb.dlq, qb.dlq_capped) == (4, True)
    assert only("small").partitions[0].dlq == 2


def test_query_count_of_the_boards_does_not_grow_with_messages(django_assert_max_num_queries):
    for name in ("a", "b", "d"):
        dead_letter(name, 1, "p3")
        configure(name, delayedProcessing=60 if name == "d" else 0)
        push(name, 3, "p1")
        push(name, 3, "p2")
    with django_assert_max_num_queries(8) as before:
        board.queue_boards()
    for name in ("a", "b", "d"):
        configure(name, delayedProcessing=0)
        dead_letter(name, 20, "p3")
        configure(name, delayedProcessing=60 if name == "d" else 0)
        push(name, 200, "p1")
    with django_assert_max_num_queries(len(before.captured_queries)):
        board.queue_boards()


def test_recent_messages_page_by_offset_with_previews():
    push("m", 7, payload={"text": "x" * 500})
    part = only("m").partitions[0]
    first = board.recent_messages(partition_id=part.id, partition=part.name, limit=3)
    assert [r.offset for r in first] == [6, 5, 4]
    assert first[0].cut
    assert len(first[0].preview) == board.PREVIEW_CHARS
    second = board.recent_messages(partition_id=part.id, partition=part.name, before=first[-1].offset, limit=3)
    assert [r.offset for r in second] == [3, 2, 1]


def test_find_a_message_by_id_or_transaction_id():
    pushed = push("f", 3)
    part = only("f").partitions[0]
    names = {part.id: part.name}
    by_id = board.find_messages(text=pushed[1].message_id, partitions=names)
    assert [r.offset for r in by_id] == [1]
    by_txn = board.find_messages(text=pushed[2].transaction_id, partitions=names)
    assert [r.offset for r in by_txn] == [2]
    assert board.find_messages(text="nope", partitions=names) == []


# -- DLQ actions ----------------------------------------------------------------


def test_replay_appends_copies_removes_dead_letters_and_audits():
    dead_letter("r", 3, error="bad payload")
    selection = board.DeadLetterFilter(queue="r")
    originals = list(DeadLetter.objects.order_by("id").values_list("message_id", "payload"))
    result = queue_operator.queue_dlq_action(verb="replay", selection=selection, who=Who("ann", "fixed the bug"))
    assert (result.done, result.more) == (3, False)
    assert not DeadLetter.objects.exists()
    copies = list(Message.objects.filter(message_id__in=result.message_ids).order_by("offset"))
    assert [m.payload for m in copies] == [p for _, p in originals]
    assert [m.offset for m in copies] == [3, 4, 5]
    assert {m.message_id for m in copies}.isdisjoint(mid for mid, _ in originals)
    entry = AuditEntry.objects.get()
    assert (entry.actor, entry.action, entry.kind, entry.target, entry.reason) == (
        "ann",
        "dlq.replay",
        "dlq",
        "r",
        "fixed the bug",
    )
    assert originals[0][0] in entry.before
    assert result.message_ids[0] in entry.after
    # The copies are claimable again.
    assert len(claim("r", batch=10).messages) == 3


def test_replay_in_batches_goes_beyond_one_page_and_stops_at_upto():
    dead_letter("r", 7)
    upto = DeadLetter.objects.order_by("-id").values_list("id", flat=True)[0]
    selection = board.DeadLetterFilter(queue="r", upto=upto)
    first = queue_operator.queue_dlq_action(verb="replay", selection=selection, who=Who("ann"), batch=3)
    assert (first.done, first.more) == (3, True)
    # Replayed copies that fail again land above ``upto`` and are left alone.
    c = claim("r", batch=3)
    ack(c, "dlq", "again")
    second = queue_operator.queue_dlq_action(verb="replay", selection=selection, who=Who("ann"), batch=3)
    third = queue_operator.queue_dlq_action(verb="replay", selection=selection, who=Who("ann"), batch=3)
    assert [(second.done, second.more), (third.done, third.more)] == [(3, True), (1, False)]
    assert DeadLetter.objects.count() == 3
    assert not DeadLetter.objects.filter(id__lte=upto).exists()
    assert AuditEntry.objects.filter(action="dlq.replay").count() == 3


def test_replay_of_chosen_ids_and_filters():
    dead_letter("r", 2, "p1")
    dead_letter("r", 2, "p2")
    p2 = list(DeadLetter.objects.filter(partition__name="p2").values_list("id", flat=True))
    result = queue_operator.queue_dlq_action(
        verb="replay", selection=board.DeadLetterFilter(queue="r", partition="p1"), who=Who("ann"), ids=tuple(p2)
    )
    assert result.done == 0  # the filter still applies to chosen ids
    result = queue_operator.queue_dlq_action(
        verb="replay", selection=board.DeadLetterFilter(queue="r"), who=Who("ann"), ids=(p2[0],)
    )
    assert result.done == 1
    assert set(DeadLetter.objects.values_list("partition__name", flat=True)) == {"p1", "p2"}
    assert DeadLetter.objects.count() == 3
    assert AuditEntry.objects.count() == 1


def test_purge_deletes_and_audits_and_an_empty_selection_writes_nothing():
    dead_letter("p", 4)
    dead_letter("other", 1)
    result = queue_operator.queue_dlq_action(
        verb="purge", selection=board.DeadLetterFilter(queue="p"), who=Who("bob", "junk")
    )
    assert (result.done, result.more) == (4, False)
    assert list(DeadLetter.objects.values_list("queue__name", flat=True)) == ["other"]
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.target, entry.reason) == ("dlq.purge", "p", "junk")
    again = queue_operator.queue_dlq_action(verb="purge", selection=board.DeadLetterFilter(queue="p"), who=Who("bob"))
    assert (again.done, again.more) == (0, False)
    assert AuditEntry.objects.count() == 1


def test_dlq_actions_on_a_missing_queue_raise():
    with pytest.raises(QueueNotFound):
        queue_operator.queue_dlq_action(verb="purge", selection=board.DeadLetterFilter(queue="nope"), who=Who("bob"))
    with pytest.raises(QueueNotFound):
        queue_operator.queue_dlq_action(verb="replay", selection=board.DeadLetterFilter(queue="nope"), who=Who("bob"))
