"""Retention and limits: the log start, retention rules, maxSize, windowBuffer,
priority. Time moves with time-machine; sweeps are called directly."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.db import transaction

from queenadmin.domain import queues, transactions
from queenadmin.errors import InvalidArgument, QueueFull
from queenadmin.models import ConsumerCursor, Message, Partition, Queue
from queenadmin.plumbing.db import json_text
from tests.scale import scaled, sized

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 10, 8, 10, 0, 0, tzinfo=UTC)


@pytest.fixture
def clock_at():
    with time_machine.travel(T0, tick=False) as traveller:
        yield traveller


def configure(name: str = "q", **options: Any) -> queues.QueueConfig:
    request = queues.ConfigureRequest(name, options=queues.QueueOptions(tuple(options.items())))
    return queues.queue_configure(request=request)


def retained(name: str = "q", **options: Any) -> queues.QueueConfig:
    return configure(name, retentionEnabled=True, **options)


def push(queue: str = "q", n: int = 1, partition: str = "Default", tag: str = "m") -> list[queues.PushResult]:
    items = [queues.PushItem(queue, partition, json_text({"i": i, "tag": tag}), f"{tag}-{i}") for i in range(n)]
    return queues.queue_push(items=items)


def claim(queue: str = "q", **kw: Any) -> queues.Claim:
    return queues.queue_claim(request=queues.PopRequest(queue=queue, **kw))


def ack(c: queues.Claim, messages: Any = None, status: str = "completed") -> list[queues.AckOutcome]:
    items = [
        queues.AckItem(i, m.transaction_id, str(m.partition_id), status, c.lease_id, None, c.group)  # type: ignore[arg-type]
        for i, m in enumerate(c.messages if messages is None else messages)
    ]
    return queues.queue_ack(items=items)


def totals(queue: str = "q", group: str | None = None) -> queues.QueueTotals:
    stats = queues.queue_stats(name=queue, group=group)
    assert stats is not None
    return stats.totals


def partition(queue: str = "q", name: str = "Default") -> Partition:
    return Partition.objects.get(queue__name=queue, name=name)


def stored(queue: str = "q", name: str = "Default") -> list[int]:
    return sorted(Message.objects.filter(partition=partition(queue, name)).values_list("offset", flat=True))


def payload_bytes(queue: str = "q") -> int:
    return sum(
        len(p.encode()) for p in Message.objects.filter(partition__queue__name=queue).values_list("payload", flat=True)
    )


# -- rule 1: retentionSeconds ---------------------------------------------------


def test_a_retention_window_alone_deletes_by_default(clock_at):
    """The official client's ``.config(retention_seconds=...)`` sends no
    retentionEnabled: by default the window alone turns retention on."""
    configure(retentionSeconds=10)
    push(n=3)
    clock_at.shift(timedelta(seconds=60))
    assert queues.queue_retention_sweep() == queues.RetentionSweep(deleted=3, partitions=1, skipped=0)
    assert stored() == []


def test_retention_is_opt_in_with_retention_enabled_when_configured(clock_at, settings):
    """With RETENTION_REQUIRES_ENABLED (Queen's rule), a window without
    retentionEnabled deletes nothing."""
    settings.QUEENADMIN_RETENTION_REQUIRES_ENABLED = True
    configure(retentionSeconds=10, completedRetentionSeconds=10)
    push(n=3)
    ack(claim(batch=3))
    clock_at.shift(timedelta(seconds=60))
    assert queues.queue_retention_sweep() == queues.RetentionSweep(0, 0, 0)
    assert stored() == [0, 1, 2]


def test_retention_seconds_deletes_old_messages_consumed_or_not(clock_at):
    """Messages older than retentionSeconds go whether consumed or not; the
    log start moves past them, depth and retained bytes follow."""
    retained(retentionSeconds=10)
    push(n=5, tag="old")
    clock_at.shift(timedelta(seconds=8))
    push(n=3, tag="new")
    ack(claim(batch=2))  # queue mode finished 0..1; 2..4 never consumed
    clock_at.shift(timedelta(seconds=7))  # the first five are 15 s old, the rest 7 s

    sweep = queues.queue_retention_sweep()

    assert sweep == queues.RetentionSweep(deleted=5, partitions=1, skipped=0)
    assert stored() == [5, 6, 7]
    part = partition()
    assert (part.log_start, part.next_offset) == (5, 8)
    assert part.retained_bytes == payload_bytes()
    t = totals()
    assert (t.total, t.pending, t.processing) == (3, 3, 0)
    # The pop on a partition whose unconsumed messages were deleted starts at
    # the log start, first delivery.
    c = claim(batch=10)
    assert [(m.offset, m.delivery_attempt) for m in c.messages] == [(5, 1), (6, 1), (7, 1)]
    assert all(o.success for o in ack(c))
    assert totals().pending == 0


def test_max_wait_time_evicts_without_retention_enabled(clock_at, settings):
    """maxWaitTimeSeconds deletes old messages whether retentionEnabled is set
    or not, even under Queen's opt-in (which ignores the 5 s window here)."""
    settings.QUEENADMIN_RETENTION_REQUIRES_ENABLED = True
    configure(maxWaitTimeSeconds=30, retentionSeconds=5)
    push(n=2)
    clock_at.shift(timedelta(seconds=20))
    assert queues.queue_retention_sweep().deleted == 0
    clock_at.shift(timedelta(seconds=11))
    assert queues.queue_retention_sweep().deleted == 2
    assert totals().pending == 0


def test_sweep_runs_in_bounded_batches_and_is_idempotent(clock_at):
    """A batch of 4 deletes 10 messages in three steps; a second sweep finds nothing."""
    retained(retentionSeconds=1)
    push(n=10)
    clock_at.shift(timedelta(seconds=2))
    assert queues.queue_retention_sweep(batch=4).deleted == 10
    assert stored() == []
    assert partition().log_start == 10
    assert partition().retained_bytes == 0
    assert queues.queue_retention_sweep(batch=4) == queues.RetentionSweep(0, 0, 0)
    push(n=1, tag="later")
    assert stored() == [10]
    assert totals().pending == 1


def test_a_leased_batch_deleted_by_retention_releases_the_partition(clock_at):
    """A lease whose whole batch retention deleted does not hold the
    partition until it expires: its acks answer unknown, new messages are
    claimable at once."""
    retained(retentionSeconds=10)
    push(n=3, tag="old")
    c = claim(batch=3, lease_seconds=300)
    clock_at.shift(timedelta(seconds=11))
    push(n=2, tag="new")
    assert queues.queue_retention_sweep().deleted == 3
    assert [o.success for o in ack(c)] == [False, False, False]
    t = totals()
    assert (t.pending, t.processing) == (2, 0)
    again = claim(batch=10)
    assert [m.offset for m in again.messages] == [3, 4]


def test_a_half_deleted_lease_keeps_its_live_messages(clock_at):
    """Retention inside a leased batch: the lease stays on the messages
    still stored, and acking them finishes the batch."""
    retained(retentionSeconds=10)
    push(n=2, tag="old")
    clock_at.shift(timedelta(seconds=5))
    push(n=2, tag="new")
    c = claim(batch=4)
    clock_at.shift(timedelta(seconds=6))
    assert queues.queue_retention_sweep().deleted == 2
    assert totals().processing == 2
    outcomes = ack(c)
    assert [o.success for o in outcomes] == [False, False, True, True]
    t = totals()
    assert (t.total, t.pending, t.completed) == (2, 0, 2)  # the deleted two were skipped, not completed
    assert ConsumerCursor.objects.get(group=queues.QUEUE_MODE).lease_id is None


# -- rule 2: completedRetentionSeconds ----------------------------------------


def test_completed_retention_deletes_only_what_queue_mode_consumed(clock_at):
    """Queue mode: consumed messages older than the window go; the rest stay."""
    retained(completedRetentionSeconds=5)
    push(n=5)
    ack(claim(batch=3))
    clock_at.shift(timedelta(seconds=6))
    assert queues.queue_retention_sweep().deleted == 3
    assert stored() == [3, 4]
    assert totals().pending == 2


def test_completed_retention_waits_for_every_consumer_group(clock_at):
    """Named groups: the slowest group's committed offset caps the delete; a
    registered group that never read the partition keeps everything."""
    retained(completedRetentionSeconds=5)
    push(n=5)
    ack(claim(batch=5, group="fast", subscription_mode="all"))
    ack(claim(batch=2, group="slow", subscription_mode="all"))
    push(n=2, partition="other", tag="o")
    ack(claim(batch=2, group="fast", partition="other", subscription_mode="all"))
    clock_at.shift(timedelta(seconds=6))
    assert queues.queue_retention_sweep().deleted == 2
    assert stored() == [2, 3, 4]
    assert stored(name="other") == [0, 1]  # "slow" never read it
    assert totals(group="slow").pending == 3 + 2
    assert totals(group="fast").pending == 0


def test_completed_retention_keeps_what_nobody_consumes(clock_at):
    retained(completedRetentionSeconds=1)
    push(n=3)
    clock_at.shift(timedelta(seconds=60))
    assert queues.queue_retention_sweep().deleted == 0
    assert stored() == [0, 1, 2]


def test_a_lagging_named_group_reads_on_from_the_log_start(clock_at):
    """A group whose cursor is below the log start (rule 1 deleted its
    backlog) pops from the log start; depth never goes negative or stale."""
    retained(retentionSeconds=10)
    push(n=4)
    ack(claim(batch=1, group="g", subscription_mode="all"))
    clock_at.shift(timedelta(seconds=11))
    push(n=2, tag="new")
    assert queues.queue_retention_sweep().deleted == 4
    t = totals(group="g")
    assert (t.total, t.pending, t.completed) == (2, 2, 1)
    c = claim(batch=10, group="g")
    assert [(m.offset, m.delivery_attempt) for m in c.messages] == [(4, 1), (5, 1)]
    ack(c)
    t = totals(group="g")
    assert (t.pending, t.completed) == (0, 3)


@scaled
def test_100k_pushed_and_consumed_leave_no_rows_and_exact_depths(clock_at):
    """Disk stays bounded: 100,000 messages (24,000 at ``QA_SCALE=ci``)
    pushed and consumed with a 1 s retention, in rounds, leave no message
    row behind, and the depth is exact after every round. Every sweep
    takes several batches of each partition (2,000 or 5,000 messages a
    partition a round, batches of 1,000)."""
    retained(completedRetentionSeconds=1)
    (rounds, per_round), parts = sized(ci=(3, 8_000), full=(5, 20_000)), 4
    sweep_batch = 1000
    for r in range(rounds):
        items = [queues.PushItem("q", f"p{i % parts}", str(i), f"r{r}-{i}") for i in range(per_round)]
        queues.queue_push(items=items)
        consumed, leftover = 0, 1000 + r
        while consumed < per_round - leftover:
            wanted = min(5000, per_round - leftover - consumed)
            consumed += len(claim(batch=wanted, max_partitions=parts, auto_ack=True).messages)
        clock_at.shift(timedelta(seconds=2))
        queues.queue_retention_sweep(batch=sweep_batch)
        assert totals().pending == leftover
        assert Message.objects.count() == leftover
        while totals().pending:
            claim(batch=5000, max_partitions=parts, auto_ack=True)
        clock_at.shift(timedelta(seconds=2))
        queues.queue_retention_sweep(batch=sweep_batch)
        assert Message.objects.count() == 0
        assert totals().pending == 0
    parts_rows = list(
        Partition.objects.filter(queue__name="q").values_list("log_start", "next_offset", "retained_bytes")
    )
    # Offsets start at 0: a partition's next offset is how many it was pushed.
    assert sum(n for _, n, _ in parts_rows) == rounds * per_round
    assert all(start == n and size == 0 for start, n, size in parts_rows)


# -- maxSize ------------------------------------------------------------------


def test_max_size_refuses_the_pushes_of_a_full_queue_and_writes_nothing():
    """The items of a queue that would pass maxSize answer failed with
    Queen's message; nothing of them is stored, not even a new partition;
    another queue in the same call is pushed."""
    configure(maxSize=5)
    assert [r.status for r in push(n=4)] == ["queued"] * 4
    items = [
        queues.PushItem("q", "fresh", "1", "a"),
        queues.PushItem("other", "Default", "2", "b"),
        queues.PushItem("q", "Default", "3", "c"),
    ]
    results = queues.queue_push(items=items)
    assert [(r.index, r.status, r.queue) for r in results] == [
        (0, "failed", "q"),
        (1, "queued", "other"),
        (2, "failed", "q"),
    ]
    assert results[0].error == "Queue 'q' would exceed max capacity (5). Current: 4, Batch: 2"
    assert (results[0].message_id, results[0].offset, results[0].transaction_id) == ("", queues.NEVER_LOGGED, "a")
    assert not Partition.objects.filter(queue__name="q", name="fresh").exists()
    assert Message.objects.filter(partition__queue__name="q").count() == 4
    assert partition().next_offset == 4
    assert [r.status for r in push(n=1, tag="fits")] == ["queued"]


def test_max_size_counts_the_arithmetic_depth_so_consuming_makes_room():
    configure(maxSize=3)
    push(n=3)
    assert push(tag="x")[0].status == "failed"
    ack(claim(batch=2))
    assert [r.status for r in push(n=2, tag="y")] == ["queued"] * 2
    assert push(tag="z")[0].status == "failed"
    assert totals().pending == 3


def test_max_size_in_a_transaction_rolls_it_back():
    configure(maxSize=1)
    push()
    bundle = transactions.TxnBundle(pushes=(transactions.TxnPush(0, queues.PushItem("q", "Default", "1", "t")),))
    outcome = transactions.txn_commit(bundle=bundle)
    assert (outcome.success, outcome.reason) == (False, "queue_full")
    assert (
        outcome.error
        == "QFULL Queue 'q' would exceed max capacity (1). Current: 1, Batch: 1; the transaction rolled back"
    )
    assert Message.objects.count() == 1


def test_max_size_in_txn_raises_for_in_process_callers():
    configure(maxSize=1)
    push()
    with pytest.raises(QueueFull), transaction.atomic():
        queues.queue_push_in_txn(items=[queues.PushItem("q", "Default", "1", "t")], now=T0)
    assert Message.objects.count() == 1


# -- windowBuffer and priority --------------------------------------------------


def test_window_buffer_delivers_only_after_a_quiet_window(clock_at):
    """windowBuffer: a partition pushed to within the window delivers
    nothing; the claim says when to retry; then everything comes at once."""
    configure(windowBuffer=10)
    push(n=2)
    clock_at.shift(timedelta(seconds=6))
    push(n=1, tag="late")
    push(n=1, partition="quiet", tag="q")
    clock_at.shift(timedelta(seconds=5))
    c = claim(batch=10, max_partitions=2)
    assert c.messages == ()
    assert c.retry_at == T0 + timedelta(seconds=16)
    clock_at.shift(timedelta(seconds=5))
    c = claim(batch=10, max_partitions=2)
    assert sorted((m.partition, m.offset) for m in c.messages) == [
        ("Default", 0),
        ("Default", 1),
        ("Default", 2),
        ("quiet", 0),
    ]


def test_priority_outside_its_range_is_refused_by_name():
    """priority orders discovery pops (tests/unit/test_conflation.py): a value
    outside -1000..1000 is refused and stores nothing; one inside is kept."""
    with pytest.raises(InvalidArgument, match=r"option priority must be from -1000 to 1000"):
        configure(priority=5000)
    assert not Queue.objects.filter(name="q").exists()
    assert configure(priority=5).options["priority"] == 5
