"""What a push costs in statements, and pushes across a queue's delete and re-create.

The count is taken below Django: on PostgreSQL hot statements run on a
psycopg cursor of their own (``db.server_cursor``), which Django's
``CaptureQueriesContext`` does not see, so psycopg's ``Cursor.execute`` and
``executemany`` are counted; on SQLite every statement goes through Django's
cursor. BEGIN and COMMIT are not counted (neither layer sends them through
``execute``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from queenadmin.domain import clock, queues
from queenadmin.models import Message, Queue
from queenadmin.plumbing import db

pytestmark = pytest.mark.django_db

#: Statements of a push of one message to a queue and partition that exist,
#: besides BEGIN and COMMIT. PostgreSQL: queue and partition found and
#: locked; dedup, write and NOTIFY (it was 7 before issue 15). SQLite: the
#: lookup, dedup, partition update and insert (it was 7).
PG_SINGLE_PUSH = 2
SQLITE_SINGLE_PUSH = 4


@contextmanager
def counted() -> Iterator[list[str]]:
    """The SQL of every statement run inside the block, in order."""
    seen: list[str] = []
    if db.is_postgres():
        import psycopg

        execute = psycopg.Cursor.execute
        executemany = psycopg.Cursor.executemany

        def counting(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            seen.append(str(query))
            return execute(self, query, *args, **kwargs)

        def counting_many(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            seen.append(str(query))
            return executemany(self, query, *args, **kwargs)

        psycopg.Cursor.execute = counting  # type: ignore[method-assign]
        psycopg.Cursor.executemany = counting_many  # type: ignore[method-assign]
        try:
            yield seen
        finally:
            psycopg.Cursor.execute = execute  # type: ignore[method-assign]
            psycopg.Cursor.executemany = executemany  # type: ignore[method-assign]
    else:
        with CaptureQueriesContext(connection) as captured:
            yield seen
        seen.extend(q["sql"] for q in captured.captured_queries)
    # The test's own transaction makes queue_push's durable block a savepoint.
    seen[:] = [sql for sql in seen if "SAVEPOINT" not in sql]


def push_one(queue: str = "q", txn: str | None = "t-1", partition: str = "p") -> queues.PushResult:
    [result] = queues.queue_push(items=[queues.PushItem(queue, partition, db.json_text({"n": 1}), txn)])
    return result


@pytest.mark.parametrize("txn", ["t-2", None])
def test_a_push_of_one_message_to_a_known_partition_costs_few_statements(txn: str | None) -> None:
    push_one(txn="t-1")
    with counted() as seen:
        result = push_one(txn=txn)
    # A savepoint in this test, BEGIN/COMMIT in production: not counted.
    assert result.status == "queued"
    assert result.offset == 1
    wanted = PG_SINGLE_PUSH if db.is_postgres() else SQLITE_SINGLE_PUSH
    assert len(seen) <= wanted, "\n".join(seen)


def test_a_duplicate_of_one_message_answers_the_original_in_as_few_statements() -> None:
    first = push_one(txn="t-1")
    with counted() as seen:
        again = push_one(txn="t-1")
    assert (again.status, again.message_id, again.offset) == ("duplicate", first.message_id, first.offset)
    assert len(seen) <= (PG_SINGLE_PUSH if db.is_postgres() else SQLITE_SINGLE_PUSH)
    assert Message.objects.count() == 1


def _elsewhere(step: str) -> str | None:
    """In another process: change queue ``q`` behind the test's back."""
    from queenadmin.domain import queues
    from queenadmin.plumbing import db

    if step == "recreate":
        assert queues.queue_delete(name="q")
        [result] = queues.queue_push(items=[queues.PushItem("q", "p", db.json_text({"n": 2}), "t-1")])
        return result.message_id
    options = {"dedup-off": {"dedupWindowSeconds": 0}, "cap": {"maxSize": 2}}[step]
    request = queues.ConfigureRequest("q", options=queues.QueueOptions(tuple(options.items())))
    queues.queue_configure(request=request)
    return None


def test_pushes_follow_a_queue_deleted_created_anew_and_configured_by_another_process(spawn) -> None:
    """Nothing of a queue is kept between pushes: the ids and options of the
    queue and partition are read in the push's own statement each time."""
    push_one(txn="t-1")
    old_id = Queue.objects.get(name="q").pk

    [their_id] = spawn(_elsewhere, [("recreate",)])
    assert Queue.objects.get(name="q").pk != old_id
    again = push_one(txn="t-1")
    assert (again.status, again.message_id, again.offset) == ("duplicate", their_id, 0)

    spawn(_elsewhere, [("dedup-off",)])
    fresh = push_one(txn="t-1")
    assert (fresh.status, fresh.offset) == ("queued", 1)

    spawn(_elsewhere, [("cap",)])
    refused = push_one(txn="t-3")
    assert refused.status == "failed"
    assert "max capacity" in (refused.error or "")
    assert Message.objects.filter(partition__queue__name="q").count() == 2


#: Statements of a push of many messages to partitions that exist, besides
#: BEGIN and COMMIT. PostgreSQL: queues and partitions found and locked; the
#: dedup read; partitions, messages and NOTIFY in one (it was 5: partitions,
#: messages and NOTIFY each a statement). SQLite: the lookup, dedup,
#: partition updates and inserts.
PG_BATCH_PUSH = 3
SQLITE_BATCH_PUSH = 4


def test_a_push_of_many_messages_to_known_partitions_costs_few_statements() -> None:
    push_one(partition="p1", txn="first-1")
    push_one(partition="p2", txn="first-2")
    items = [queues.PushItem("q", f"p{1 + n % 2}", db.json_text({"n": n}), f"t-{n}") for n in range(50)]
    items.append(queues.PushItem("q", "p1", db.json_text({"n": 0}), "first-1"))
    with counted() as seen:
        results = queues.queue_push(items=items)
    assert len(seen) <= (PG_BATCH_PUSH if db.is_postgres() else SQLITE_BATCH_PUSH), "\n".join(seen)
    assert [r.offset for r in results if r.queue == "q" and r.status == "queued"][:4] == [1, 1, 2, 2]
    assert results[-1].status == "duplicate"
    assert results[-1].offset == 0
    assert Message.objects.count() == 52


#: Statements of a batch push whose transactionIds are new: the lookup, then
#: the dedup read guarding the write, in one (it was 3: the read on its own).
PG_NEW_BATCH_PUSH = 2


def test_a_push_of_many_new_messages_is_one_statement_after_the_lookup() -> None:
    push_one(partition="p1", txn="first-1")
    push_one(partition="p2", txn="first-2")
    items = [queues.PushItem("q", f"p{1 + n % 2}", db.json_text({"n": n}), f"t-{n}") for n in range(50)]
    items.append(queues.PushItem("q", "p1", db.json_text({"n": 0}), "t-0"))
    with counted() as seen:
        results = queues.queue_push(items=items)
    assert len(seen) <= (PG_NEW_BATCH_PUSH if db.is_postgres() else SQLITE_BATCH_PUSH), "\n".join(seen)
    assert [(r.status, r.offset) for r in results[:4]] == [("queued", 1), ("queued", 1), ("queued", 2), ("queued", 2)]
    # Earlier in the same call: the original's answer.
    assert (results[-1].status, results[-1].message_id) == ("duplicate", results[0].message_id)
    assert Message.objects.count() == 52
    assert sorted(Message.objects.filter(partition__name="p1").values_list("offset", flat=True)) == list(range(26))


def test_a_transaction_id_past_its_own_queues_window_is_pushed_again_beside_a_longer_window() -> None:
    """The dedup read of a push to two queues reads back to the longer window; a
    message only the shorter window has forgotten is no duplicate."""
    from datetime import timedelta

    import time_machine

    from queenadmin.domain import clock

    start = clock.now()
    with time_machine.travel(start, tick=False) as traveller:
        queues.queue_configure(
            request=queues.ConfigureRequest("short", options=queues.QueueOptions((("dedupWindowSeconds", 60),)))
        )
        queues.queue_configure(
            request=queues.ConfigureRequest("long", options=queues.QueueOptions((("dedupWindowSeconds", 3600),)))
        )
        push_one("short", txn="a")
        push_one("long", txn="b")
        traveller.shift(timedelta(seconds=120))
        items = [
            queues.PushItem("short", "p", db.json_text({"n": 2}), "a"),
            queues.PushItem("long", "p", db.json_text({"n": 2}), "b"),
            queues.PushItem("long", "p", db.json_text({"n": 3}), "c"),
        ]
        results = queues.queue_push(items=items)
    assert [(r.status, r.offset) for r in results] == [("queued", 1), ("duplicate", 0), ("queued", 1)]
    assert Message.objects.filter(partition__queue__name="short").count() == 2
    assert Message.objects.filter(partition__queue__name="long").count() == 2


def _partition_of_20000_messages() -> int:
    """A partition holding 20,000 pushed messages (``x-1`` to ``x-20000``),
    analyzed, on PostgreSQL (the plans are its planner's)."""
    if not db.is_postgres():
        pytest.skip("PostgreSQL's planner")
    from queenadmin.models import Partition

    push_one(txn="seed")
    pid = Partition.objects.get(queue__name="q", name="p").pk
    with connection.cursor() as cur:
        cur.execute(
            "INSERT INTO queenadmin_message"
            " (partition_id, msg_offset, transaction_id, message_id, payload, created_at)"
            " SELECT %s, g, 'x-' || g, 'm-' || g, '{}', now() FROM generate_series(1, 20000) AS g",
            [pid],
        )
        cur.execute("ANALYZE queenadmin_message")
    return int(pid)


def _plan_nodes(sql: str, params: list[Any]) -> list[dict[str, Any]]:
    """Every node of the plan of ``sql``."""
    with connection.wrap_database_errors, db.server_cursor() as cur:
        cur.execute("EXPLAIN (FORMAT JSON) " + sql, params, binary=True)
        [(plan,)] = cur.fetchall()
    plan = plan if not isinstance(plan, str) else json.loads(plan)

    def nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
        yield node
        for child in node.get("Plans", ()):
            yield from nodes(child)

    return list(nodes(plan[0]["Plan"]))


def test_the_dedup_read_of_a_large_push_probes_the_index_and_reads_no_table() -> None:
    """1,000 pairs against a partition of 20,000 messages: one index probe per
    pair, never a scan of the messages (a plain join was planned as a merge
    join over a sort of every recent message, 75-110 ms at 100,000 rows)."""
    from queenadmin.domain.queues.store.postgres import RECENT

    pid = _partition_of_20000_messages()
    pairs = [(pid, f"x-{n}") for n in range(0, 2000, 2)]
    every = _plan_nodes(RECENT, [[p for p, _ in pairs], [t for _, t in pairs], clock.now() - timedelta(hours=1)])
    assert not [n for n in every if n["Node Type"] == "Seq Scan"], every
    assert any(n.get("Index Name") == "message_partition_txn_idx" for n in every), every


def test_the_dedup_read_guarding_a_large_write_probes_the_index_and_reads_no_table() -> None:
    """The same for the read inside the write (``write_new_messages``)."""
    from queenadmin.domain.queues.store.postgres import _write_statement

    pid = _partition_of_20000_messages()
    now = clock.now()
    rows = [(pid, 30000 + n, f"x-{2 * n}", f"new-{n}", "{}", None, None) for n in range(1000)]
    probe = [(pid, f"x-{2 * n}") for n in range(1000)]
    every = _plan_nodes(*_write_statement(rows, {pid: (31000, 2000)}, now, ["q"], probe, now - timedelta(hours=1)))
    # The read: the message table by its index, never whole. (The write's
    # update of the partition rows may scan a table of a few test rows.)
    scanned = {n.get("Relation Name") for n in every if n["Node Type"] == "Seq Scan"}
    assert "queenadmin_message" not in scanned, every
    assert any(n.get("Index Name") == "message_partition_txn_idx" for n in every), every


def test_the_message_table_keeps_no_index_on_the_partition_alone() -> None:
    """Each index is one more entry per pushed message; the (partition, offset)
    constraint's index already leads with the partition."""
    with connection.cursor() as cur:
        constraints = connection.introspection.get_constraints(cur, "queenadmin_message")
    indexed = [c["columns"] for c in constraints.values() if c["index"] or c["unique"]]
    assert ["partition_id"] not in indexed, indexed
    assert ["partition_id", "msg_offset"] in indexed, indexed
