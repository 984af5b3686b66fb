"""The message-log domain: push, dedup, claims, leases, acks, groups, DLQ, depth."""

from __future__ import annotations

import itertools
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.db import transaction

from queenadmin.domain import clock, queues
from queenadmin.domain.queues import delivery, groups
from queenadmin.errors import InvalidArgument
from queenadmin.models import ConsumerCursor, DeadLetter, Message, Partition, Queue
from queenadmin.plumbing.db import json_text

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 10, 8, 10, 0, 0, tzinfo=UTC)


def push(queue: str = "q", n: int = 1, partition: str | None = None, txn: str | None = None):
    items = [
        queues.PushItem(
            queue,
            partition or queues.DEFAULT_PARTITION,
            json_text({"i": i}),
            None if txn is None else txn if n == 1 else f"{txn}-{i}",
        )
        for i in range(n)
    ]
    return queues.queue_push(items=items)


def claim(queue: str = "q", **kw: Any) -> queues.Claim:
    return queues.queue_claim(request=queues.PopRequest(queue=queue, **kw))


def ack(
    c: queues.Claim, status: str = "completed", messages: Any = None, fenced: bool = True, group: str | None = None
):
    items = [
        queues.AckItem(
            i,
            m.transaction_id,
            str(m.partition_id),
            status,  # type: ignore[arg-type]
            c.lease_id if fenced else None,
            None,
            group or c.group,
        )
        for i, m in enumerate(messages if messages is not None else c.messages)
    ]
    return queues.queue_ack(items=items)


def configure(name: str = "q", **options: Any) -> queues.QueueConfig:
    request = queues.ConfigureRequest(name, options=queues.QueueOptions(tuple(options.items())))
    return queues.queue_configure(request=request)


def depth(queue: str = "q", group: str | None = None) -> queues.QueueTotals:
    stats = queues.queue_stats(name=queue, group=group)
    assert stats is not None
    return stats.totals


# -- push ---------------------------------------------------------------------


def test_push_assigns_gapless_offsets_per_partition_and_auto_creates():
    first = push(n=3)
    other = push(n=2, partition="p2")
    assert [r.offset for r in first] == [0, 1, 2]
    assert [r.offset for r in other] == [0, 1]
    assert {r.status for r in first + other} == {"queued"}
    queue = Queue.objects.get(name="q")
    assert queue.options["leaseTime"] == 60
    assert queue.options["retryLimit"] == 3
    assert sorted(Partition.objects.values_list("name", "next_offset")) == [("Default", 3), ("p2", 2)]


def test_push_without_transaction_id_uses_the_message_id():
    (result,) = push()
    assert result.transaction_id == result.message_id
    assert len(result.message_id) == 36
    assert result.message_id[14] == "7"


def test_duplicate_answers_the_original_id_and_offset():
    (original,) = push(txn="t-1")
    (again,) = push(txn="t-1")
    assert again.status == "duplicate"
    assert (again.message_id, again.offset) == (original.message_id, original.offset)
    assert Message.objects.count() == 1


def test_repeat_inside_one_call_is_a_duplicate():
    items = [queues.PushItem("q", "Default", str(i), "same") for i in range(3)]
    results = queues.queue_push(items=items)
    assert [r.status for r in results] == ["queued", "duplicate", "duplicate"]
    assert {r.offset for r in results} == {0}
    assert Partition.objects.get().next_offset == 1


def test_dedup_is_per_partition():
    push(txn="t", partition="a")
    (other,) = push(txn="t", partition="b")
    assert other.status == "queued"


def test_dedup_window_ends_and_zero_turns_it_off():
    with time_machine.travel(T0, tick=False) as traveller:
        configure(dedupWindowSeconds=10)
        push(txn="t")
        traveller.shift(timedelta(seconds=11))
        (late,) = push(txn="t")
        assert (late.status, late.offset) == ("queued", 1)
    configure(name="off", dedupWindowSeconds=0)
    push("off", txn="x")
    (again,) = push("off", txn="x")
    assert again.status == "queued"


# -- claims and leases ----------------------------------------------------------


def test_claim_is_fifo_and_one_batch_per_partition_and_group():
    push(n=5)
    first = claim(batch=2)
    assert [m.offset for m in first.messages] == [0, 1]
    assert {m.delivery_attempt for m in first.messages} == {1}
    assert claim(batch=2).messages == ()
    assert claim(batch=2, group="other", subscription_mode="all").messages != ()


def test_missing_queue_claims_nothing():
    result = claim("ghost")
    assert result.messages == ()
    assert result.queue is None


def test_expired_lease_redelivers_with_the_next_attempt():
    with time_machine.travel(T0, tick=False) as traveller:
        push(n=3)
        first = claim(batch=2, lease_seconds=5)
        assert claim(batch=2).retry_at == T0 + timedelta(seconds=5)
        traveller.shift(timedelta(seconds=6))
        again = claim(batch=3)
        assert [(m.offset, m.delivery_attempt) for m in again.messages] == [(0, 2), (1, 2), (2, 1)]
        assert again.lease_id != first.lease_id
        # The old lease can neither ack nor extend any more.
        assert [o.error for o in ack(first)] == [queues.consume.BAD_LEASE] * 2
        assert queues.queue_lease_extend(lease_id=first.lease_id, seconds=30).renewed == 0


def test_completed_moves_the_cursor_and_releases_the_lease():
    push(n=3)
    c = claim(batch=2)
    outcomes = ack(c, messages=c.messages[1:])
    assert outcomes[0].success
    assert outcomes[0].lease_released
    assert depth() == queues.QueueTotals(
        total=3, pending=1, processing=0, ready=1, completed=2, dead_letter=0, partitions_pending=1, partitions_ready=1
    )
    # The earlier message was acked implicitly; acking it again is a no-op.
    (noop,) = ack(c, messages=c.messages[:1])
    assert (noop.success, noop.noop) == (True, True)
    assert [m.offset for m in claim().messages] == [2]


def test_processing_counts_the_leased_batch():
    push(n=5)
    claim(batch=2)
    totals = depth()
    assert (totals.pending, totals.processing, totals.ready) == (5, 2, 3)


def test_ack_with_a_wrong_lease_is_refused_and_changes_nothing():
    push(n=2)
    c = claim(batch=2)
    forged = queues.AckItem(0, c.messages[0].transaction_id, str(c.partition_id), "completed", queues.uuid7())
    (outcome,) = queues.queue_ack(items=[forged])
    assert (outcome.success, outcome.error) == (False, "invalid or expired lease")
    assert depth().processing == 2


def test_unfenced_ack_is_accepted():
    push(n=1)
    c = claim()
    (outcome,) = ack(c, fenced=False)
    assert outcome.success
    assert depth().pending == 0


def test_ack_of_unknown_things_is_refused_per_item():
    push(n=1)
    c = claim()
    pid = str(c.partition_id)
    items = [
        queues.AckItem(0, "nope", pid, "completed"),
        queues.AckItem(1, c.messages[0].transaction_id, "abc", "completed"),
        queues.AckItem(2, c.messages[0].transaction_id, "999999", "completed"),
    ]
    outcomes = queues.queue_ack(items=items)
    assert [o.success for o in outcomes] == [False, False, False]
    assert outcomes[0].error == queues.consume.UNRESOLVABLE
    assert outcomes[1].error == "partitionId is not a partition id"
    assert outcomes[2].error == "no partition 999999"


def test_failed_spends_retry_limit_then_dead_letters():
    configure(retryLimit=1)
    push(n=2, txn="m")
    c = claim(batch=1)
    (first,) = ack(c, "failed")
    assert (first.success, first.dlq, first.lease_released) == (True, False, True)
    c = claim(batch=1)
    assert [(m.offset, m.delivery_attempt) for m in c.messages] == [(0, 2)]
    (second,) = ack(c, "failed")
    assert second.dlq
    assert DeadLetter.objects.get().transaction_id == "m-0"
    assert [m.offset for m in claim().messages] == [1]
    assert depth().dead_letter == 1


def test_retry_hands_back_without_spending_a_retry():
    configure(retryLimit=0)
    push(n=1)
    for attempt in (1, 2, 3):
        c = claim()
        assert c.messages[0].delivery_attempt == attempt
        (outcome,) = ack(c, "retry")
        assert not outcome.dlq
    assert DeadLetter.objects.count() == 0


def test_dlq_status_files_at_once():
    push(n=2)
    c = claim(batch=1)
    (outcome,) = ack(c, "dlq")
    assert outcome.dlq
    assert depth().dead_letter == 1
    assert [m.offset for m in claim().messages] == [1]


def test_batch_ack_cursor_stops_at_the_lowest_message_that_comes_back():
    push(n=4)
    c = claim(batch=4)
    statuses = ["completed", "retry", "completed", "completed"]
    items = [
        queues.AckItem(i, m.transaction_id, str(m.partition_id), s, c.lease_id)  # type: ignore[arg-type]
        for i, (m, s) in enumerate(zip(c.messages, statuses, strict=True))
    ]
    assert all(o.success for o in queues.queue_ack(items=items))
    again = claim(batch=4)
    assert [(m.offset, m.delivery_attempt) for m in again.messages] == [(1, 2), (2, 2), (3, 2)]


def test_auto_ack_commits_at_delivery():
    push(n=3)
    c = claim(batch=2, auto_ack=True)
    assert c.lease_id == ""
    assert depth().pending == 1
    assert [m.offset for m in claim().messages] == [2]


def test_multi_partition_claim_shares_one_lease_and_the_budget():
    for name in ("a", "b", "c"):
        push(n=2, partition=name)
    c = claim(batch=5, max_partitions=3)
    assert len(c.messages) == 5
    assert len(c.partitions) == 3
    assert set(ConsumerCursor.objects.exclude(lease_id=None).values_list("lease_id", flat=True)) == {c.lease_id}
    extended = queues.queue_lease_extend(lease_id=c.lease_id, seconds=600)
    assert extended.renewed == 3


def test_partition_pop_takes_only_that_partition():
    push(n=1, partition="a")
    push(n=1, partition="b")
    c = claim(partition="b")
    assert [m.partition for m in c.messages] == ["b"]


def test_lease_extension_never_shortens():
    with time_machine.travel(T0, tick=False):
        push()
        c = claim(lease_seconds=300)
        result = queues.queue_lease_extend(lease_id=c.lease_id, seconds=10)
        assert result.renewed == 1
        assert result.expires_at == T0 + timedelta(seconds=300)
        result = queues.queue_lease_extend(lease_id=c.lease_id, seconds=600)
        assert result.expires_at == T0 + timedelta(seconds=600)


def attempts(c: queues.Claim) -> list[tuple[int, int]]:
    return [(m.offset, m.delivery_attempt) for m in c.messages]


def runs(group: str = queues.QUEUE_MODE) -> list[list[int]]:
    return ConsumerCursor.objects.get(group=group).delivery_runs


def test_delivery_runs_match_a_count_per_offset():
    """Runs stay merged, sorted and equal to one counter per offset."""
    rng = random.Random(4)
    runs: list[list[int]] = []
    counts: dict[int, int] = {}
    committed = 0
    for _ in range(500):
        if rng.random() < 0.3:
            committed += rng.randint(0, 4)
            runs = delivery.runs_trim(runs, committed)
            counts = {o: n for o, n in counts.items() if o > committed}
        first = committed + 1 if rng.random() < 0.8 else committed + rng.randint(1, 6)
        last = first + rng.randint(0, 8)
        runs = delivery.runs_deliver(runs, first, last)
        for offset in range(first, last + 1):
            counts[offset] = counts.get(offset, 0) + 1
        assert delivery.runs_attempts(runs, committed + 1, committed + 20) == [
            counts.get(o, 0) for o in range(committed + 1, committed + 21)
        ]
        assert all(a <= b for a, b, _ in runs)
        assert all(b1 < a2 and (b1 + 1 < a2 or n1 != n2) for (_, b1, n1), (a2, _, n2) in itertools.pairwise(runs))


def test_attempts_stay_exact_when_redelivered_batches_change_size():
    """Each message counts its own deliveries, whatever the batch sizes."""
    with time_machine.travel(T0, tick=False) as traveller:
        push(n=15)
        assert {a for _, a in attempts(claim(batch=10, lease_seconds=5))} == {1}
        traveller.shift(timedelta(seconds=6))
        small = claim(batch=5, lease_seconds=5)
        assert attempts(small) == [(o, 2) for o in range(0, 5)]
        ack(small)
        bigger = claim(batch=10, lease_seconds=5)
        assert attempts(bigger) == [(o, 2) for o in range(5, 10)] + [(o, 1) for o in range(10, 15)]
        traveller.shift(timedelta(seconds=6))
        assert attempts(claim(batch=3, lease_seconds=5)) == [(5, 3), (6, 3), (7, 3)]
        assert runs() == [[5, 7, 3], [8, 9, 2], [10, 14, 1]]
        traveller.shift(timedelta(seconds=6))
        assert attempts(claim(batch=15)) == [(5, 4), (6, 4), (7, 4), (8, 3), (9, 3)] + [(o, 2) for o in range(10, 15)]


def test_attempts_stay_exact_after_partial_batch_acks():
    """Acking part of a batch keeps the count of the rest, and trims it."""
    with time_machine.travel(T0, tick=False) as traveller:
        push(n=12)
        first = claim(batch=10, lease_seconds=5)
        (done,) = ack(first, messages=first.messages[2:3])
        assert not done.lease_released  # 3..9 are still out under the lease
        traveller.shift(timedelta(seconds=6))
        second = claim(batch=3, lease_seconds=5)
        assert attempts(second) == [(3, 2), (4, 2), (5, 2)]
        assert runs() == [[3, 5, 2], [6, 9, 1]]
        ack(second)
        assert attempts(claim(batch=10)) == [(6, 2), (7, 2), (8, 2), (9, 2), (10, 1), (11, 1)]


def test_retry_redelivers_with_exact_attempts():
    """A ``retry`` in a batch brings it and everything after it back once more."""
    push(n=6)
    c = claim(batch=4)
    statuses = ["completed", "retry", "completed", "completed"]
    items = [
        queues.AckItem(i, m.transaction_id, str(m.partition_id), s, c.lease_id)  # type: ignore[arg-type]
        for i, (m, s) in enumerate(zip(c.messages, statuses, strict=True))
    ]
    assert all(o.success for o in queues.queue_ack(items=items))
    again = claim(batch=6)
    assert attempts(again) == [(1, 2), (2, 2), (3, 2), (4, 1), (5, 1)]
    statuses = ["completed", "completed", "completed", "retry", "completed"]
    items = [
        queues.AckItem(i, m.transaction_id, str(m.partition_id), s, again.lease_id)  # type: ignore[arg-type]
        for i, (m, s) in enumerate(zip(again.messages, statuses, strict=True))
    ]
    assert all(o.lease_released for o in queues.queue_ack(items=items))
    assert attempts(claim(batch=6)) == [(4, 2), (5, 2)]


def test_failed_with_retries_left_redelivers_with_exact_attempts():
    """``failed`` hands the batch back; each message counts its own deliveries."""
    configure(retryLimit=2)
    push(n=5)
    ack(claim(batch=3), "failed", messages=None)
    second = claim(batch=2)
    assert attempts(second) == [(0, 2), (1, 2)]
    (outcome,) = ack(second, "failed", messages=second.messages[:1])
    assert not outcome.dlq
    assert attempts(claim(batch=5)) == [(0, 3), (1, 3), (2, 2), (3, 1), (4, 1)]


def test_consumer_groups_count_attempts_independently():
    """One group's redeliveries never show in another group's attempts."""
    with time_machine.travel(T0, tick=False) as traveller:
        push(n=4)
        claim(batch=4, lease_seconds=5)
        traveller.shift(timedelta(seconds=6))
        assert attempts(claim(group="g", subscription_mode="all", batch=2, lease_seconds=5)) == [(0, 1), (1, 1)]
        assert attempts(claim(batch=2, lease_seconds=5)) == [(0, 2), (1, 2)]
        traveller.shift(timedelta(seconds=6))
        assert attempts(claim(group="g", batch=4)) == [(0, 2), (1, 2), (2, 1), (3, 1)]
        assert attempts(claim(batch=4)) == [(0, 3), (1, 3), (2, 2), (3, 2)]
        assert runs("g") == [[0, 1, 2], [2, 3, 1]]


def test_auto_ack_counts_the_delivery_and_trims_the_record():
    """An auto-acked redelivery reports its attempt and keeps no record below the cursor."""
    with time_machine.travel(T0, tick=False) as traveller:
        push(n=4)
        claim(batch=4, lease_seconds=5)
        traveller.shift(timedelta(seconds=6))
        assert attempts(claim(batch=2, auto_ack=True)) == [(0, 2), (1, 2)]
        assert runs() == [[2, 3, 1]]
        ack(c := claim(batch=4))
        assert attempts(c) == [(2, 2), (3, 2)]
        assert runs() == []


# -- consumer groups --------------------------------------------------------------


def test_groups_have_their_own_cursors_and_subscription_modes():
    push(n=2)
    news = claim(group="news", subscription_mode="new")
    assert news.messages == ()
    everything = claim(group="all-of-it", subscription_mode="all", batch=10)
    assert [m.offset for m in everything.messages] == [0, 1]
    # A group that names no mode starts from the oldest message (Queen's default).
    assert [m.offset for m in claim(group="default", batch=10).messages] == [0, 1]
    push(n=1)
    assert [m.offset for m in claim(group="news").messages] == [2]
    # Queue mode starts from the oldest message, whatever the mode says.
    assert [m.offset for m in claim(subscription_mode="new", batch=10).messages] == [0, 1, 2]
    # The mode is decided on the group's first pop.
    assert claim(group="news", subscription_mode="all").messages == ()


def test_subscription_from_a_time_starts_after_earlier_messages():
    with time_machine.travel(T0, tick=False) as traveller:
        push(n=2)
        traveller.shift(timedelta(seconds=10))
        push(n=1)
        c = claim(group="g", subscription_from=T0 + timedelta(seconds=5), batch=10)
        assert [m.offset for m in c.messages] == [2]


def test_depth_of_an_unseen_group_is_minus_one_and_worst_group_wins():
    push(n=3)
    assert depth(group="never").pending == -1
    c = claim(group="slow", subscription_mode="all", batch=3)
    ack(c)
    claim(group="fast", subscription_mode="all", batch=1)
    assert depth().pending == 3  # the worst named group ("fast")
    assert depth(group="slow").pending == 0


def test_oldest_ready_age_is_read_from_the_head_message():
    with time_machine.travel(T0, tick=False) as traveller:
        push(n=2)
        traveller.shift(timedelta(seconds=30))
        claim(batch=1)
        stats = queues.queue_stats(name="q", with_age=True)
        assert stats is not None
        assert stats.oldest_ready_age == 30.0


def test_oldest_and_newest_message_are_the_slowest_groups_head_and_the_last_offset():
    """Oldest is the lowest pending offset of the slowest cursor; newest the last offset."""
    with time_machine.travel(T0, tick=False) as traveller:
        push(n=1)
        push(n=1, partition="done")
        traveller.shift(timedelta(seconds=10))
        push(n=1)
        traveller.shift(timedelta(seconds=10))
        push(n=1)
        ack(claim(partition="done"))

        def times(group: str | None = None) -> dict[str, tuple[datetime | None, datetime | None]]:
            stats = queues.queue_stats(name="q", group=group, with_messages=True)
            assert stats is not None
            return {p.name: (p.oldest_message_at, p.newest_message_at) for p in stats.partitions}

        newest = T0 + timedelta(seconds=20)
        assert times() == {"Default": (T0, newest), "done": (None, T0)}
        # A leased message is still pending, so it stays the oldest.
        leased = claim(batch=1)
        assert times()["Default"] == (T0, newest)
        ack(leased)
        assert times()["Default"] == (T0 + timedelta(seconds=10), newest)
        claim(batch=2, auto_ack=True)
        assert times()["Default"] == (None, newest)
        # With named groups the slowest one decides; a group can be asked for.
        claim(group="fast", subscription_mode="all", batch=3, auto_ack=True)
        claim(group="slow", subscription_mode="all", batch=1, auto_ack=True)
        assert times()["Default"] == (T0 + timedelta(seconds=10), newest)
        assert times("fast")["Default"] == (None, newest)
        # Without the flag nothing is looked up.
        stats = queues.queue_stats(name="q")
        assert stats is not None
        assert {(p.oldest_message_at, p.newest_message_at) for p in stats.partitions} == {(None, None)}


# -- configure and delete -----------------------------------------------------------


def test_configure_merges_and_replaces():
    created = configure(leaseTime=30, retryLimit=5)
    assert created.created
    assert (created.options["leaseTime"], created.options["retryLimit"]) == (30, 5)
    merged = configure(retryLimit=2)
    assert (merged.options["leaseTime"], merged.options["retryLimit"]) == (30, 2)
    request = queues.ConfigureRequest("q", "ns", options=queues.QueueOptions((("retryLimit", 1),)), replace=True)
    replaced = queues.queue_configure(request=request)
    assert (replaced.options["leaseTime"], replaced.namespace) == (300, "ns")
    restored = configure(retryLimit=None)
    assert restored.options["retryLimit"] == 3


@pytest.mark.parametrize("options", [{"ttl": -1}, {"leaseTime": 2**31}])
def test_configure_refuses_integers_out_of_range(options):
    """An integer option outside 0..2**31-1 is refused and nothing is stored."""
    with pytest.raises(InvalidArgument, match="must be from 0 to 2147483647"):
        configure(**options)
    assert not Queue.objects.exists()


@pytest.mark.parametrize("change", [("leaseTime", "5"), ("leaseTime", True), ("deadLetterQueue", 1), ("nope", 1)])
def test_options_of_the_wrong_python_type_are_a_programming_error(change):
    """In-process callers get TypeError for what the wire parser would refuse."""
    with pytest.raises(TypeError):
        queues.QueueOptions((change,))


def test_clamped_options_are_stored_clamped():
    """minPopWaitTime and retentionSinkHoldMaxSeconds clamp instead of refusing."""
    config = configure(minPopWaitTime=999_999, retentionSinkHoldMaxSeconds=1)
    assert (config.options["minPopWaitTime"], config.options["retentionSinkHoldMaxSeconds"]) == (60000, 60)


def test_delete_removes_everything():
    push(n=3)
    c = claim()
    ack(c, "dlq")
    assert queues.queue_delete(name="q") is True
    assert queues.queue_delete(name="q") is False
    assert not Message.objects.exists()
    assert not DeadLetter.objects.exists()
    assert not Partition.objects.exists()


def test_dlq_list_filters_and_counts():
    push(n=2)
    ack(claim(batch=2), "dlq")
    rows, total = queues.dlq_list(query=queues.DeadLetterQuery(queue="q", limit=1))
    assert total == 2
    assert len(rows) == 1
    rows, total = queues.dlq_list(query=queues.DeadLetterQuery(queue="other", limit=10))
    assert (rows, total) == ([], 0)


# -- delayedProcessing --------------------------------------------------------


def test_delayed_processing_holds_messages_until_their_delay_has_passed():
    configure(delayedProcessing=10)
    with time_machine.travel(T0, tick=False):
        push(n=2)
    with time_machine.travel(T0 + timedelta(seconds=4), tick=False):
        push(n=1)
    with time_machine.travel(T0 + timedelta(seconds=9), tick=False):
        early = claim(batch=10)
        assert early.messages == ()
        assert early.retry_at == T0 + timedelta(seconds=10)
    with time_machine.travel(T0 + timedelta(seconds=10), tick=False):
        # The first two are ready; the third (pushed at +4 s) waits, and so FIFO holds.
        first = claim(batch=10)
        assert [m.offset for m in first.messages] == [0, 1]
        ack(first)
        rest = claim(batch=10)
        assert rest.messages == ()
        assert rest.retry_at == T0 + timedelta(seconds=14)
    with time_machine.travel(T0 + timedelta(seconds=14), tick=False):
        assert [m.offset for m in claim(batch=10).messages] == [2]


def test_without_delayed_processing_a_message_is_ready_at_once():
    configure(delayedProcessing=0)
    with time_machine.travel(T0, tick=False):
        push(n=1)
        assert [m.offset for m in claim().messages] == [0]


# -- lease ids, the overview ------------------------------------------------------


def test_a_lease_id_that_is_no_uuid_is_never_renewed():
    """Only UUIDs are handed out as lease ids; anything else renews nothing."""
    push()
    claim()
    assert queues.queue_lease_extend(lease_id="not-a-lease", seconds=30) == queues.LeaseExtension(
        "not-a-lease", 0, None
    )


def test_lease_extension_of_less_than_a_second_is_refused():
    """The domain refuses an extension under a second, whoever calls it."""
    with pytest.raises(InvalidArgument, match="seconds must be at least 1"):
        queues.queue_lease_extend(lease_id=queues.uuid7(), seconds=0)


def test_overview_counts_every_queue_and_its_lags():
    """The overview sums the queues and lists each partition's pending count."""
    with time_machine.travel(T0, tick=False) as traveller:
        configure("ns-queue")
        queues.queue_configure(request=queues.ConfigureRequest("tasked", "ns", "work"))
        push("ns-queue", n=3)
        push("tasked", n=1, partition="a")
        push("tasked", n=2, partition="b")
        traveller.shift(timedelta(seconds=5))
        overview = queues.queue_overview()
    assert [q.name for q in overview.queues] == ["tasked", "ns-queue"]
    assert (overview.partitions, overview.namespaces, overview.tasks) == (3, 1, 1)
    assert overview.offset_lags == (1, 2, 3)
    assert overview.time_lags == (5.0, 5.0)
    assert overview.taken_at == T0 + timedelta(seconds=5)


# -- transactions ---------------------------------------------------------------


def test_writes_inside_one_caller_transaction_commit_or_roll_back_together():
    """An ack and a push run by their _in_txn forms share the caller's fate."""
    push(n=2)
    c = claim(batch=1)
    item = queues.AckItem(0, c.messages[0].transaction_id, str(c.partition_id), "completed", c.lease_id)
    more = [queues.PushItem("q", "Default", "3")]

    def ack_and_push(*, abort: bool) -> None:
        with transaction.atomic():
            (outcome,) = queues.queue_ack_in_txn(items=[item], now=clock.now())
            assert outcome.success
            queues.queue_push_in_txn(items=more, now=clock.now())
            if abort:
                raise RuntimeError("abort")

    with pytest.raises(RuntimeError, match="abort"):
        ack_and_push(abort=True)
    assert (depth().pending, depth().processing, Message.objects.count()) == (2, 1, 2)
    ack_and_push(abort=False)
    assert (depth().pending, depth().processing, Message.objects.count()) == (2, 0, 3)


def test_public_writes_refuse_to_nest():
    """A public write opens the outermost transaction; inside another it is an error."""
    with pytest.raises(RuntimeError, match="durable"), transaction.atomic():
        queues.queue_push(items=[queues.PushItem("q", "Default", "1")])


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "write",
    [
        lambda: queues.queue_push_in_txn(items=[queues.PushItem("q", "Default", "1")], now=T0),
        lambda: queues.queue_claim_in_txn(request=queues.PopRequest("q"), now=T0),
        lambda: queues.queue_ack_in_txn(items=[], now=T0),
        lambda: queues.queue_lease_extend_in_txn(lease_id=queues.uuid7(), seconds=1, now=T0),
        lambda: queues.queue_configure_in_txn(request=queues.ConfigureRequest("q"), now=T0),
        lambda: queues.queue_delete_in_txn(name="q"),
    ],
)
def test_inner_forms_need_the_callers_transaction(write):
    """Each _in_txn form asserts that its caller holds a transaction."""
    with pytest.raises(AssertionError):
        write()


def test_default_subscription_mode_is_a_setting(settings):
    """``QUEENADMIN_DEFAULT_SUBSCRIPTION_MODE=new`` makes unnamed groups start after the backlog."""
    settings.QUEENADMIN_DEFAULT_SUBSCRIPTION_MODE = "new"
    push(n=2)
    assert claim(group="late").messages == ()
    push(n=1)
    assert [m.offset for m in claim(group="late").messages] == [2]


def test_a_failed_ack_that_dead_letters_still_releases_the_rest_of_the_batch():
    """retryLimit 1: the second failure of the message at offset 1 files it in
    the DLQ and hands offsets 2..4 back at once (the lease is released)."""
    configure(retryLimit=1)
    push(n=5)
    first = claim(batch=5)
    assert ack(first, messages=[first.messages[0]])[0].success
    (second_fail,) = ack(first, "failed", messages=[first.messages[1]])
    assert (second_fail.success, second_fail.lease_released, second_fail.dlq) == (True, True, False)
    again = claim(batch=5)
    assert [m.offset for m in again.messages] == [1, 2, 3, 4]
    (dead,) = ack(again, "failed", messages=[again.messages[0]])
    assert (dead.success, dead.lease_released, dead.dlq) == (True, True, True)
    rest = claim(batch=5)
    assert [m.offset for m in rest.messages] == [2, 3, 4]


def test_an_ack_never_moves_a_cursor_past_messages_nobody_received():
    """An unfenced ack of offset 14 while 0..4 are leased is refused; so is a
    queue-mode ack of a message only a named group received."""
    push(n=20)
    leased = claim(batch=5)
    (m14,) = list(Message.objects.filter(offset=14))
    unfenced = queues.AckItem(0, m14.transaction_id, str(m14.partition_id), "completed")
    (refused,) = queues.queue_ack(items=[unfenced])
    assert (refused.success, refused.error) == (False, queues.consume.UNRESOLVABLE)
    assert ConsumerCursor.objects.get(group=queues.QUEUE_MODE).committed_offset == -1
    assert ack(leased)[0].success
    assert [m.offset for m in claim(batch=3).messages] == [5, 6, 7]
    billing = claim(group="billing", batch=12)
    (m11,) = [m for m in billing.messages if m.offset == 11]
    wrong_group = queues.AckItem(0, m11.transaction_id, str(m11.partition_id), "completed")
    (refused_queue_mode,) = queues.queue_ack(items=[wrong_group])
    assert refused_queue_mode.success is False
    assert ConsumerCursor.objects.get(group=queues.QUEUE_MODE).committed_offset == 4


# -- offset 0 is a message like any other ---------------------------------------


def test_a_new_group_skips_a_partition_whose_only_message_is_offset_0():
    """``new`` starts after what is there: one message (offset 0) is skipped too."""
    push(n=1)
    assert claim(group="news", subscription_mode="new").messages == ()
    push(n=1)
    assert [m.offset for m in claim(group="news").messages] == [1]


def test_subscription_from_a_time_after_only_offset_0_starts_at_offset_1():
    with time_machine.travel(T0, tick=False) as traveller:
        push(n=1)
        traveller.shift(timedelta(seconds=10))
        push(n=2)
        c = claim(group="g", subscription_from=T0 + timedelta(seconds=5), batch=10)
        assert [m.offset for m in c.messages] == [1, 2]


def test_a_seek_to_a_time_after_only_offset_0_reads_on_from_offset_1():
    with time_machine.travel(T0, tick=False) as traveller:
        push(n=1)
        traveller.shift(timedelta(seconds=10))
        push(n=2)
        ack(claim(group="g", subscription_mode="all", batch=10), group="g")
        groups.queue_group_seek(group="g", queue="q", to_end=False, timestamp=T0 + timedelta(seconds=5))
        assert [m.offset for m in claim(group="g", batch=10).messages] == [1, 2]
        groups.queue_group_seek(group="g", queue="q", to_end=False, timestamp=T0 - timedelta(seconds=5))
        assert [m.offset for m in claim(group="g", batch=10).messages] == [0, 1, 2]


def test_completed_retention_never_takes_offset_0_from_a_consumer_that_read_nothing():
    """A group with no cursor on a partition has done nothing there: not even
    offset 0 is deleted; where it consumed, what it consumed goes."""
    configure(retentionEnabled=True, completedRetentionSeconds=1)
    with time_machine.travel(T0, tick=False) as traveller:
        push(n=2)
        push(n=1, partition="other")
        assert len(claim(group="g", subscription_mode="all", partition="other", auto_ack=True).messages) == 1
        traveller.shift(timedelta(seconds=60))
        assert queues.queue_retention_sweep().deleted == 1
        assert sorted(Message.objects.values_list("partition__name", "offset")) == [("Default", 0), ("Default", 1)]


def test_a_partition_a_group_never_read_counts_from_offset_0_everywhere():
    """A registered group with no cursor on a partition has all of it left:
    depth, the group's lag and the sampled depth count offset 0 too."""
    from queenadmin.domain.queues import browse, history

    push(n=2, partition="a")
    push(n=2, partition="b")
    claim(group="g", subscription_mode="all", partition="a", batch=1)
    totals = queues.queue_stats(name="q", group="g").totals  # type: ignore[union-attr]
    assert (totals.pending, totals.processing) == (4, 1)
    lags = {r.partition: r.lag for r in browse.group_detail(group="g")["q"]}
    assert lags == {"a": 2, "b": 2}
    (counters,) = history.queue_counters()
    assert (counters.pushed, counters.depth, counters.processing) == (4, 4, 1)


def test_a_partition_of_one_message_has_its_push_time_as_oldest_and_newest():
    """The message at offset 0 is a message: its time is read, not skipped."""
    with time_machine.travel(T0, tick=False):
        push(n=1)
        stats = queues.queue_stats(name="q", with_messages=True, with_age=True)
    assert stats is not None
    (part,) = stats.partitions
    assert (part.pending_offset, part.last_offset, part.log_start) == (0, 0, 0)
    assert (part.oldest_message_at, part.newest_message_at) == (T0, T0)
    assert stats.oldest_ready_age == 0.0
