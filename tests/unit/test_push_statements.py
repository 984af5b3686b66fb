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
from tests.threads import in_thread

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


# --------------------------------------------------------------------------
# A lone push outside any transaction (``push_one_committed``)


def _one_statement_pushes() -> None:
    from queenadmin.domain.queues.store import store

    if not store().pushes_one_committed:
        pytest.skip("this store pushes a lone message in a transaction")


@contextmanager
def atomics_entered() -> Iterator[list[bool]]:
    """One entry per ``transaction.atomic`` block entered inside the block."""
    from django.db.transaction import Atomic

    entered: list[bool] = []
    enter = Atomic.__enter__

    def counting(self: Any) -> Any:
        entered.append(True)
        return enter(self)

    Atomic.__enter__ = counting  # type: ignore[method-assign]
    try:
        yield entered
    finally:
        Atomic.__enter__ = enter  # type: ignore[method-assign]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("txn", ["t-2", None])
def test_a_lone_push_of_one_message_is_one_statement_and_no_transaction(
    txn: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outside any transaction, a push of one message to a queue and
    partition that exist is one statement, committed by itself: no atomic
    block, no on-commit hook; this process's pops are woken and the
    dashboards told once, after it returned."""
    from django.db import transaction

    from queenadmin.domain import events
    from queenadmin.domain.queues import wakeups

    _one_statement_pushes()
    first = push_one(txn="t-1")
    woken: list[list[str]] = []
    monkeypatch.setattr(wakeups.hub, "wake_threadsafe", lambda names: woken.append(list(names)))
    told: list[tuple[str, Any]] = []
    monkeypatch.setattr(events.publisher, "listeners", [lambda group, message: told.append((group, message))])
    hooked: list[Any] = []
    monkeypatch.setattr(transaction, "on_commit", lambda func, *a, **kw: hooked.append(func))
    with atomics_entered() as entered, counted() as seen:
        result = push_one(txn=txn)
    assert (result.status, result.offset, result.queue) == ("queued", 1, "q")
    assert result.message_id != first.message_id
    assert result.transaction_id == (txn if txn is not None else result.message_id)
    assert len(seen) == 1, "\n".join(seen)
    assert "queenadmin_push_one" in seen[0]
    assert entered == []
    assert hooked == []
    assert woken == [["q"]]
    assert told == [(events.QUEUES_GROUP, {"type": "queues.changed", "queues": ["q"]})]
    stored = Message.objects.get(message_id=result.message_id)
    assert (stored.offset, stored.transaction_id, stored.payload) == (1, result.transaction_id, '{"n":1}')
    assert stored.partition.next_offset == 2
    assert stored.partition.retained_bytes == 2 * len('{"n":1}')


@pytest.mark.django_db(transaction=True)
def test_a_lone_duplicate_is_one_statement_and_writes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A lone push of a transactionId already in the partition answers the
    original in one statement; nothing is written, nobody is woken."""
    from queenadmin.domain.queues import wakeups

    _one_statement_pushes()
    first = push_one(txn="t-1")
    woken: list[list[str]] = []
    monkeypatch.setattr(wakeups.hub, "wake_threadsafe", lambda names: woken.append(list(names)))
    with atomics_entered() as entered, counted() as seen:
        again = push_one(txn="t-1")
    assert (again.status, again.message_id, again.offset) == ("duplicate", first.message_id, 0)
    assert len(seen) == 1, "\n".join(seen)
    assert entered == []
    assert woken == []
    assert Message.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_lone_push_falls_back_to_the_transaction_where_the_statement_cannot_answer() -> None:
    """A new queue, a new partition and a capped queue take the
    transactional path, with its answers; a queue without dedup window
    takes the one statement and does not deduplicate."""
    _one_statement_pushes()
    with atomics_entered() as entered:
        created = push_one("new", txn="a")
        other = push_one("new", txn="a", partition="p2")
    assert [(r.status, r.offset) for r in (created, other)] == [("queued", 0), ("queued", 0)]
    assert entered
    queues.queue_configure(request=queues.ConfigureRequest("new", options=queues.QueueOptions((("maxSize", 3),))))
    with atomics_entered() as entered:
        refused = [push_one("new", txn="b"), push_one("new", txn="c")]
    assert [(r.status, r.offset) for r in refused] == [("queued", 1), ("failed", -1)]
    assert entered
    request = queues.ConfigureRequest("new", options=queues.QueueOptions((("maxSize", 0), ("dedupWindowSeconds", 0))))
    queues.queue_configure(request=request)
    with atomics_entered() as entered:
        twice = [push_one("new", txn="a"), push_one("new", txn="a")]
    assert [(r.status, r.offset) for r in twice] == [("queued", 2), ("queued", 3)]
    assert entered == []


def _wait_for_lock_waiter(seconds: float = 30) -> None:
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with connection.cursor() as cur:
            cur.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'"
            )
            (waiting,) = cur.fetchone()
        if waiting:
            return
        time.sleep(0.02)
    raise AssertionError("the lone push never waited for the partition lock")


@pytest.mark.django_db(transaction=True)
def test_a_lone_push_that_waited_for_a_push_of_its_transaction_id_answers_duplicate() -> None:
    """A push of transactionId ``t`` holds the partition, uncommitted; a lone
    push of ``t`` to that partition waits for it, and once it commits
    answers its message as the original: its dedup read runs after the lock
    is granted, in a snapshot that sees the commit. One message is written."""
    import threading

    from django.db import connections, transaction

    _one_statement_pushes()
    push_one(txn="seed")
    holding = threading.Event()
    release = threading.Event()
    held: list[queues.PushResult] = []
    failures: list[BaseException] = []

    def hold() -> None:
        try:
            with transaction.atomic():
                held.extend(
                    queues.queue_push_in_txn(
                        items=[queues.PushItem("q", "p", db.json_text({"n": 2}), "t")], now=clock.now()
                    )
                )
                holding.set()
                assert release.wait(60)
        except BaseException as exc:
            failures.append(exc)
            holding.set()
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold)
    holder.start()
    assert holding.wait(60)
    pusher, lone = in_thread(lambda: push_one(txn="t"))
    try:
        _wait_for_lock_waiter()
    finally:
        release.set()
        holder.join(60)
        pusher.join(60)
    assert not failures, failures
    assert not [a for a in lone if isinstance(a, BaseException)], lone
    [original] = held
    [answer] = lone
    assert original.status == "queued"
    assert (answer.status, answer.message_id, answer.offset) == ("duplicate", original.message_id, original.offset)
    assert Message.objects.filter(transaction_id="t").count() == 1


def _push_t(_n: int) -> tuple[str, str, int]:
    from queenadmin.domain import queues
    from queenadmin.plumbing import db
    from tests.conftest import start_together

    start_together()
    [result] = queues.queue_push(items=[queues.PushItem("q", "p", db.json_text({"n": _n}), "race")])
    return result.status, result.message_id, result.offset


def test_concurrent_lone_pushes_of_one_transaction_id_write_one_message(spawn) -> None:
    """Processes pushing the same transactionId to one partition at once,
    each alone: one message, every other answer a duplicate of it."""
    push_one(txn="seed")
    results = spawn(_push_t, [(n,) for n in range(4)])
    queued = [r for r in results if r[0] == "queued"]
    assert len(queued) == 1, results
    assert {(mid, offset) for _, mid, offset in results} == {queued[0][1:]}
    assert Message.objects.filter(transaction_id="race").count() == 1


def test_the_database_runs_the_push_function_the_store_describes() -> None:
    """``PUSH_ONE_FUNCTION`` changed without a migration replacing the
    function leaves the database running the old one."""
    from queenadmin.domain.queues.store.postgres import PUSH_ONE_FUNCTION

    _one_statement_pushes()
    with connection.cursor() as cur:
        cur.execute("SELECT prosrc FROM pg_proc WHERE proname = 'queenadmin_push_one'")
        [(source,)] = cur.fetchall()
    assert source == PUSH_ONE_FUNCTION.split("$$")[1]
