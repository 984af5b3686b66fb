"""Queen's DLQ replay in the domain (``queue_dlq_replay``): a second replay
is a duplicate (the record of the first, its age and trim, two at once),
batch replays into another queue, error signatures, and the DLQ reads by
error: on both databases."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
import time_machine
from django.db import connection, connections, transaction
from django.db.models import TextField, Value

from queenadmin.domain import queues
from queenadmin.domain.audit import Who
from queenadmin.domain.queues import board
from queenadmin.domain.queues import operator as queue_operator
from queenadmin.domain.queues.operator import replays
from queenadmin.domain.queues.store import store
from queenadmin.domain.queues.store.base import error_signature_of
from queenadmin.errors import DeadLetterGone, InvalidArgument, NameTooLong, QueueFull
from queenadmin.models import AuditEntry, DeadLetter, DeadLetterReplay, Message, Queue
from queenadmin.server import loops
from tests.conftest import one_writer_at_a_time
from tests.dashboard_ops.conftest import ack, claim, configure, dead_letter, push

pytestmark = pytest.mark.django_db

Where = queue_operator.ReplayDestination
T0 = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def one_dead_letter(queue: str = "q", error: str = "boom") -> DeadLetter:
    """Groups a and b read a message; a dead-letters it."""
    push(queue, 1, payload={"order": 7})
    a = claim(queue, group="a")
    ack(a, "dlq", error)
    ack(claim(queue, group="b"))
    return DeadLetter.objects.get(queue__name=queue)


def copies(queue: str, dead_id: int) -> list[Message]:
    return list(Message.objects.filter(partition__queue__name=queue, transaction_id=f"dlq:{dead_id}"))


# -- one dead letter, as Queen's POST /dlq/:id/replay -----------------------------


def test_a_replay_into_its_own_queue_moves_it_for_every_group_and_audits():
    dead = one_dead_letter()
    result = queue_operator.queue_dlq_replay(dead_letter_id=dead.pk, who=Who("ci-token", "fixed", "api"))
    assert (result.result, result.row_removed, result.queue, result.partition, result.group) == (
        "moved",
        True,
        "q",
        queues.DEFAULT_PARTITION,
        "a",
    )
    assert (result.pushed.status, result.pushed.transaction_id, result.pushed.offset) == ("queued", f"dlq:{dead.pk}", 1)
    assert result.original_transaction_id == dead.transaction_id
    assert not DeadLetter.objects.exists()
    (copy,) = copies("q", dead.pk)
    assert (copy.payload, copy.for_group, copy.message_id) == (dead.payload, None, result.pushed.message_id)
    # Queen's replay: every group reads the copy, b too.
    for group in ("a", "b"):
        assert [m.transaction_id for m in claim("q", group=group).messages] == [f"dlq:{dead.pk}"]
    entry = AuditEntry.objects.get()
    assert (entry.actor, entry.action, entry.kind, entry.target, entry.reason, entry.via) == (
        "ci-token",
        "dlq.replay",
        "dlq",
        "q",
        "fixed",
        "api",
    )
    assert f"dead letter {dead.pk} of group a" in entry.before
    assert dead.message_id in entry.before
    assert f"appended to q/{queues.DEFAULT_PARTITION} at offset 1" in entry.after
    assert "the dead letter is removed" in entry.after


def test_a_replay_into_another_queue_then_again_is_a_duplicate_and_appends_once():
    """The second replay finds the record the first left and answers
    ``duplicate`` with the same copy (queue, partition, message id, offset,
    transactionId); the destination holds one copy, created by the first;
    the second writes nothing, no audit entry either."""
    dead = one_dead_letter()
    first = queue_operator.queue_dlq_replay(dead_letter_id=dead.pk, who=Who("ann"), to=Where("elsewhere", "p9"))
    assert (first.result, first.queue, first.partition, first.source_queue) == ("moved", "elsewhere", "p9", "q")
    assert first.replayed_at is None
    again = queue_operator.queue_dlq_replay(dead_letter_id=dead.pk, who=Who("bob"), to=Where("elsewhere", "p9"))
    assert (again.result, again.row_removed, again.replayed_at is not None) == ("duplicate", False, True)
    assert (again.queue, again.partition, again.source_queue, again.group) == ("elsewhere", "p9", "q", "a")
    assert again.original_transaction_id == dead.transaction_id
    assert again.pushed == replace(first.pushed, status="duplicate")
    (copy,) = copies("elsewhere", dead.pk)
    assert (copy.partition.name, copy.message_id, copy.offset) == ("p9", first.pushed.message_id, first.pushed.offset)
    assert not copies("q", dead.pk)
    assert AuditEntry.objects.count() == 1
    record = DeadLetterReplay.objects.get()
    assert (record.dead_letter_id, record.source_queue, record.actor, record.via) == (dead.pk, "q", "ann", "dashboard")


def test_a_second_replay_naming_a_third_queue_is_the_duplicate_of_where_it_went():
    """Whatever destination the second replay names, it answers the copy
    the first appended: nothing is pushed to the third queue (it is not
    even created), and its own queue gets nothing either."""
    dead = one_dead_letter()
    first = queue_operator.queue_dlq_replay(dead_letter_id=dead.pk, who=Who("ann"), to=Where("elsewhere"))
    for to in (Where("third", "p3"), queue_operator.OWN_PLACE, Where(partition="p4")):
        again = queue_operator.queue_dlq_replay(dead_letter_id=dead.pk, who=Who("ann"), to=to)
        assert (again.result, again.queue, again.partition) == ("duplicate", "elsewhere", queues.DEFAULT_PARTITION)
        assert again.pushed.message_id == first.pushed.message_id
    assert not Queue.objects.filter(name="third").exists()
    assert not copies("q", dead.pk)
    assert len(copies("elsewhere", dead.pk)) == 1
    # A bad name is refused still, before the record is looked at.
    with pytest.raises(InvalidArgument):
        queue_operator.queue_dlq_replay(dead_letter_id=dead.pk, who=Who("ann"), to=Where("bad\nname"))


def test_a_purged_dead_letter_leaves_no_record_and_is_gone():
    dead = one_dead_letter()
    queue_operator.queue_dlq_action(verb="purge", selection=board.DeadLetterFilter(queue="q"), who=Who("ann"))
    with pytest.raises(DeadLetterGone):
        queue_operator.queue_dlq_replay(dead_letter_id=dead.pk, who=Who("ann"))
    assert not DeadLetterReplay.objects.exists()


def test_a_record_past_its_age_is_gone_and_the_retention_step_trims_it(settings):
    """Within ``DLQ_REPLAY_KEEP_SECONDS`` a second replay is a duplicate;
    past it the answer is 404 gone at once, and the retention loop's step
    deletes the record (one replayed later stays)."""
    settings.QUEENADMIN_DLQ_REPLAY_KEEP_SECONDS = 3600
    old, young = one_dead_letter("old"), one_dead_letter("young")
    with time_machine.travel(T0, tick=False) as traveller:
        queue_operator.queue_dlq_replay(dead_letter_id=old.pk, who=Who("ann"))
        traveller.shift(1800)
        queue_operator.queue_dlq_replay(dead_letter_id=young.pk, who=Who("ann"))
        traveller.shift(1799)
        assert queue_operator.queue_dlq_replay(dead_letter_id=old.pk, who=Who("ann")).result == "duplicate"
        assert loops.retention_once() == 0
        traveller.shift(2)
        with pytest.raises(DeadLetterGone):
            queue_operator.queue_dlq_replay(dead_letter_id=old.pk, who=Who("ann"))
        assert loops.retention_once() == 1
        assert list(DeadLetterReplay.objects.values_list("dead_letter_id", flat=True)) == [young.pk]
        assert queue_operator.queue_dlq_replay(dead_letter_id=young.pk, who=Who("ann")).result == "duplicate"
    assert len(copies("old", old.pk)) == 1


def test_keeping_no_records_answers_gone_as_before(settings):
    settings.QUEENADMIN_DLQ_REPLAY_KEEP_SECONDS = 0
    dead = one_dead_letter()
    assert queue_operator.queue_dlq_replay(dead_letter_id=dead.pk, who=Who("ann")).result == "moved"
    assert not DeadLetterReplay.objects.exists()
    with pytest.raises(DeadLetterGone):
        queue_operator.queue_dlq_replay(dead_letter_id=dead.pk, who=Who("ann"))


def test_the_trim_goes_in_batches(monkeypatch):
    monkeypatch.setattr(replays, "TRIM_BATCH_SIZE", 2)  # internal: a module constant
    dead_letter("many", 5)
    with time_machine.travel(T0, tick=False) as traveller:
        result = queue_operator.queue_dlq_action(
            verb="replay", selection=board.DeadLetterFilter(queue="many"), who=Who("ann")
        )
        assert result.done == DeadLetterReplay.objects.count() == 5
        assert queue_operator.queue_dlq_replays_trim() == 0
        traveller.shift(7 * 86400 + 1)
        assert queue_operator.queue_dlq_replays_trim() == 5
    assert not DeadLetterReplay.objects.exists()


def test_a_batch_of_chosen_ids_replayed_again_counts_them_replayed_before():
    """The chosen ids a first batch moved are, the second time, counted as
    replayed before: nothing appended, no audit entry, no dead letter."""
    dead_letter("src", 3)
    ids = tuple(DeadLetter.objects.order_by("id").values_list("id", flat=True))
    selection = board.DeadLetterFilter(queue="src")
    first = queue_operator.queue_dlq_action(verb="replay", selection=selection, who=Who("ann"), ids=ids[:2])
    assert (first.done, first.duplicates, first.replayed_before) == (2, 0, 0)
    assert set(DeadLetterReplay.objects.values_list("dead_letter_id", flat=True)) == set(ids[:2])
    again = queue_operator.queue_dlq_action(verb="replay", selection=selection, who=Who("ann"), ids=ids)
    assert (again.done, again.duplicates, again.replayed_before) == (1, 0, 2)
    third = queue_operator.queue_dlq_action(verb="replay", selection=selection, who=Who("ann"), ids=ids)
    assert (third.done, third.duplicates, third.replayed_before) == (0, 0, 3)
    assert Message.objects.filter(transaction_id__startswith="dlq:").count() == 3
    assert AuditEntry.objects.count() == 2
    # A record names the queue the dead letter came from: another queue's batch does not count it.
    dead_letter("other", 1)
    elsewhere = board.DeadLetterFilter(queue="other")
    assert (
        queue_operator.queue_dlq_action(verb="replay", selection=elsewhere, who=Who("ann"), ids=ids).replayed_before
        == 0
    )
    # The single replay finds the batch's record too.
    single = queue_operator.queue_dlq_replay(dead_letter_id=ids[0], who=Who("ann"))
    assert (single.result, single.queue, single.group) == ("duplicate", "src", queues.QUEUE_MODE)


@pytest.mark.django_db(transaction=True)
def test_two_replays_of_one_dead_letter_at_once_move_it_once():
    """Two callers replay the same id at the same moment, each on its own
    connection: one answers ``moved``, the other ``duplicate`` with the same
    copy; one message in the destination, no error. Where rows lock, both
    are made to wait on the dead letter's row first, so they truly meet."""
    dead = one_dead_letter()
    answers: list[Any] = []
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def replay() -> None:
        try:
            start.wait(10)
            answers.append(queue_operator.queue_dlq_replay(dead_letter_id=dead.pk, who=Who("t"), to=Where("dst")))
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=replay) for _ in range(2)]
    with holding_the_row(dead.pk) as waiters:
        for thread in threads:
            thread.start()
        waiters(2)
    for thread in threads:
        thread.join(30)
    assert not errors, errors
    assert sorted(a.result for a in answers) == ["duplicate", "moved"]
    moved, duplicate = sorted(answers, key=lambda a: a.result != "moved")
    assert duplicate.pushed.message_id == moved.pushed.message_id
    assert len(copies("dst", dead.pk)) == 1
    assert not DeadLetter.objects.exists()
    assert AuditEntry.objects.count() == 1


@contextmanager
def holding_the_row(dead_letter_id: int) -> Iterator[Any]:
    """Where rows lock, hold the dead letter's row in another connection for
    the block; it yields a wait for ``n`` backends blocked behind it (no
    wait without row locks: SQLite's writers queue at BEGIN)."""
    if one_writer_at_a_time():
        yield lambda n: None
        return
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic():
                DeadLetter.objects.select_for_update().get(pk=dead_letter_id)
                held.set()
                release.wait(30)
        finally:
            connections.close_all()

    def wait_for(n: int) -> None:
        deadline = time.monotonic() + 30
        while lock_waiters() < n:
            assert time.monotonic() < deadline, f"{n} replays never waited on the row"
            time.sleep(0.02)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(30)
        yield wait_for
    finally:
        release.set()
        holder.join(30)


def lock_waiters() -> int:
    with connection.cursor() as cur:
        cur.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'"
        )
        (count,) = cur.fetchone()
    return int(count)


def test_a_copy_already_in_the_destination_is_a_duplicate_and_the_dead_letter_stays():
    """dlq:<id> was pushed there already (by anyone): nothing is appended, the
    dead letter is kept (a move that moved nothing destroys no record), and
    the audit entry says so."""
    dead = one_dead_letter()
    (there,) = queues.queue_push(items=[queues.PushItem("other", "p", '{"x":1}', f"dlq:{dead.pk}")])
    result = queue_operator.queue_dlq_replay(dead_letter_id=dead.pk, who=Who("ann"), to=Where("other", "p"))
    assert (result.result, result.row_removed, result.pushed.status) == ("duplicate", False, "duplicate")
    assert (result.pushed.message_id, result.pushed.offset) == (there.message_id, there.offset)
    assert len(copies("other", dead.pk)) == 1
    assert DeadLetter.objects.filter(pk=dead.pk).exists()
    assert "duplicate" in AuditEntry.objects.get().after
    # Into its own queue it still moves.
    assert queue_operator.queue_dlq_replay(dead_letter_id=dead.pk, who=Who("ann")).result == "moved"


def test_a_replay_into_another_partition_of_its_own_queue():
    dead = one_dead_letter()
    result = queue_operator.queue_dlq_replay(dead_letter_id=dead.pk, who=Who("ann"), to=Where(partition="retry"))
    assert (result.queue, result.partition) == ("q", "retry")
    assert copies("q", dead.pk)[0].partition.name == "retry"


def test_an_unknown_dead_letter_is_gone():
    with pytest.raises(DeadLetterGone):
        queue_operator.queue_dlq_replay(dead_letter_id=424242, who=Who("ann"))
    assert not AuditEntry.objects.exists()


@pytest.mark.parametrize(
    ("to", "error", "detail"),
    [
        (Where(""), InvalidArgument, "queue must be a non-empty string"),
        (Where(partition=""), InvalidArgument, "partition must be a non-empty string"),
        (Where("bad\nname"), InvalidArgument, "queue must not contain control characters"),
        (Where("q" * 600), NameTooLong, "queue is over 511 bytes"),
    ],
)
def test_a_destination_no_queue_may_have_is_refused_and_nothing_moves(to, error, detail):
    dead = one_dead_letter()
    with pytest.raises(error) as refused:
        queue_operator.queue_dlq_replay(dead_letter_id=dead.pk, who=Who("ann"), to=to)
    assert refused.value.detail.startswith(detail), refused.value.detail
    assert DeadLetter.objects.filter(pk=dead.pk).exists()
    assert not AuditEntry.objects.exists()


def test_a_full_destination_refuses_and_keeps_the_dead_letter():
    dead = one_dead_letter()
    configure("full", maxSize=1)
    push("full", 1)
    with pytest.raises(QueueFull):
        queue_operator.queue_dlq_replay(dead_letter_id=dead.pk, who=Who("ann"), to=Where("full"))
    assert DeadLetter.objects.filter(pk=dead.pk).exists()
    assert not copies("full", dead.pk)
    assert not AuditEntry.objects.exists()


# -- batches into another queue ---------------------------------------------------


def test_a_batch_replay_into_another_queue_reaches_every_group_there():
    dead_letter("src", 3)
    result = queue_operator.queue_dlq_action(
        verb="replay", selection=board.DeadLetterFilter(queue="src"), who=Who("ann"), to=Where("dst")
    )
    assert (result.done, result.duplicates, result.more) == (3, 0, False)
    moved = Message.objects.filter(partition__queue__name="dst", transaction_id__startswith="dlq:")
    assert moved.count() == 3
    assert set(moved.values_list("for_group", flat=True)) == {None}
    assert "into queue dst, for every consumer group of it" in AuditEntry.objects.get().after


def test_a_batch_goes_past_duplicates_it_keeps():
    """A dead letter whose copy is already there stays; ``last_id`` lets the
    next batch start after it instead of taking it again."""
    dead_letter("src", 3)
    first_id = DeadLetter.objects.order_by("id").values_list("id", flat=True)[0]
    queues.queue_push(items=[queues.PushItem("dst", queues.DEFAULT_PARTITION, "1", f"dlq:{first_id}")])
    selection = board.DeadLetterFilter(queue="src")
    one = queue_operator.queue_dlq_action(verb="replay", selection=selection, who=Who("ann"), to=Where("dst"), batch=1)
    assert (one.done, one.duplicates, one.more, one.last_id) == (0, 1, True, first_id)
    rest = queue_operator.queue_dlq_action(
        verb="replay", selection=selection, who=Who("ann"), to=Where("dst"), batch=5, after=one.last_id
    )
    assert (rest.done, rest.duplicates, rest.more) == (2, 0, False)
    assert list(DeadLetter.objects.values_list("id", flat=True)) == [first_id]
    assert "1 already there (duplicate dlq:<id>), kept in the DLQ" in AuditEntry.objects.order_by("id")[0].after


# -- error signatures and the DLQ reads by error -------------------------------------

SAMPLES = [
    ("timeout after 3000 ms", "timeout after <n> ms"),
    ("order 123e4567-e89b-12d3-a456-426614174000 not found", "order <uuid> not found"),
    ("user 8f3a2c1d9b missing; retry 2", "user <id> missing; retry <n>"),
    ("utf8 codec can't decode byte 0xff", "utf<n> codec can't decode byte <n>xff"),
    ("  spaced\n\tout   text  ", "spaced out text"),
    ("KeyError: 'ABCDEFGH'", "KeyError: 'ABCDEFGH'"),
    ("ids abc12345xyz and 01ARZ3NDEKTSV4RRFFQ69G5FAV", "ids <id> and <id>"),
    ("", ""),
    (None, ""),
    ("x" * 300, "x" * 200),
]


@pytest.mark.parametrize(("error", "signature"), SAMPLES)
def test_the_signature_rule(error, signature):
    assert error_signature_of(error) == signature


def test_the_database_computes_the_same_signature():
    """The SQL of each database (PostgreSQL's regexp_replace, SQLite's
    function) agrees with the rule in Python."""
    push("sig", 1)
    row = Message.objects.filter(partition__queue__name="sig")
    for error, signature in SAMPLES:
        text = Value(error, output_field=TextField())
        got = row.annotate(e=text, s=store().error_signature("e")).values_list("s", flat=True).get()
        assert got == signature, error


def test_signatures_group_dead_letters_with_counts_and_filter_them():
    dead_letter("a", 3, error="timeout after 3000 ms")
    dead_letter("b", 2, error="timeout after 15 ms")
    dead_letter("b", 1, error="order 8f3a2c1d9b not found")
    counts = board.dead_letter_signatures(selection=board.AcrossQueues())
    assert [(c.signature, c.count) for c in counts.counts] == [
        ("timeout after <n> ms", 5),
        ("order <id> not found", 1),
    ]
    assert (counts.examined, counts.capped) == (6, False)
    only_b = board.dead_letter_signatures(selection=board.AcrossQueues(queue="b"))
    assert [(c.signature, c.count) for c in only_b.counts] == [("timeout after <n> ms", 2), ("order <id> not found", 1)]
    timeouts = board.dead_letters_across(signature="timeout after <n> ms")
    assert {(r.queue, r.item.error) for r in timeouts} == {("a", "timeout after 3000 ms"), ("b", "timeout after 15 ms")}
    assert len(timeouts) == 5
    found = board.dead_letters_across(error="NOT FOUND")
    assert [r.item.error for r in found] == ["order 8f3a2c1d9b not found"]
    assert board.dead_letter_queue_names(selection=board.AcrossQueues(error="timeout")) == ["a", "b"]


def test_signature_counts_look_at_the_newest_only(monkeypatch):
    dead_letter("a", 2, error="old 1")
    dead_letter("a", 3, error="new 2")
    counts = board.dead_letter_signatures(selection=board.AcrossQueues(), sample=3)
    assert [(c.signature, c.count) for c in counts.counts] == [("new <n>", 3)]
    assert (counts.examined, counts.capped) == (3, True)
    exact = board.dead_letter_signatures(selection=board.AcrossQueues(), sample=5)
    assert (exact.examined, exact.capped) == (5, False)


def test_a_batch_replay_by_signature_and_error_text():
    dead_letter("a", 2, error="timeout after 10 ms")
    dead_letter("a", 1, error="bad payload")
    selection = board.DeadLetterFilter(queue="a", signature="timeout after <n> ms")
    result = queue_operator.queue_dlq_action(verb="replay", selection=selection, who=Who("ann"))
    assert result.done == 2
    assert list(DeadLetter.objects.values_list("error", flat=True)) == ["bad payload"]
    result = queue_operator.queue_dlq_action(
        verb="purge", selection=board.DeadLetterFilter(queue="a", error="PAYLOAD"), who=Who("ann")
    )
    assert result.done == 1
    assert not DeadLetter.objects.exists()
    assert "error~'PAYLOAD'" in AuditEntry.objects.get(action="dlq.purge").before
