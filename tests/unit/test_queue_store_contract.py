"""The queue store's contract, held by whichever store this run's database uses.

The same calls run against ``store()`` on SQLite (the default run) and on
PostgreSQL (``DATABASE_URL`` set), the way procrastinate's connector tests
hold every connector to one behaviour: each case asserts what a method
returns and what it changes, never its SQL. Data is made through the
domain (``queue_push``, ``queue_claim``) where the domain makes it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection, connections, transaction

from queenadmin.domain import queues
from queenadmin.domain.queues.push import queue_dead_letter_in_txn
from queenadmin.domain.queues.store import Append, PostgresStore, SqliteStore, Store, store
from queenadmin.domain.queues.traces import trace_record
from queenadmin.models import ConsumerCursor, DeadLetter, Message, Partition, Queue, Trace, TraceName
from queenadmin.models.queues import QUEUE_MODE
from queenadmin.plumbing.db import json_text

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 10, 8, 10, 0, 0, tzinfo=UTC)


@pytest.fixture
def clock_at(time_machine):
    """The clock stands at ``T0`` until the test shifts it."""
    time_machine.move_to(T0, tick=False)
    return time_machine


def push(queue: str = "q", n: int = 1, partition: str = "Default", tag: str = "m", payload: Any = None) -> list[Any]:
    items = [
        queues.PushItem(queue, partition, json_text({"i": i} if payload is None else payload), f"{tag}-{i}")
        for i in range(n)
    ]
    return queues.queue_push(items=items)


def partition_of(queue: str = "q", name: str = "Default") -> Partition:
    return Partition.objects.get(queue__name=queue, name=name)


def test_the_store_matches_the_database():
    """``store()`` answers the one class written for this run's database."""
    expected = PostgresStore if connection.vendor == "postgresql" else SqliteStore
    assert type(store()) is expected
    assert isinstance(store(), Store)
    assert store() is store()


# -- queue and partition rows ----------------------------------------------------


def test_lock_queue_ids_answers_the_queues_that_exist(clock_at):
    """Locking queue rows answers the ids that exist, shared or exclusive."""
    push("a")
    push("b")
    a, b = (Queue.objects.get(name=n).id for n in ("a", "b"))
    with transaction.atomic():
        assert store().lock_queue_ids([a, b, b + 1000]) == {a, b}
        assert store().lock_queue_ids([a], exclusive=True) == {a}
        assert store().lock_queue_ids([]) == set()


def test_lock_queues_by_name_reads_names_ids_and_options(clock_at):
    """The queues found by name come with their id and options as a dict."""
    push("a")
    queues.queue_configure(request=queues.ConfigureRequest("b", options=queues.QueueOptions((("leaseTime", 7),))))
    with transaction.atomic():
        rows = {name: (qid, options) for name, qid, options in store().lock_queues_by_name(["a", "b", "missing"])}
        assert store().lock_queues_by_name([]) == []
    assert set(rows) == {"a", "b"}
    assert rows["a"][0] == Queue.objects.get(name="a").id
    assert isinstance(rows["a"][1], dict)
    assert rows["b"][1]["leaseTime"] == 7


def test_lock_capped_queue_can_be_taken_twice_in_one_transaction(clock_at):
    """The capped-push lock is held to commit and taken again by the same transaction at once."""
    push("a")
    qid = Queue.objects.get(name="a").id
    with transaction.atomic():
        assert store().lock_capped_queue(qid) is None
        assert store().lock_capped_queue(qid) is None


def test_locate_finds_existing_queues_and_partitions(clock_at):
    """Every pair that exists comes back with its partition id and next offset."""
    push("a", n=3, partition="p1")
    push("a", n=1, partition="p2")
    push("b", n=2)
    with transaction.atomic():
        rows = store().locate([("a", "p1"), ("a", "p2"), ("b", "Default")])
    assert rows is not None
    found = {(qn, pn): (pid, nxt) for qn, _, _, pn, pid, nxt in rows if pid is not None}
    assert found == {
        ("a", "p1"): (partition_of("a", "p1").id, 3),
        ("a", "p2"): (partition_of("a", "p2").id, 1),
        ("b", "Default"): (partition_of("b").id, 2),
    }
    assert all(isinstance(options, dict) for _, _, options, _, _, _ in rows)


def test_locate_leaves_out_a_missing_partition(clock_at):
    """A pair whose partition does not exist comes back with no partition."""
    push("a", partition="p1")
    with transaction.atomic():
        rows = store().locate([("a", "p1"), ("a", "nope"), ("missing", "p1")])
    assert rows is not None
    pairs = {(qn, pn) for qn, _, _, pn, pid, _ in rows if pid is not None}
    assert ("a", "nope") not in pairs
    assert not any(qn == "missing" for qn, *_ in rows)


def test_lock_partitions_reads_next_offsets(clock_at):
    """Locked partitions answer their next offsets, by id."""
    push("a", n=2, partition="p1")
    push("a", n=5, partition="p2")
    p1, p2 = partition_of("a", "p1").id, partition_of("a", "p2").id
    with transaction.atomic():
        assert store().lock_partitions(sorted([p1, p2])) == {p1: 2, p2: 5}


def test_deleting_a_queues_messages_and_traces_leaves_other_queues_alone(clock_at):
    """A queue's messages, trace events and trace names go; another queue's stay."""
    for name in ("a", "b"):
        push(name, n=2)
        trace_record(
            partition_id=partition_of(name).id,
            transaction_id="m-0",
            group=queues.QUEUE_MODE,
            event_type="info",
            data_json="{}",
            names=["order-1"],
        )
    a = Queue.objects.get(name="a").id
    with transaction.atomic():
        store().delete_queue_traces(a)
        assert store().delete_queue_messages(a) == 2
    assert list(Message.objects.values_list("partition__queue__name", flat=True).distinct()) == ["b"]
    assert list(Trace.objects.values_list("partition__queue__name", flat=True)) == ["b"]
    assert list(TraceName.objects.values_list("trace__partition__queue__name", flat=True)) == ["b"]
    with transaction.atomic():
        assert store().delete_queue_messages(a) == 0


# -- messages ----------------------------------------------------------------------


def test_recent_messages_answers_the_pairs_pushed_after_since(clock_at):
    """Messages of the (partition, transactionId) pairs pushed after ``since`` come back, times in UTC."""
    push("a", n=2, tag="old")
    clock_at.shift(60)
    push("a", n=1, tag="new")
    pid = partition_of("a").id
    wanted = [(pid, "old-0"), (pid, "new-0"), (pid, "never")]
    with transaction.atomic():
        rows = store().recent_messages(wanted, T0 + timedelta(seconds=30))
        assert store().recent_messages([], T0) == []
    mine = [r for r in rows if (r[0], r[1]) in set(wanted)]
    assert [(p, t, o) for p, t, _, o, _ in mine] == [(pid, "new-0", 2)]
    assert mine[0][2] == Message.objects.get(transaction_id="new-0").message_id
    assert mine[0][4] == T0 + timedelta(seconds=60)
    assert mine[0][4].tzinfo is UTC


def test_write_messages_appends_and_moves_the_partitions(clock_at):
    """Written rows are stored and each partition's next offset, bytes and last push move."""
    push("a", partition="p1")
    part = partition_of("a", "p1")
    now = T0 + timedelta(seconds=5)
    rows = [(part.id, 1, "t-1", "m-1", '{"x":"é"}', None, None), (part.id, 2, "t-2", "m-2", "[]", "trace", None)]
    with transaction.atomic():
        store().lock_partitions([part.id])
        store().write_messages(rows, {part.id: (3, len('{"x":"é"}'.encode()) + 2)}, now, ["a"])
    after = partition_of("a", "p1")
    assert after.next_offset == 3
    assert after.retained_bytes == part.retained_bytes + len('{"x":"é"}'.encode()) + 2
    assert after.last_push_at == now
    stored = list(
        Message.objects.filter(partition=part, offset__gte=1)
        .order_by("offset")
        .values_list("offset", "transaction_id", "message_id", "payload", "trace_id", "created_at")
    )
    assert stored == [(1, "t-1", "m-1", '{"x":"é"}', None, now), (2, "t-2", "m-2", "[]", "trace", now)]


def test_write_messages_keeps_every_text_as_given(clock_at):
    """Payloads with a newline of their own, and no traces at all, are stored as given."""
    push("a", partition="p1")
    part = partition_of("a", "p1")
    for first, payloads in ((1, ['"a\nb"', "{}", '"\n"']), (4, ["[1]", "2", '"x"'])):
        rows = [(part.id, first + n, f"t-{first + n}", f"m-{first + n}", d, None, None) for n, d in enumerate(payloads)]
        with transaction.atomic():
            store().lock_partitions([part.id])
            store().write_messages(rows, {part.id: (first + 3, 9)}, T0, ["a"])
        stored = list(
            Message.objects.filter(partition=part, offset__gte=first, offset__lt=first + 3)
            .order_by("offset")
            .values_list("offset", "transaction_id", "message_id", "payload", "trace_id")
        )
        assert stored == [(first + n, f"t-{first + n}", f"m-{first + n}", d, None) for n, d in enumerate(payloads)]


@pytest.mark.parametrize(
    "producers",
    [("alice", "alice", "alice"), ("alice", None, "bob"), (None, None, None)],
    ids=["one", "mixed", "none"],
)
def test_write_messages_stores_each_producer(clock_at, producers):
    """One producer for every row, a mix (timers' fires), or none: each row keeps its own."""
    push("a", partition="p1")
    part = partition_of("a", "p1")
    rows = [(part.id, 1 + n, f"t-{n}", f"m-{n}", "{}", None, sub) for n, sub in enumerate(producers)]
    with transaction.atomic():
        store().lock_partitions([part.id])
        store().write_messages(rows, {part.id: (4, 6)}, T0, ["a"])
    stored = Message.objects.filter(partition=part, offset__gte=1).order_by("offset")
    assert tuple(stored.values_list("producer_sub", flat=True)) == producers


def test_append_one_stores_its_producer(clock_at):
    if not store().appends_one:
        pytest.skip(f"{type(store()).__name__} has no one-statement append: push writes with write_messages")
    push("a")
    part = partition_of("a")
    with transaction.atomic():
        store().lock_partitions([part.id])
        store().append_one(Append(part.id, "t", None, 1, "m-1", "{}", None, "a", T0, "alice"))
    assert Message.objects.get(partition=part, offset=1).producer_sub == "alice"


def test_append_one_writes_once_then_answers_the_original(clock_at):
    """Where the store appends in one statement, a second append of the transactionId is a duplicate."""
    if not store().appends_one:
        pytest.skip(f"{type(store()).__name__} has no one-statement append: push writes with write_messages")
    push("a")
    part = partition_of("a")
    first = Append(part.id, "t", T0 - timedelta(hours=1), 1, "m-1", '"é"', None, "a", T0)
    with transaction.atomic():
        store().lock_partitions([part.id])
        assert store().append_one(first) is None
        again = Append(part.id, "t", T0 - timedelta(hours=1), 2, "m-2", '"x"', None, "a", T0)
        assert store().append_one(again) == ("m-1", 1)
    after = partition_of("a")
    assert (after.next_offset, after.retained_bytes) == (2, part.retained_bytes + len('"é"'.encode()))
    assert Message.objects.filter(partition=part, transaction_id="t").count() == 1


# -- wake-ups ----------------------------------------------------------------------


def test_notify_runs_inside_a_transaction_and_listen_params_say_where():
    """``notify`` sends inside the writer's transaction; ``listen_params`` is None or connection settings."""
    with transaction.atomic():
        assert store().notify(["a", "b"]) is None
    params = store().listen_params()
    assert params is None or params.get("dbname") == connection.settings_dict["NAME"]


# -- claims ------------------------------------------------------------------------


def test_claim_candidates_lists_unfinished_partitions(clock_at):
    """Partitions with messages the group has not finished come back, with their cursor when one exists."""
    push("a", n=2, partition="p1")
    push("a", n=1, partition="p2")
    qid = Queue.objects.get(name="a").id
    p1, p2 = partition_of("a", "p1").id, partition_of("a", "p2").id
    rows = store().claim_candidates(queue_id=qid, group=queues.QUEUE_MODE, partition=None)
    assert sorted((pid, cid) for pid, cid, *_ in rows) == [(p1, None), (p2, None)]
    assert all(push_at == T0 for *_, push_at in rows)
    only = store().claim_candidates(queue_id=qid, group=queues.QUEUE_MODE, partition="p2")
    assert [r[0] for r in only] == [p2]
    claimed = queues.queue_claim(request=queues.PopRequest(queue="a", partition="p1", batch=1, lease_seconds=30))
    rows = {r[0]: r for r in store().claim_candidates(queue_id=qid, group=queues.QUEUE_MODE, partition=None)}
    _, cid, lease, until, last_claim, _ = rows[p1]
    assert cid == ConsumerCursor.objects.get(partition_id=p1).id
    assert (lease, until, last_claim) == (claimed.lease_id, T0 + timedelta(seconds=30), T0)


def test_claim_candidates_leave_out_a_finished_partition(clock_at):
    """A partition whose every message the group completed is no candidate."""
    push("a", n=1)
    claimed = queues.queue_claim(request=queues.PopRequest(queue="a", auto_ack=True))
    assert len(claimed.messages) == 1
    qid = Queue.objects.get(name="a").id
    assert store().claim_candidates(queue_id=qid, group=queues.QUEUE_MODE, partition=None) == []


def test_lock_free_cursor_answers_only_a_cursor_without_a_live_lease(clock_at):
    """A free cursor comes back with its partition's offsets; a leased or missing one does not."""
    push("a", n=3)
    pid = partition_of("a").id
    with transaction.atomic():
        assert store().lock_free_cursor(partition_id=pid, group=queues.QUEUE_MODE, now=T0) is None
    queues.queue_claim(request=queues.PopRequest(queue="a", batch=1, lease_seconds=30))
    cursor = ConsumerCursor.objects.get(partition_id=pid)
    with transaction.atomic():
        assert store().lock_free_cursor(partition_id=pid, group=queues.QUEUE_MODE, now=T0) is None
    later = T0 + timedelta(seconds=31)
    with transaction.atomic():
        row = store().lock_free_cursor(partition_id=pid, group=queues.QUEUE_MODE, now=later)
    assert row is not None
    cid, committed, runs, next_offset, name, log_start = row
    assert (cid, committed, next_offset, name, log_start) == (cursor.id, -1, 3, "Default", 0)
    assert runs is not None


# -- retention ---------------------------------------------------------------------


def test_due_partitions_are_those_whose_log_start_is_old(clock_at):
    """A partition is due when the message at its log start was pushed before the cutoff."""
    push("a", partition="old")
    clock_at.shift(100)
    push("a", partition="young")
    qid = Queue.objects.get(name="a").id
    assert store().due_partitions(queue_id=qid, before=T0 + timedelta(seconds=50)) == [partition_of("a", "old").id]
    assert store().due_partitions(queue_id=qid, before=T0) == []


def test_lock_partition_for_sweep_reads_the_log_bounds(clock_at):
    """The sweep's lock answers (log start, next offset), and None for a partition that is gone."""
    push("a", n=4)
    pid = partition_of("a").id
    with transaction.atomic():
        assert store().lock_partition_for_sweep(pid) == (0, 4)
        assert store().lock_partition_for_sweep(pid + 1000) is None


def test_message_sizes_count_payload_bytes(clock_at):
    """Sizes are the payloads' UTF-8 bytes, in offset order, with their push times."""
    push("a", n=1, payload="é")
    clock_at.shift(1)
    push("a", n=1, payload="abc", tag="x")
    push("a", n=1, payload="zz", tag="y")
    pid = partition_of("a").id
    rows = store().message_sizes(partition_id=pid, first=0, last=1)
    assert rows == [(0, T0, len('"é"'.encode())), (1, T0 + timedelta(seconds=1), len('"abc"'))]


def test_cut_log_deletes_a_prefix_and_moves_the_log_start(clock_at):
    """The cut deletes ``log_start..boundary-1`` and moves the start; a stale start cuts nothing."""
    push("a", n=4)
    part = partition_of("a")
    with transaction.atomic():
        assert store().cut_log(partition_id=part.id, log_start=0, boundary=2, freed_bytes=10) == 2
    after = partition_of("a")
    assert (after.log_start, after.retained_bytes) == (2, part.retained_bytes - 10)
    assert list(Message.objects.filter(partition=part).order_by("offset").values_list("offset", flat=True)) == [2, 3]
    with transaction.atomic():
        assert store().cut_log(partition_id=part.id, log_start=0, boundary=3, freed_bytes=10) is None
        transaction.set_rollback(True)
    assert partition_of("a").log_start == 2


# -- dashboard reads -----------------------------------------------------------------


def test_push_times_answer_stored_pairs(clock_at):
    """Each stored (partition, offset) comes back with its push time; missing ones are left out."""
    push("a", n=1)
    clock_at.shift(5)
    push("a", n=1, tag="x")
    pid = partition_of("a").id
    assert store().push_times([(pid, 0), (pid, 1), (pid, 9)]) == {(pid, 0): T0, (pid, 1): T0 + timedelta(seconds=5)}
    assert store().push_times([]) == {}


def test_slowest_groups_say_each_partitions_slowest_group_and_every_lease(clock_at):
    """A row a partition: its slowest counted group (the registered ones,
    here ``g``, not queue mode) with what it holds under a live lease, and
    what every live lease of the partition holds; leases end with time."""
    push("a", n=3, partition="p1")
    queues.queue_claim(request=queues.PopRequest(queue="a", partition="p1", batch=2, lease_seconds=30))
    queues.queue_claim(request=queues.PopRequest(queue="a", partition="p1", batch=1, group="g", lease_seconds=30))
    part = partition_of("a", "p1")
    qid = part.queue_id
    rows = store().slowest_groups(now=T0 + timedelta(seconds=10), queue_mode=QUEUE_MODE)
    # Last offset 2; g committed nothing and leases its batch up to offset 0;
    # queue mode's lease of two and g's of one are in flight.
    assert rows == [(part.id, qid, 2, -1, True, 0, 3)]
    later = store().slowest_groups(now=T0 + timedelta(hours=1), queue_mode=QUEUE_MODE)
    assert later == [(part.id, qid, 2, -1, False, 0, 0)]


def test_parked_from_finds_the_first_offset_after_the_cutoff(clock_at):
    """The first offset pushed after the cutoff, or the next offset when every message is older."""
    push("a", n=3, partition="p1")
    push("a", n=2, partition="p2")
    clock_at.shift(10)
    push("a", n=2, partition="p1", tag="late")
    push("a", n=2, partition="p3", tag="late")
    p1, p2, p3 = (partition_of("a", p).id for p in ("p1", "p2", "p3"))
    # p3 was pushed after the cutoff from its first message on: offset 0.
    assert store().parked_from([p1, p2, p3], T0 + timedelta(seconds=5)) == {p1: 3, p2: 2, p3: 0}
    assert store().parked_from([], T0) == {}


def test_dlq_counts_stop_past_the_cap(clock_at):
    """Dead letters are counted per queue (and per partition on request) up to ``cap + 1``."""
    push("a", partition="p1")
    with transaction.atomic():
        for i in range(4):
            queue_dead_letter_in_txn(
                queue="a",
                partition="p1" if i < 3 else "p2",
                group=queues.QUEUE_MODE,
                transaction_id=f"t{i}",
                message_id=f"m{i}",
                payload_json="{}",
                error="boom",
                retry_count=3,
                now=T0,
            )
    qid = Queue.objects.get(name="a").id
    p1, p2 = partition_of("a", "p1").id, partition_of("a", "p2").id
    assert store().dlq_counts([qid], cap=10, per_partition=False) == [(qid, 0, 4)]
    assert store().dlq_counts([qid], cap=2, per_partition=False) == [(qid, 0, 3)]
    assert sorted(store().dlq_counts([qid], cap=10, per_partition=True)) == [(qid, p1, 3), (qid, p2, 1)]
    assert sum(n for *_, n in store().dlq_counts([qid], cap=1, per_partition=True)) == 2
    assert store().dlq_counts([], cap=10, per_partition=False) == []
    assert DeadLetter.objects.count() == 4


def test_partition_heads_are_the_newest_keys_newest_first(clock_at):
    """Each partition's newest ``size`` messages, newest first; ``until`` leaves out later pushes."""
    push("a", n=3, partition="p1")
    clock_at.shift(10)
    push("a", n=2, partition="p1", tag="late")
    push("a", n=1, partition="p2")
    p1, p2 = partition_of("a", "p1").id, partition_of("a", "p2").id
    heads = store().partition_heads([p1, p2], until=None, size=2)
    assert {pid: [o for _, o, _ in keys] for pid, keys in heads.items()} == {p1: [4, 3], p2: [0]}
    assert heads[p1][0][0] == Message.objects.get(partition_id=p1, offset=4).id
    assert heads[p1][0][2] == T0 + timedelta(seconds=10)
    early = store().partition_heads([p1, p2], until=T0, size=2)
    assert {pid: [o for _, o, _ in keys] for pid, keys in early.items()} == {p1: [2, 1]}
    assert store().partition_heads([], until=None, size=2) == {}


# -- row locks ------------------------------------------------------------------------


@contextmanager
def held_elsewhere(lock: Any) -> Iterator[None]:
    """Run ``lock()`` in a transaction of another connection, kept open for the block."""
    held, release = threading.Event(), threading.Event()

    def run() -> None:
        try:
            with transaction.atomic():
                lock()
                held.set()
                release.wait(10)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    try:
        assert held.wait(10)
        yield
    finally:
        release.set()
        thread.join(10)


@pytest.fixture
def claimed_once(transactional_db: None) -> int:
    """A partition of two messages, the first consumed in queue mode; its id."""
    if not connection.features.has_select_for_update_skip_locked:
        pytest.skip("no row locks: one writer at a time, so two writers never meet")
    push("a", n=2)
    queues.queue_claim(request=queues.PopRequest(queue="a", batch=1, auto_ack=True))
    return partition_of("a").id


def test_a_partition_a_push_holds_is_skipped_by_the_sweep_not_by_a_claim(claimed_once):
    """Where rows lock, the sweep skips a partition a push holds; a claim's cursor lock does not wait for it."""
    pid = claimed_once
    with held_elsewhere(lambda: store().lock_partitions([pid])), transaction.atomic():
        assert store().lock_partition_for_sweep(pid) is None
        row = store().lock_free_cursor(partition_id=pid, group=queues.QUEUE_MODE, now=datetime.now(UTC))
        assert row is not None
        assert row[1] == 0
    with transaction.atomic():
        assert store().lock_partition_for_sweep(pid) == (0, 2)


def test_a_cursor_a_claim_holds_is_skipped_by_another_claim(claimed_once):
    """Where rows lock, a second claim skips the cursor a first one holds; the sweep does not wait for it."""
    pid = claimed_once
    now = datetime.now(UTC)
    with (
        held_elsewhere(lambda: store().lock_free_cursor(partition_id=pid, group=queues.QUEUE_MODE, now=now)),
        transaction.atomic(),
    ):
        assert store().lock_free_cursor(partition_id=pid, group=queues.QUEUE_MODE, now=now) is None
        assert store().lock_partition_for_sweep(pid) == (0, 2)


@pytest.mark.parametrize(
    "at",
    [
        datetime(2026, 10, 8, 10, 0, 0, tzinfo=UTC),
        datetime(2026, 10, 8, 10, 0, 0, 1, tzinfo=UTC),
        datetime(2026, 10, 8, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(1999, 12, 31, 23, 59, 59, 120000, tzinfo=UTC),
    ],
)
def test_unix_micros_reads_a_timestamp_back_to_the_microsecond(at):
    """The charts' cheap time column is exact, fraction or none (Django
    stores no fraction for a whole second on SQLite)."""
    from queenadmin.domain.queues.store.base import from_unix_micros
    from queenadmin.models import QueueSampleTotal

    QueueSampleTotal.objects.create(
        resolution=10, at=at, pushed=0, popped=0, acked=0, failed=0, dlq=0, depth=0, oldest_claimable_age=0.0
    )
    (micros,) = QueueSampleTotal.objects.annotate(t=store().unix_micros("at")).values_list("t", flat=True)
    assert micros == (at - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
    assert from_unix_micros(micros) == at
