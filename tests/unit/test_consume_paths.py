"""A pop and an ack answer the same through either path.

On PostgreSQL, ``queue_claim`` of one queue claims each partition with one
statement (``Store.claim_one``) and ``queue_ack`` of ``completed`` acks is
one statement (``Store.ack_completed``); every other case, and every call
inside a transaction, takes the transactional path (``queue_claim_in_txn``,
``queue_ack_in_txn``). The same script of pushes, claims and acks runs on
two queues, once through the public calls outside any transaction and once
through the ``_in_txn`` forms inside one, and the answers and the cursor
rows left behind must be the same. On SQLite both are the transactional
path, so the test checks the script against itself.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.db import transaction

from queenadmin.domain import clock, queues
from queenadmin.domain.queues.store.postgres_consume import PostgresConsume
from queenadmin.models import ConsumerCursor
from queenadmin.plumbing.db import is_postgres, json_text

pytestmark = pytest.mark.django_db(transaction=True)

T0 = datetime(2026, 10, 8, 10, 0, 0, tzinfo=UTC)
GHOST_PARTITION = "999999999"


def _fast_claim(request: queues.PopRequest) -> queues.Claim:
    return queues.queue_claim(request=request)


def _slow_claim(request: queues.PopRequest) -> queues.Claim:
    with transaction.atomic():
        return queues.queue_claim_in_txn(request=request, now=clock.now())


def _fast_ack(items: list[queues.AckItem]) -> list[queues.AckOutcome]:
    return queues.queue_ack(items=items)


def _slow_ack(items: list[queues.AckItem]) -> list[queues.AckOutcome]:
    with transaction.atomic():
        return queues.queue_ack_in_txn(items=items, now=clock.now())


def _claim_shape(c: queues.Claim) -> tuple[Any, ...]:
    messages = [(m.partition, m.offset, m.delivery_attempt, m.transaction_id, m.payload_json) for m in c.messages]
    names = tuple(name for _, name in c.partitions)
    return (c.queue is not None, c.group, names, messages, bool(c.lease_id), c.retry_at, c.conflation)


def _ack_shape(outcomes: list[queues.AckOutcome]) -> list[tuple[Any, ...]]:
    return [(o.index, o.transaction_id, o.success, o.error, o.lease_released, o.dlq, o.noop) for o in outcomes]


def _items(
    c: queues.Claim,
    pick: slice = slice(None),
    *,
    lease: str | None = "own",
    txn: str | None = None,
    partition: str | None = None,
) -> list[queues.AckItem]:
    return [
        queues.AckItem(
            i,
            txn or m.transaction_id,
            partition or str(m.partition_id),
            "completed",
            c.lease_id if lease == "own" else lease,
            None,
            c.group,
        )
        for i, m in enumerate(c.messages[pick])
    ]


def _script(
    queue: str,
    claim: Callable[[queues.PopRequest], queues.Claim],
    ack: Callable[[list[queues.AckItem]], list[queues.AckOutcome]],
) -> Iterator[Any]:
    def pop(**kw: Any) -> queues.Claim:
        return claim(queues.PopRequest(queue=queue, **kw))

    with time_machine.travel(T0, tick=False) as traveller:
        queues.queue_push(
            items=[
                queues.PushItem(queue, f"p{p}", json_text({"p": p, "i": i}), f"p{p}-{i}")
                for i in range(3)
                for p in range(4)
            ]
        )
        first = pop(batch=1, max_partitions=4)  # makes the cursors
        yield _claim_shape(first)
        yield _ack_shape(ack(_items(first)))
        traveller.shift(timedelta(seconds=1))
        single = pop(batch=1, max_partitions=4)
        yield _claim_shape(single)
        yield _ack_shape(ack(_items(single)))
        yield _ack_shape(ack(_items(single)))  # again: a no-op
        traveller.shift(timedelta(seconds=1))
        wide = pop(batch=5, max_partitions=3)  # more than one partition
        yield _claim_shape(wide)
        yield _ack_shape(ack(_items(wide, slice(1, 2))))  # inside the batch: the lease stays
        yield _ack_shape(ack(_items(wide, slice(2, 3), lease=queues.uuid7())))
        yield _ack_shape(ack(_items(wide, slice(0, 1), txn="nobody")))
        yield _ack_shape(ack(_items(wide, slice(0, 1), partition=GHOST_PARTITION)))
        yield _ack_shape(ack(_items(wide)))  # some done already, some not
        traveller.shift(timedelta(seconds=1))
        short = pop(batch=2, lease_seconds=5)
        yield _claim_shape(short)
        yield _claim_shape(pop(batch=50, max_partitions=4))
        yield _claim_shape(pop(batch=50, max_partitions=4))  # everything leased
        traveller.shift(timedelta(seconds=6))
        yield _ack_shape(ack(_items(short)))  # the lease expired
        again = pop(batch=3)  # a redelivery
        yield _claim_shape(again)
        yield _ack_shape(ack(_items(again, lease=None)))
        queues.queue_push(items=[queues.PushItem(queue, "p1", json_text({"late": i}), f"late-{i}") for i in range(3)])
        yield _claim_shape(pop(partition="p1", batch=10, auto_ack=True))
        yield _claim_shape(pop(partition="p1", batch=10))
        queues.queue_push(items=[queues.PushItem(queue, "p2", json_text({"g": i}), f"g-{i}") for i in range(4)])
        yield _claim_shape(pop(group="g", batch=2))  # registers the group
        named = pop(group="g", batch=2, lease_seconds=30)
        yield _claim_shape(named)
        yield _ack_shape(ack(_items(named) + _items(named)))  # twice in one call
        other = queues.Claim(queue, "", "other", named.partitions, named.messages)
        yield _ack_shape(ack(_items(other, lease=None)))  # a group without a cursor there
        yield _claim_shape(claim(queues.PopRequest(queue="ghost")))
    rows = ConsumerCursor.objects.filter(partition__queue__name=queue).order_by("partition__name", "group")
    for row in rows:
        yield (
            row.partition.name,
            row.group,
            row.committed_offset,
            row.start_offset,
            row.lease_id is not None,
            row.leased_until,
            row.batch_last,
            row.delivery_runs,
            row.retry_count,
            row.dead_lettered,
            row.delivered,
            row.acked,
            row.failed,
            row.last_claim_at,
        )


@pytest.fixture
def one_statement(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """What the one-statement forms answered, by outcome."""
    seen: Counter[str] = Counter()
    claim_one, ack_completed = PostgresConsume.claim_one, PostgresConsume.ack_completed

    def counted_claim(self: PostgresConsume, **kw: Any) -> Any:
        one = claim_one(self, **kw)
        seen[f"claim {one.outcome if one else None}"] += 1
        return one

    def counted_ack(self: PostgresConsume, **kw: Any) -> Any:
        done = ack_completed(self, **kw)
        seen[f"ack {'general' if done is None else 'applied'}"] += 1
        return done

    monkeypatch.setattr(PostgresConsume, "claim_one", counted_claim)
    monkeypatch.setattr(PostgresConsume, "ack_completed", counted_ack)
    return seen


def test_pops_and_acks_answer_the_same_through_either_path(one_statement):
    """Every claim and ack of the script, and the cursors it leaves, match."""
    slow = list(_script("slow", _slow_claim, _slow_ack))
    assert one_statement == Counter()
    fast = list(_script("fast", _fast_claim, _fast_ack))
    for step, (got, want) in enumerate(zip(fast, slow, strict=True)):
        assert got == want, f"step {step}: {got} != {want}"
    if is_postgres():
        # The transactional path: the first pop (it makes the cursors), the
        # redelivery and the named group's first pop (it registers).
        assert one_statement == Counter(
            {"ack applied": 11, "ack general": 1, "claim claimed": 7, "claim empty": 4, "claim general": 4}
        )


def test_a_pop_or_ack_inside_a_transaction_refuses_to_nest():
    """The public calls stay outermost, whichever path would answer."""
    queues.queue_push(items=[queues.PushItem("q", "p", "1")])
    with pytest.raises(RuntimeError, match="durable"), transaction.atomic():
        queues.queue_claim(request=queues.PopRequest(queue="q"))
    item = queues.AckItem(0, "t", "1", "completed")
    with pytest.raises(RuntimeError, match="durable"), transaction.atomic():
        queues.queue_ack(items=[item])
