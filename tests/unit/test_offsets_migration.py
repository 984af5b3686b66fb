"""Migration 0019: stored offsets move from 1-based to 0-based, positions kept.

The test migrates the test database back to 0018, writes what the 1-based
code left behind (through the 0018 models: offsets from 1, "nothing done"
as 0), migrates forward and then carries on through the domain: the leased
batch is still acked by its lease, every group's next pop is exactly its
next unacked message (nothing redelivered, nothing skipped), counts and
lag are what they were, and the timer's dead letter keeps its -1.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from queenadmin.domain import queues
from queenadmin.domain.queues import board, leases, reads
from queenadmin.domain.queues.options import AUTO_CREATE_OPTIONS
from queenadmin.models import ConsumerCursor, DeadLetter, Message, Partition, Trace

BEFORE = ("queenadmin", "0018_ephemeral")
AFTER = ("queenadmin", "0019_offsets_from_zero")
T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
LEASE = "01a23c00-0000-7000-8000-00000000beef"


def _migrate(target: tuple[str, str]) -> Any:
    """Migrate the test database to ``target``; the models of that state."""
    executor = MigrationExecutor(connection)
    executor.migrate([target])
    return MigrationExecutor(connection).loader.project_state([target]).apps


def _leaf() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.fixture
def back_to_leaf():
    """Whatever happens, later tests find the database migrated to the end."""
    yield
    _leaf()


def _old_world(apps: Any) -> None:
    """What the 1-based code left: queue ``legacy`` with two partitions.

    ``p`` holds offsets 1..10 (transactionId ``p-<offset>``). Group
    ``billing`` acked 1..3, dead-lettered 4 and holds 5..7 under a live
    lease (5 and 6 delivered twice, 7 once); group ``audit`` has a cursor
    but has done nothing (committed 0). ``r`` lost 1..3 to retention (log
    start 4) and holds 4..6; ``billing`` acked 4 and 5 there, ``audit`` has
    no cursor. A timer out of attempts left a dead letter at -1, and a
    consumer traced message 5 of ``p``.
    """
    queue_model = apps.get_model("queenadmin", "Queue")
    partition_model = apps.get_model("queenadmin", "Partition")
    message_model = apps.get_model("queenadmin", "Message")
    group_model = apps.get_model("queenadmin", "ConsumerGroup")
    cursor_model = apps.get_model("queenadmin", "ConsumerCursor")
    dead_model = apps.get_model("queenadmin", "DeadLetter")
    trace_model = apps.get_model("queenadmin", "Trace")
    queue = queue_model.objects.create(name="legacy", options=dict(AUTO_CREATE_OPTIONS), created_at=T0)
    p = partition_model.objects.create(
        queue=queue, name="p", next_offset=11, log_start=1, retained_bytes=0, created_at=T0, last_push_at=T0
    )
    r = partition_model.objects.create(
        queue=queue, name="r", next_offset=7, log_start=4, retained_bytes=0, created_at=T0, last_push_at=T0
    )
    rows = [(p, o) for o in range(1, 11)] + [(r, o) for o in range(4, 7)]
    message_model.objects.bulk_create(
        message_model(
            partition=part,
            offset=o,
            transaction_id=f"{part.name}-{o}",
            message_id=f"01a23c00-0000-7000-8000-{part.id:04d}{o:08d}",
            payload=f'{{"n":{o}}}',
            created_at=T0,
        )
        for part, o in rows
    )
    for name in ("billing", "audit"):
        group_model.objects.create(queue=queue, name=name, subscription_mode="all", created_at=T0)
    cursor_model.objects.create(
        partition=p,
        group="billing",
        committed_offset=4,
        start_offset=0,
        lease_id=LEASE,
        leased_until=T0 + timedelta(minutes=10),
        batch_last=7,
        delivery_runs=[[5, 6, 2], [7, 7, 1]],
        dead_lettered=1,
        delivered=9,
        acked=3,
        failed=1,
        last_claim_at=T0,
    )
    cursor_model.objects.create(partition=p, group="audit", committed_offset=0, start_offset=0, batch_last=0)
    cursor_model.objects.create(
        partition=r, group="billing", committed_offset=5, start_offset=3, batch_last=5, acked=2, last_claim_at=T0
    )
    dead_model.objects.create(
        queue=queue,
        partition=p,
        group="billing",
        offset=4,
        transaction_id="p-4",
        message_id="01a23c00-0000-7000-8000-dead00000004",
        payload='{"n":4}',
        error="boom",
        retry_count=3,
        created_at=T0,
        failed_at=T0,
    )
    dead_model.objects.create(
        queue=queue,
        partition=p,
        group="__timer__",
        offset=-1,
        transaction_id="timer-1",
        message_id="01a23c00-0000-7000-8000-71e700000001",
        payload='{"t":1}',
        error="gave up",
        retry_count=5,
        created_at=T0,
        failed_at=T0,
    )
    trace_model.objects.create(
        trace_id="01a23c00-0000-7000-8000-7ace00000005",
        partition=p,
        transaction_id="p-5",
        offset=5,
        group="billing",
        event_type="info",
        data="{}",
        created_at=T0,
    )


def _stored() -> dict[str, Any]:
    """Every stored offset, by table, in a fixed order."""
    with connection.cursor() as cur:
        cur.execute("SELECT name, next_offset, log_start FROM queenadmin_partition ORDER BY name")
        partitions = cur.fetchall()
        cur.execute(
            "SELECT p.name, m.transaction_id, m.msg_offset FROM queenadmin_message m"
            " JOIN queenadmin_partition p ON p.id = m.partition_id ORDER BY p.name, m.msg_offset"
        )
        messages = cur.fetchall()
        cur.execute(
            "SELECT p.name, c.group_name, c.committed_offset, c.start_offset, c.batch_last"
            " FROM queenadmin_consumercursor c JOIN queenadmin_partition p ON p.id = c.partition_id"
            " ORDER BY p.name, c.group_name"
        )
        cursors = cur.fetchall()
        cur.execute("SELECT group_name, transaction_id, msg_offset FROM queenadmin_deadletter ORDER BY id")
        dead = cur.fetchall()
        cur.execute("SELECT transaction_id, msg_offset FROM queenadmin_trace ORDER BY id")
        traced = cur.fetchall()
    runs = {
        (c.partition.name, c.group): c.delivery_runs
        for c in ConsumerCursor.objects.select_related("partition").order_by("id")
    }
    return {
        "partitions": [tuple(r) for r in partitions],
        "messages": [tuple(r) for r in messages],
        "cursors": [tuple(r) for r in cursors],
        "dead": [tuple(r) for r in dead],
        "traces": [tuple(r) for r in traced],
        "runs": runs,
    }


def _pop(group: str, partition: str, batch: int = 20) -> queues.Claim:
    return queues.queue_claim(request=queues.PopRequest(queue="legacy", group=group, partition=partition, batch=batch))


def _ack(claim: queues.Claim, group: str) -> list[queues.AckOutcome]:
    return queues.queue_ack(
        items=[
            queues.AckItem(i, m.transaction_id, str(m.partition_id), "completed", claim.lease_id, None, group)
            for i, m in enumerate(claim.messages)
        ]
    )


def _counts() -> tuple[Any, ...]:
    """Each group's totals and the board's group lags: arithmetic on offsets."""
    stats = [queues.queue_stats(name="legacy", group=g) for g in ("billing", "audit")]
    qb = board.queue_board(name="legacy")
    assert qb is not None
    return tuple(s.totals for s in stats if s is not None), tuple((g.name, g.lag, g.in_flight) for g in qb.groups)


@pytest.mark.django_db(transaction=True)
def test_0019_renumbers_every_offset_and_keeps_every_position(back_to_leaf):
    with time_machine.travel(T0 + timedelta(minutes=1), tick=False):
        _old_world(_migrate(BEFORE))
        old = _stored()
        _migrate(AFTER)
        new = _stored()

        # Every offset one lower; the timer's -1 is no offset and stays.
        assert new["partitions"] == [("p", 10, 0), ("r", 6, 3)]
        assert new["messages"] == [(n, t, o - 1) for n, t, o in old["messages"]]
        assert new["messages"][0] == ("p", "p-1", 0)
        assert new["cursors"] == [
            ("p", "audit", -1, -1, -1),
            ("p", "billing", 3, -1, 6),
            ("r", "billing", 4, 2, 4),
        ]
        assert new["dead"] == [("billing", "p-4", 3), ("__timer__", "timer-1", -1)]
        assert new["traces"] == [("p-5", 4)]
        assert new["runs"] == {("p", "billing"): [[4, 5, 2], [6, 6, 1]], ("p", "audit"): [], ("r", "billing"): []}

        # Back to 0018 restores the 1-based numbers exactly; then forward again.
        _migrate(BEFORE)
        assert _stored() == old
        _leaf()
        assert _stored() == new
        # The domain runs on the latest schema only (0020 adds a column it
        # reads), so the board is read here, at the leaf, against what the
        # 1-based rows said: billing has p's 5..10 and r's 6 left (7), 5..7
        # in flight; audit everything stored (10 of p, r's 4..6 above its
        # log start).
        assert _counts()[1] == (("audit", 13, 0), ("billing", 7, 3))

        # Counts and lag are what the 1-based data said: billing has p's
        # 5..10 and r's 6 left (7), 5..7 of p in flight, 3 + 2 completed, 1
        # dead; audit has everything stored left (10 + 3).
        billing = queues.queue_stats(name="legacy", group="billing")
        audit = queues.queue_stats(name="legacy", group="audit")
        assert billing is not None
        assert audit is not None
        t = billing.totals
        assert (t.total, t.pending, t.processing, t.completed, t.dead_letter) == (13, 7, 3, 5, 1)
        assert audit.totals.pending == 13

        # The leased batch reads as before: offsets 4..6 (were 5..7), the
        # first two delivered twice.
        page = leases.lease_page(queue="legacy")
        assert page is not None
        (lease,) = page.leases
        assert (lease.partition, lease.first_offset, lease.last_offset) == ("p", 4, 6)
        assert (lease.attempts_min, lease.attempts_max) == (1, 2)

        # The lease still holds p for billing and its batch is ackable.
        assert _pop("billing", "p").messages == ()
        held = queues.queue_ack(
            items=[
                queues.AckItem(
                    i, f"p-{o}", str(Partition.objects.get(name="p").id), "completed", LEASE, None, "billing"
                )
                for i, o in enumerate((5, 6, 7))
            ]
        )
        assert [(o.success, o.noop) for o in held] == [(True, False)] * 3
        assert held[-1].lease_released

        # Next pops: exactly the next unacked message on, first delivery each.
        after = _pop("billing", "p")
        assert [(m.transaction_id, m.offset, m.delivery_attempt) for m in after.messages] == [
            ("p-8", 7, 1),
            ("p-9", 8, 1),
            ("p-10", 9, 1),
        ]
        assert all(o.success for o in _ack(after, "billing"))
        tail = _pop("billing", "r")
        assert [(m.transaction_id, m.offset) for m in tail.messages] == [("r-6", 5)]
        assert all(o.success for o in _ack(tail, "billing"))
        assert _pop("billing", "p").messages == ()
        assert _pop("billing", "r").messages == ()
        assert queues.queue_stats(name="legacy", group="billing").totals.pending == 0  # type: ignore[union-attr]

        # audit had done nothing: it starts at offset 0 of p and the log start of r.
        everything = _pop("audit", "p")
        assert [(m.transaction_id, m.offset) for m in everything.messages] == [(f"p-{o}", o - 1) for o in range(1, 11)]
        assert [m.offset for m in _pop("audit", "r").messages] == [3, 4, 5]

        # What the readers answer is 0-based too.
        (fetched,) = reads.queue_fetch(entries=[reads.FetchEntry("legacy", "p", 0, 100_000)], max_bytes=100_000)
        assert ([r.offset for r in fetched.records], fetched.high_watermark, fetched.log_start) == (
            list(range(10)),
            10,
            0,
        )
        changed = {c.name: c for c in reads.partitions_changed(query=reads.ChangedQuery(queue="legacy")).partitions}
        assert {n: (c.last_offset, c.log_start) for n, c in changed.items()} == {"p": (9, 0), "r": (5, 3)}
        assert DeadLetter.objects.get(group="__timer__").offset == queues.NEVER_LOGGED
        assert Trace.objects.get().offset == Message.objects.get(transaction_id="p-5").offset == 4

        # The (partition, offset) uniqueness the shift set aside is back.
        first = Message.objects.get(transaction_id="p-1")
        with pytest.raises(IntegrityError), transaction.atomic():
            Message.objects.create(
                partition_id=first.partition_id,
                offset=0,
                transaction_id="again",
                message_id="01a23c00-0000-7000-8000-000000000a9a",
                payload="{}",
                created_at=T0,
            )
