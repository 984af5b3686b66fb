"""Conflation (last-value delivery per partition) and queue priority in the
message-log domain: claims, acks, the stored group policy, and the order a
namespace or task pop visits queues in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from queenadmin.domain import queues
from queenadmin.domain.queues import groups
from queenadmin.domain.queues import operator as queue_operator
from queenadmin.errors import InvalidArgument
from queenadmin.models import ConsumerCursor, ConsumerGroup, DeadLetter, Message, Partition
from queenadmin.plumbing.db import json_text

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 10, 8, 10, 0, 0, tzinfo=UTC)


def push(queue: str = "q", values: Any = (), partition: str = queues.DEFAULT_PARTITION):
    items = [queues.PushItem(queue, partition, json_text(v)) for v in values]
    return queues.queue_push(items=items)


def claim(queue: str | None = "q", **kw: Any) -> queues.Claim:
    return queues.queue_claim(request=queues.PopRequest(queue=queue, **kw))


def conflating(queue: str = "q", group: str = "g", **kw: Any) -> queues.Claim:
    kw.setdefault("conflation_width", 64)
    return claim(queue, group=group, conflation=True, **kw)


def ack(c: queues.Claim, status: str = "completed"):
    items = [
        queues.AckItem(i, m.transaction_id, str(m.partition_id), status, c.lease_id, None, c.group)  # type: ignore[arg-type]
        for i, m in enumerate(c.messages)
    ]
    return queues.queue_ack(items=items)


def configure(name: str = "q", namespace: str | None = None, task: str | None = None, **options: Any):
    request = queues.ConfigureRequest(
        name, namespace=namespace, task=task, options=queues.QueueOptions(tuple(options.items()))
    )
    return queues.queue_configure(request=request)


def values(c: queues.Claim) -> list[tuple[str, Any]]:
    return [(m.partition, m.payload_json) for m in c.messages]


# -- conflation -----------------------------------------------------------------


def test_one_conflating_pop_delivers_only_the_newest_message_per_partition():
    """Many pushes, one pop: one message per partition, the newest, leasing the whole backlog."""
    push(values=range(5), partition="a")
    push(values=range(10, 13), partition="b")
    c = conflating()
    assert sorted(values(c)) == [("a", "4"), ("b", "12")]
    assert c.conflation is True
    assert c.conflation_conflict is False
    for m in c.messages:
        cursor = ConsumerCursor.objects.get(partition_id=m.partition_id, group="g")
        # The lease spans (committed, tail]: its last offset is the delivered one.
        assert cursor.batch_last == m.offset
        assert cursor.lease_id == c.lease_id
        assert m.delivery_attempt == 1
    # Both partitions are leased: nothing more for the group.
    assert conflating().messages == ()


def test_ack_retires_the_superseded_and_new_pushes_deliver_the_new_newest():
    """Acking the newest commits past the older ones; later pushes give the newest of them."""
    push(values=["a1", "a2", "a3"])
    first = conflating()
    assert values(first) == [("Default", '"a3"')]
    assert [o.success for o in ack(first)] == [True]
    depth = queues.queue_stats(name="q", group="g")
    assert depth is not None
    assert depth.totals.pending == 0
    assert depth.conflation is True
    assert conflating().messages == ()
    push(values=["b1", "b2"])
    second = conflating()
    assert values(second) == [("Default", '"b2"')]
    # Nothing was deleted: retention alone governs storage.
    assert Message.objects.count() == 5


def test_superseded_messages_are_not_redelivered_but_a_plain_group_sees_all():
    """Another group on the same queue that does not conflate reads every message."""
    push(values=range(4))
    ack(conflating())
    assert conflating().messages == ()
    plain = claim(group="plain", batch=10)
    assert [m.payload_json for m in plain.messages] == ["0", "1", "2", "3"]
    assert plain.conflation is False
    assert plain.conflation_conflict is False


def test_the_stored_policy_wins_and_a_disagreeing_pop_is_flagged():
    """A group registered as conflating stays so; one registered plain stays plain."""
    push(values=range(3))
    first = conflating()
    assert values(first) == [("Default", "2")]
    ack(first)
    ack(claim(group="p", batch=1))
    push(values=range(3, 6))
    asked_plain = claim(group="g", batch=10)
    assert values(asked_plain) == [("Default", "5")]
    assert (asked_plain.conflation, asked_plain.conflation_conflict) == (True, True)

    asked_conflation = conflating(group="p", batch=1)
    # Stored plain: the next message in order, not the newest.
    assert values(asked_conflation) == [("Default", "1")]
    assert (asked_conflation.conflation, asked_conflation.conflation_conflict) == (False, True)
    assert dict(ConsumerGroup.objects.values_list("name", "conflation")) == {"g": True, "p": False}


def test_an_empty_claim_still_says_the_policy():
    """An empty conflating claim carries the flags, and the policy read agrees."""
    configure()
    empty = conflating()
    assert empty.messages == ()
    assert (empty.conflation, empty.conflation_conflict) == (True, False)
    request = queues.PopRequest(queue="q", group="g")
    assert queues.queue_conflation_policy(request=request) == queues.ConflationPolicy(True, True)
    unseen = queues.PopRequest(queue="q", group="new", conflation=True)
    assert queues.queue_conflation_policy(request=unseen) == queues.ConflationPolicy(True, False)
    assert queues.queue_conflation_policy(request=queues.PopRequest(queue="q")) == queues.ConflationPolicy(False, False)


def test_width_caps_the_partitions_claimed():
    """A conflating pop claims at most ``conflation_width`` partitions, one message each."""
    for name in "abcd":
        push(values=[1, 2], partition=name)
    c = conflating(conflation_width=3)
    assert len(c.messages) == 3
    assert len(c.partitions) == 3
    rest = conflating(conflation_width=3)
    assert len(rest.messages) == 1


def test_failed_ack_spends_the_partition_budget_then_dead_letters_the_newest():
    """Retries count per (partition, group); the DLQ gets the newest message and the cursor passes the rest."""
    configure(retryLimit=1)
    push(values=["x", "y"])
    first = conflating()
    assert [o.success for o in ack(first, "failed")] == [True]
    push(values=["z"])
    second = conflating()
    assert values(second) == [("Default", '"z"')]
    (outcome,) = ack(second, "failed")
    assert outcome.dlq is True
    assert list(DeadLetter.objects.values_list("payload", flat=True)) == ['"z"']
    assert queues.queue_stats(name="q", group="g").totals.pending == 0  # type: ignore[union-attr]


def test_expired_lease_redelivers_the_newest_with_the_next_attempt(time_machine):
    """An expired conflating lease hands out the (possibly new) newest; attempts count per message."""
    time_machine.move_to(T0, tick=False)
    configure(leaseTime=10)
    push(values=["a", "b"])
    assert [m.delivery_attempt for m in conflating().messages] == [1]
    time_machine.move_to(T0 + timedelta(seconds=11), tick=False)
    again = conflating()
    assert values(again) == [("Default", '"b"')]
    assert again.messages[0].delivery_attempt == 2
    time_machine.move_to(T0 + timedelta(seconds=22), tick=False)
    push(values=["c"])
    newer = conflating()
    assert values(newer) == [("Default", '"c"')]
    assert newer.messages[0].delivery_attempt == 1


def test_delayed_processing_delivers_the_newest_visible_message(time_machine):
    """Under delayedProcessing the newest message old enough is the one delivered."""
    time_machine.move_to(T0, tick=False)
    configure(delayedProcessing=5)
    push(values=["old"])
    time_machine.move_to(T0 + timedelta(seconds=3), tick=False)
    push(values=["young"])
    nothing = conflating()
    assert nothing.messages == ()
    assert nothing.retry_at == T0 + timedelta(seconds=5)
    time_machine.move_to(T0 + timedelta(seconds=6), tick=False)
    c = conflating()
    assert values(c) == [("Default", '"old"')]
    ack(c)
    time_machine.move_to(T0 + timedelta(seconds=9), tick=False)
    assert values(conflating()) == [("Default", '"young"')]


def test_window_buffer_holds_a_conflating_partition_until_it_is_quiet(time_machine):
    """Under windowBuffer a partition pushed to within the window delivers nothing, then its newest."""
    time_machine.move_to(T0, tick=False)
    configure(windowBuffer=10)
    push(values=["a", "b"])
    time_machine.move_to(T0 + timedelta(seconds=6), tick=False)
    push(values=["c"])
    held = conflating()
    assert held.messages == ()
    assert held.retry_at == T0 + timedelta(seconds=16)
    time_machine.move_to(T0 + timedelta(seconds=16), tick=False)
    assert values(conflating()) == [("Default", '"c"')]


def test_subscription_new_skips_history_then_keeps_newest_only():
    """``new``: history is skipped; what comes after is delivered newest-only."""
    push(values=["h1", "h2"])
    assert conflating(subscription_mode="new").messages == ()
    push(values=["n1", "n2", "n3"])
    assert values(conflating(subscription_mode="new")) == [("Default", '"n3"')]


def test_subscription_all_collapses_history_to_the_newest():
    """``all`` on first contact: the retained history collapses to one message."""
    push(values=["h1", "h2", "h3"])
    assert values(conflating(subscription_mode="all")) == [("Default", '"h3"')]


def test_auto_ack_pop_of_a_stored_conflating_group_commits_the_newest():
    """A pop sending autoAck to a group stored as conflating gets the newest, committed at once."""
    configure()
    conflating()
    push(values=[1, 2, 3])
    c = claim(group="g", auto_ack=True)
    assert values(c) == [("Default", "3")]
    assert c.lease_id == ""
    assert queues.queue_stats(name="q", group="g").totals.pending == 0  # type: ignore[union-attr]


# -- priority ---------------------------------------------------------------------


def test_priority_is_stored_and_range_checked():
    """An integer from -1000 to 1000 is stored; outside it is refused by name."""
    assert configure(priority=7).options["priority"] == 7
    assert configure(priority=-1000).options["priority"] == -1000
    for bad in (1001, -1001):
        with pytest.raises(InvalidArgument, match=r"option priority must be from -1000 to 1000"):
            configure(priority=bad)


@pytest.mark.parametrize("selector", [{"namespace": "ns"}, {"task": "work"}])
def test_namespace_and_task_pops_serve_higher_priority_queues_first(selector):
    """Candidate queues go by priority, highest first; an empty high queue falls through to the low one."""
    configure("low", namespace="ns", task="work", priority=1)
    configure("high", namespace="ns", task="work", priority=5)
    configure("mid", namespace="ns", task="work", priority=5)
    push("low", ["l"])
    push("mid", ["m"])
    push("high", ["h"])
    order = [claim(None, batch=10, **selector).queue for _ in range(3)]
    # "high" was made before "mid": equal priorities keep their id order.
    assert order == ["high", "mid", "low"]
    assert claim(None, **selector).messages == ()


def test_a_partition_whose_pending_messages_were_all_deleted_is_passed_over():
    """Deleted messages are neither delivered nor left pending: the group's cursor moves past them."""
    results = push(values=["a", "b"], partition="gone")
    push(values=["c"], partition="kept")
    gone = Partition.objects.get(name="gone").pk
    for r in results:
        queue_operator.queue_message_delete(partition_id=gone, transaction_id=r.transaction_id)
    c = conflating()
    assert values(c) == [("kept", '"c"')]
    ack(c)
    stats = queues.queue_stats(name="q", group="g")
    assert stats is not None
    assert stats.totals.pending == 0
    assert conflating().messages == ()


def test_deleting_the_group_with_its_metadata_lets_it_register_with_another_policy():
    """The stored policy goes with the registration; keeping the metadata keeps the policy."""
    push(values=[1, 2])
    conflating()
    groups.queue_group_delete(group="g", queue="q", delete_metadata=False)
    kept = claim(group="g", batch=1)
    assert (kept.conflation, kept.conflation_conflict) == (True, True)
    groups.queue_group_delete(group="g", queue="q", delete_metadata=True)
    plain = claim(group="g", batch=1)
    assert values(plain) == [("Default", "1")]
    assert (plain.conflation, plain.conflation_conflict) == (False, False)
