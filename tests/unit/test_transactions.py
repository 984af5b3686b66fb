"""``txn_commit`` in process: a ``locks.hold()`` lease as the guard, and all
or nothing: a part that refuses after the earlier parts applied leaves no
message, cursor, KV row, timer, queue or event behind."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
import time_machine

from queenadmin.domain import events, kv, locks, queues, timers
from queenadmin.domain.transactions import KVDone, Pushed, TimerDone, TxnBundle, TxnPosition, TxnPush, txn_commit
from queenadmin.errors import LockLost, TimersBadRequest
from queenadmin.models import (
    ConsumerCursor,
    ConsumerGroup,
    DeadLetter,
    KVEntry,
    Message,
    Partition,
    Queue,
    Timer,
)
from queenadmin.plumbing import db

T0 = datetime(2026, 10, 8, 10, 0, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


@pytest.fixture
def broadcasts() -> Iterator[list[tuple[str, dict[str, Any]]]]:
    """The events published (after commit) while the test runs."""
    seen: list[tuple[str, dict[str, Any]]] = []

    def listen(group: str, message: dict[str, Any]) -> None:
        seen.append((group, message))

    events.publisher.listeners.append(listen)
    try:
        yield seen
    finally:
        events.publisher.listeners.remove(listen)


def everything() -> dict[str, list[dict[str, Any]]]:
    """Every row a bundle can touch, in a comparable form."""
    models = (Queue, Partition, Message, ConsumerGroup, ConsumerCursor, DeadLetter, KVEntry, Timer)
    out = {}
    for model in models:
        rows = list(model.objects.order_by("pk").values())
        for row in rows:
            for name, value in row.items():
                if isinstance(value, memoryview):
                    row[name] = bytes(value)
        out[model.__name__] = rows
    return out


def push(queue: str, partition: str, *txns: str) -> None:
    queues.queue_push(items=[queues.PushItem(queue, partition, db.json_text(t), t) for t in txns])


def claim(queue: str, batch: int) -> queues.Claim:
    return queues.queue_claim(request=queues.PopRequest(queue=queue, batch=batch))


def ack(claim: queues.Claim, i: int, *, index: int, lease: str | None = "claim") -> queues.AckItem:
    m = claim.messages[i]
    lease_id = claim.lease_id if lease == "claim" else lease
    return queues.AckItem(index, m.transaction_id, str(m.partition_id), "completed", lease_id)


def put(ns: str, key: str, value: Any) -> kv.KVPut:
    return kv.KVPut(ns, key, db.json_text(value), None)


def remind(key: str, txn: str) -> timers.TimerSchedule:
    return timers.TimerSchedule("out", key, b'{"remind":1}', HOUR, txn, "c-1")


# -- the lock's lease as the guard ---------------------------------------------------


@pytest.mark.django_db
def test_a_held_lease_guards_the_commit_and_has_no_result_of_its_own():
    """With a ``hold()`` lease as the guard the bundle commits; the guard is
    not one of the results, so the bundle's own KV op keeps its index."""
    with locks.hold("nightly", ttl=30) as lease:
        outcome = txn_commit(
            bundle=TxnBundle(
                pushes=(TxnPush(0, queues.PushItem("reports", "Default", '{"day":1}', "report-1")),),
                kv=(put("state", "nightly", {"done": True}),),
            ),
            guard=lease,
        )
    assert (outcome.success, outcome.reason) == (True, None)
    pushed, written = outcome.results
    assert isinstance(pushed, Pushed)
    assert isinstance(written, KVDone)
    assert (pushed.index, written.index, written.op_index) == (0, 1, 0)
    assert kv.kv_get(namespace="state", key="nightly").value == {"done": True}
    assert Message.objects.filter(transaction_id="report-1").count() == 1


@pytest.mark.django_db
def test_a_guard_alone_is_a_valid_bundle():
    """A bundle of only the guard commits with no results."""
    with locks.hold("nightly", ttl=30) as lease:
        outcome = txn_commit(bundle=TxnBundle(), guard=lease)
    assert (outcome.success, outcome.results) == (True, ())


@pytest.mark.django_db(transaction=True)
def test_a_lease_lost_and_taken_over_rolls_back_with_kv_precondition(broadcasts):
    """Paused past its lifetime and replaced, the holder's guarded commit
    rolls back as ``kv_precondition`` naming the new holder; nothing of the
    bundle is visible; leaving the block reports the lock lost."""
    seen: dict[str, Any] = {}

    def paused_past_the_lease_and_replaced(traveller) -> None:
        with locks.hold("nightly", ttl=30) as lease:
            seen["token"] = lease.token
            traveller.shift(timedelta(seconds=31))
            seen["taken"] = locks.lock_acquire(name="nightly", ttl=timedelta(seconds=30), owner="worker-b")
            seen["before"] = everything()
            broadcasts.clear()
            seen["outcome"] = txn_commit(
                bundle=TxnBundle(
                    pushes=(TxnPush(0, queues.PushItem("reports", "Default", '{"day":1}', "report-1")),),
                    kv=(put("state", "nightly", {"done": True}),),
                    timers=(remind("nightly:check", "t-1"),),
                ),
                guard=lease,
            )
            seen["after"] = everything()
            seen["broadcasts"] = list(broadcasts)

    with time_machine.travel(T0, tick=False) as traveller:
        with pytest.raises(LockLost):
            paused_past_the_lease_and_replaced(traveller)
        taken, outcome = seen["taken"], seen["outcome"]
        assert taken.acquired
        assert taken.token > seen["token"]
        assert (outcome.success, outcome.reason, outcome.results) == (False, "kv_precondition", ())
        assert outcome.error == "QKV a required KV precondition failed; the transaction rolled back"
        failed = outcome.precondition
        assert (failed.kv_reason, failed.version, failed.value) == ("version", taken.token, {"owner": "worker-b"})
        # An in-process guard has no result index of its own.
        assert failed.failed_index == -1
        assert seen["after"] == seen["before"]
        assert seen["broadcasts"] == []
        # The new holder's guard holds.
        assert locks.lock_holders(name="nightly").holders[0].owner == "worker-b"
        committed = txn_commit(
            bundle=TxnBundle(kv=(put("state", "nightly", {"by": "b"}),)),
            guard=locks.guard_check(name="nightly", slot=0, token=taken.token),
        )
        assert committed.success
        assert broadcasts


# -- all or nothing --------------------------------------------------------------------


@dataclasses.dataclass
class Scene:
    claim: queues.Claim
    bundle: TxnBundle


def _scene() -> Scene:
    """Two inputs leased in one batch and a bundle that touches every part:
    the ack of the first input, two pushes, a KV put and incr, a reminder
    timer, and a position of another group on the input queue."""
    push("in", "p-1", "in-1", "in-2")
    push("out", "c-1", "old-1")
    got = claim("in", batch=2)
    assert len(got.messages) == 2
    bundle = TxnBundle(
        acks=(ack(got, 0, index=0),),
        pushes=(
            TxnPush(1, queues.PushItem("out", "c-1", '{"n":1}', "o-1")),
            TxnPush(2, queues.PushItem("fresh", "c-1", '{"n":2}', "o-2")),
        ),
        kv=(put("state", "c-1", {"step": 1}), kv.KVIncr("state", "count", Decimal(1), None)),
        timers=(remind("c-1:remind", "t-1"),),
        positions=(TxnPosition(6, "in", "audit", "p-1", 1),),
    )
    return Scene(got, bundle)


def _with(bundle: TxnBundle, **parts: Any) -> TxnBundle:
    return dataclasses.replace(bundle, **{k: (*getattr(bundle, k), *v) for k, v in parts.items()})


FAILURES = {
    # A second ack, fenced by a lease that is not the live one.
    "ack": lambda s: _with(s.bundle, acks=(ack(s.claim, 1, index=1, lease="01a22d8e-0000-7000-8000-000000000000"),)),
    # A push whose transactionId is already in its partition.
    "push": lambda s: _with(s.bundle, pushes=(TxnPush(3, queues.PushItem("out", "c-1", "3", "old-1")),)),
    # A position on a queue that does not exist.
    "position": lambda s: _with(s.bundle, positions=(TxnPosition(7, "ghost", "audit", "Default", 1),)),
    # A required check that does not hold.
    "kv": lambda s: _with(s.bundle, kv=(kv.KVCheck("state", "gate", 999, required=True),)),
}


def _renumber(bundle: TxnBundle) -> TxnBundle:
    """Give acks, pushes and positions their flat indexes (acks, pushes, KV,
    timers, positions)."""
    acks = tuple(dataclasses.replace(a, index=i) for i, a in enumerate(bundle.acks))
    pushes = tuple(TxnPush(len(acks) + i, p.item) for i, p in enumerate(bundle.pushes))
    base = len(acks) + len(pushes) + len(bundle.kv) + len(bundle.timers)
    positions = tuple(dataclasses.replace(p, index=base + i) for i, p in enumerate(bundle.positions))
    return dataclasses.replace(bundle, acks=acks, pushes=pushes, positions=positions)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("step", "reason"),
    [("ack", "rejected_ack"), ("push", "duplicate"), ("position", "queue_not_found"), ("kv", "kv_precondition")],
)
def test_a_part_that_refuses_rolls_back_every_part_before_it(broadcasts, step, reason):
    """The failing part comes after the earlier parts of the bundle (and the
    earlier items of its own part) were applied; the answer names it, and
    afterwards every table is as it was and no event went out. The same
    bundle without the failing item then commits."""
    scene = _scene()
    failing = _renumber(FAILURES[step](scene))
    before = everything()
    broadcasts.clear()
    outcome = txn_commit(bundle=failing)
    assert (outcome.success, outcome.reason, outcome.results) == (False, reason, ())
    assert everything() == before
    assert broadcasts == []
    if step == "kv":
        assert outcome.precondition is not None
        # Flat: one ack, two pushes, then KV op 2.
        assert (outcome.precondition.failed_index, outcome.precondition.kv_reason) == (5, "absent")

    committed = txn_commit(bundle=_renumber(scene.bundle))
    assert committed.success, committed.error
    _assert_applied(committed)
    assert broadcasts


@pytest.mark.django_db(transaction=True)
def test_a_timer_refused_after_everything_else_applied_rolls_back_everything(broadcasts):
    """A timer key repeated in the bundle is refused last (it raises: no
    transaction could apply it); the acks, pushes, positions and KV writes
    applied before it are rolled back and no event goes out."""
    scene = _scene()
    failing = _renumber(_with(scene.bundle, timers=(remind("c-1:remind", "t-2"),)))
    before = everything()
    broadcasts.clear()
    with pytest.raises(TimersBadRequest, match="more than once"):
        txn_commit(bundle=failing)
    assert everything() == before
    assert broadcasts == []
    committed = txn_commit(bundle=_renumber(scene.bundle))
    assert committed.success, committed.error
    _assert_applied(committed)


def _assert_applied(outcome) -> None:
    kinds = [type(r).__name__ for r in outcome.results]
    assert kinds == ["AckDone", "Pushed", "Pushed", "KVDone", "KVDone", "TimerDone", "PositionSet"]
    assert [r.index for r in outcome.results] == list(range(7))
    timer = outcome.results[5]
    assert isinstance(timer, TimerDone)
    assert timer.outcome.status == "scheduled"
    cursor = ConsumerCursor.objects.get(group=queues.QUEUE_MODE)
    # Offsets from 0: queue mode acked offset 0; "audit" reads offset 1 next.
    assert cursor.committed_offset == 0
    assert ConsumerCursor.objects.get(group="audit").committed_offset == 0
    assert sorted(
        Message.objects.filter(partition__queue__name__in=["out", "fresh"]).values_list("transaction_id", flat=True)
    ) == [
        "o-1",
        "o-2",
        "old-1",
    ]
    assert kv.kv_get(namespace="state", key="c-1").value == {"step": 1}
    assert kv.kv_get(namespace="state", key="count").value == 1
    assert Timer.objects.get().timer_key == "c-1:remind"


@pytest.mark.django_db(transaction=True)
def test_a_committed_bundle_sent_again_is_refused_by_its_fenced_ack(broadcasts):
    """Protocol 5.1, 5.4: a resent bundle is harmless because of what it
    carries. Its ack names the lease the first commit released, so it is
    ``rejected_ack`` and the KV increment beside it does not count twice."""
    push("in", "p-1", "in-1")
    got = claim("in", batch=1)
    bundle = TxnBundle(acks=(ack(got, 0, index=0),), kv=(kv.KVIncr("state", "processed", Decimal(1), None),))
    assert txn_commit(bundle=bundle).success
    before = everything()
    broadcasts.clear()
    again = txn_commit(bundle=bundle)
    assert (again.success, again.reason) == (False, "rejected_ack")
    assert everything() == before
    assert broadcasts == []
    assert kv.kv_get(namespace="state", key="processed").value == 1


@pytest.mark.django_db
def test_an_unfenced_reack_of_a_done_message_is_a_noop_and_the_bundle_commits():
    """Without a lease an ack of an already acked message is a no-op (protocol
    5.1), so the bundle applies."""
    push("in", "p-1", "in-1")
    got = claim("in", batch=1)
    assert txn_commit(bundle=TxnBundle(acks=(ack(got, 0, index=0),))).success
    again = txn_commit(bundle=TxnBundle(acks=(ack(got, 0, index=0, lease=None),), kv=(put("state", "k", 1),)))
    assert again.success
    assert kv.kv_get(namespace="state", key="k").value == 1


@pytest.mark.django_db
def test_the_same_transaction_id_twice_in_one_bundle_is_one_message():
    """The second item answers ``duplicate`` with the first one's message;
    only one message is in the log."""
    outcome = txn_commit(
        bundle=TxnBundle(
            pushes=(
                TxnPush(0, queues.PushItem("out", "c-1", "1", "same")),
                TxnPush(1, queues.PushItem("out", "c-1", "2", "same")),
            )
        )
    )
    assert outcome.success
    first, second = outcome.results
    assert isinstance(first, Pushed)
    assert isinstance(second, Pushed)
    assert (first.duplicate, second.duplicate, second.message_id) == (False, True, first.message_id)
    assert Message.objects.filter(transaction_id="same").count() == 1
