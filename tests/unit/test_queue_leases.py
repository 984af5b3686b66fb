"""The operator's reads of message leases and of one message's delivery state."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine

from queenadmin.domain import queues
from queenadmin.domain.audit import Who
from queenadmin.domain.masking import mask_token
from queenadmin.domain.queues import board, leases, traces
from queenadmin.domain.queues import operator as queue_operator
from queenadmin.models import DeadLetter, Message
from queenadmin.plumbing.db import json_text

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 10, 8, 10, 0, 0, tzinfo=UTC)


def push(queue: str, n: int, partition: str = "p", payload: Any = None) -> list[queues.PushResult]:
    return queues.queue_push(
        items=[queues.PushItem(queue, partition, json_text(payload or {"i": i})) for i in range(n)]
    )


def claim(queue: str, group: str, n: int, partition: str | None = None, lease_seconds: int = 60) -> queues.Claim:
    return queues.queue_claim(
        request=queues.PopRequest(queue=queue, partition=partition, group=group, batch=n, lease_seconds=lease_seconds)
    )


def ack(c: queues.Claim, status: str = "completed", error: str | None = None) -> None:
    queues.queue_ack(
        items=[
            queues.AckItem(i, m.transaction_id, str(m.partition_id), status, c.lease_id, error, c.group)  # type: ignore[arg-type]
            for i, m in enumerate(c.messages)
        ]
    )


def configure(name: str, **options: Any) -> None:
    request = queues.ConfigureRequest(name, options=queues.QueueOptions(tuple(options.items())))
    queues.queue_configure(request=request)


# -- leases ------------------------------------------------------------------


def test_a_lease_shows_its_group_partition_masked_holder_batch_and_time_left():
    """Each live lease is a row: the holder is the lease id's fingerprint, never the id."""
    with time_machine.travel(T0, tick=False):
        pushed = push("orders", 5)
        c = claim("orders", "fulfillment", 3, lease_seconds=120)
        page = leases.lease_page(queue="orders")
    assert page is not None
    (lease,) = page.leases
    assert (lease.group, lease.partition, lease.first_offset, lease.last_offset, lease.messages) == (
        "fulfillment",
        "p",
        0,
        2,
        3,
    )
    assert lease.holder_fp == mask_token(c.lease_id)
    assert lease.first_message_id == pushed[0].message_id
    assert c.lease_id not in repr(page)
    assert lease.leased_until == T0 + timedelta(seconds=120)
    assert lease.claimed_at == T0
    assert (lease.attempts_min, lease.attempts_max, lease.retries) == (1, 1, 0)
    assert page.groups == ("fulfillment",)
    assert page.next_after is None


def test_a_redelivered_batch_counts_attempts_and_retries():
    """After a failed ack and a lapsed lease the batch's attempts read as fewest to most."""
    configure("orders", retryLimit=5)
    with time_machine.travel(T0, tick=False) as traveller:
        push("orders", 3)
        ack(claim("orders", "billing", 1), "failed")
        claim("orders", "billing", 2, lease_seconds=10)
        traveller.shift(timedelta(seconds=11))
        claim("orders", "billing", 3)
        (lease,) = leases.lease_page(queue="orders").leases  # type: ignore[union-attr]
    # Offset 0: failed once, lapsed once, now the third time; 1: lapsed once; 2: first time.
    assert (lease.first_offset, lease.last_offset) == (0, 2)
    assert (lease.attempts_min, lease.attempts_max, lease.retries) == (1, 3, 1)


def test_expired_and_acked_leases_are_not_listed():
    with time_machine.travel(T0, tick=False) as traveller:
        push("orders", 4)
        claim("orders", "a", 1, lease_seconds=10)
        ack(claim("orders", "b", 1))
        traveller.shift(timedelta(seconds=10))
        page = leases.lease_page(queue="orders")
    assert page is not None
    assert page.leases == ()
    assert page.groups == ("a", "b")


def test_leases_page_by_cursor_id_and_filter_by_group():
    """Keyset pages of ``limit`` leases; ``group`` keeps one group's."""
    with time_machine.travel(T0, tick=False):
        for part in ("p1", "p2", "p3"):
            push("orders", 2, partition=part)
            for group in ("a", "b"):
                claim("orders", group, 1, partition=part)
        first = leases.lease_page(queue="orders", limit=4)
        assert first is not None
        assert len(first.leases) == 4
        assert first.next_after == first.leases[-1].id
        second = leases.lease_page(queue="orders", after=first.next_after, limit=4)
        only_b = leases.lease_page(queue="orders", group="b")
    assert second is not None
    assert len(second.leases) == 2
    assert second.next_after is None
    ids = [lease.id for lease in first.leases + second.leases]
    assert ids == sorted(set(ids))
    assert only_b is not None
    assert sorted((x.group, x.partition) for x in only_b.leases) == [("b", "p1"), ("b", "p2"), ("b", "p3")]


def test_leases_of_an_unknown_queue_are_none():
    assert leases.lease_page(queue="nosuchqueue") is None


# -- one message ---------------------------------------------------------------


def test_each_group_has_its_own_state_for_one_message():
    """Two groups in different states, and a third that gave up: consumed,
    leased (masked holder, until when), in the DLQ with its history."""
    configure("orders", retryLimit=0)
    with time_machine.travel(T0, tick=False):
        (pushed,) = push("orders", 1, payload={"order": 7, "items": [1, 2]})
        ack(claim("orders", "billing", 1))
        held = claim("orders", "fulfillment", 1, lease_seconds=300)
        ack(claim("orders", "analytics", 1), "failed", error="smtp 550")
        found = leases.message_delivery(queue="orders", message_id=pushed.message_id)
    assert found is not None
    states = {g.group: g for g in found.groups}
    assert sorted(states) == ["analytics", "billing", "fulfillment"]
    assert states["billing"].state == "consumed"
    leased = states["fulfillment"]
    assert (leased.state, leased.attempts, leased.leased_until) == ("leased", 1, T0 + timedelta(seconds=300))
    assert leased.holder_fp == mask_token(held.lease_id)
    assert held.lease_id not in repr(found)
    assert states["analytics"].state == "dead_letter"
    (dead,) = found.dead_letters
    assert (dead.group, dead.error, dead.failed_at) == ("analytics", "smtp 550", T0)
    assert json.loads(found.payload) == {"order": 7, "items": [1, 2]}
    assert found.payload.startswith("{\n  ")
    assert not found.payload_cut
    assert (found.queue, found.partition, found.offset, found.transaction_id) == (
        "orders",
        "p",
        0,
        pushed.transaction_id,
    )


def test_a_lapsed_lease_leaves_the_message_pending_with_its_attempts():
    with time_machine.travel(T0, tick=False) as traveller:
        (pushed,) = push("orders", 1)
        claim("orders", "billing", 1, lease_seconds=10)
        traveller.shift(timedelta(seconds=11))
        found = leases.message_delivery(queue="orders", message_id=pushed.message_id)
    assert found is not None
    (billing,) = found.groups
    assert (billing.state, billing.attempts, billing.holder_fp) == ("pending", 1, None)


def test_a_queue_without_groups_shows_queue_mode_and_a_group_that_never_read():
    configure("orders", delayedProcessing=60)
    with time_machine.travel(T0, tick=False) as traveller:
        (pushed,) = push("orders", 1)
        found = leases.message_delivery(queue="orders", message_id=pushed.message_id)
        assert found is not None
        (mode,) = found.groups
        assert (mode.is_queue_mode, mode.state, mode.unread) == (True, "parked", True)
        assert mode.parked_until == T0 + timedelta(seconds=60)
        traveller.shift(timedelta(seconds=61))
        found = leases.message_delivery(queue="orders", message_id=pushed.message_id)
    assert found is not None
    assert found.groups[0].state == "pending"


def test_a_long_payload_is_cut_and_says_how_long_it_is(monkeypatch):
    monkeypatch.setattr(leases, "PAYLOAD_CAP", 50)
    (pushed,) = push("orders", 1, payload={"pad": "x" * 200})
    found = leases.message_delivery(queue="orders", message_id=pushed.message_id)
    assert found is not None
    assert found.payload_cut
    assert found.payload == '{"pad":"' + "x" * 42
    assert found.payload_chars == len(Message.objects.get().payload)


def test_traces_of_the_message_are_listed_oldest_first():
    (pushed,) = push("orders", 1)
    pid = Message.objects.get().partition_id
    for event in ("received", "charged"):
        traces.trace_record(
            partition_id=pid,
            transaction_id=pushed.transaction_id,
            group="billing",
            event_type=event,
            data_json='{"ok":true}',
            names=["order-7"],
        )
    found = leases.message_delivery(queue="orders", message_id=pushed.message_id)
    assert found is not None
    assert [(t.event_type, t.names) for t in found.traces] == [("received", ("order-7",)), ("charged", ("order-7",))]
    assert not found.traces_cut


@pytest.mark.parametrize("message_id", ["nosuch", "", "x" * 500, "0190\x00"])
def test_an_unknown_or_malformed_message_id_is_none(message_id):
    push("orders", 1)
    assert leases.message_delivery(queue="orders", message_id=message_id) is None


def test_a_message_of_another_queue_is_not_found_under_this_one():
    (pushed,) = push("orders", 1)
    push("mail", 1)
    assert leases.message_delivery(queue="mail", message_id=pushed.message_id) is None


def test_a_replay_for_the_failed_group_is_skipped_by_the_others():
    """A DLQ replay's copy names the dead letter it came from; groups it was
    not meant for pass over it."""
    configure("orders", retryLimit=0)
    push("orders", 1)
    ack(claim("orders", "billing", 1))
    ack(claim("orders", "analytics", 1), "failed")
    (dead_id,) = DeadLetter.objects.values_list("id", flat=True)
    result = queue_operator.queue_dlq_action(
        verb="replay", selection=board.DeadLetterFilter(queue="orders"), who=Who("ann")
    )
    (copy_id,) = result.message_ids
    found = leases.message_delivery(queue="orders", message_id=copy_id)
    assert found is not None
    assert (found.replay_of, found.for_group) == (dead_id, "analytics")
    states = {g.group: g.state for g in found.groups}
    assert states == {"analytics": "pending", "billing": "skipped"}
    # The original keeps no dead letter once replayed; its groups are done with it.
    original = Message.objects.order_by("offset").values_list("message_id", flat=True).first()
    before = leases.message_delivery(queue="orders", message_id=original)
    assert before is not None
    assert before.replay_of is None
    assert {g.group: g.state for g in before.groups} == {"analytics": "consumed", "billing": "consumed"}


def test_a_nul_in_a_queue_or_group_name_matches_nothing():
    """No stored name holds a NUL (PostgreSQL refuses one), so it finds nothing instead of failing."""
    push("orders", 1)
    claim("orders", "billing", 1)
    assert leases.lease_page(queue="ord\x00ers") is None
    page = leases.lease_page(queue="orders", group="bill\x00ing")
    assert page is not None
    assert page.leases == ()
