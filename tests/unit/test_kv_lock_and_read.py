"""``lock_and_read`` on PostgreSQL: the keys' locks and rows in one statement,
whose snapshot predates the locks; what a writer committed while the call
waited for a key's lock must still be what it reads."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from django.db import connection, transaction

from queenadmin.domain import clock
from queenadmin.domain.kv.store import PostgresStore, store
from queenadmin.domain.kv.store.postgres import ADVISORY_CLASS
from queenadmin.plumbing import db

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif("connection.vendor != 'postgresql'", reason="advisory locks and row versions: PostgreSQL"),
]

T0 = datetime(2026, 10, 8, 10, 0, 0, tzinfo=UTC)


def _insert(cur: Any, key: str, version: int) -> None:
    cur.execute(
        "INSERT INTO queenadmin_kventry (namespace, key, value_json, version, expires_at, created_at, updated_at)"
        " VALUES ('ns', %s, %s, %s, NULL, %s, %s)",
        [key, str(version), version, T0, T0],
    )


def _writer_holding(key: str, sql_then: Any, ready: threading.Event, hold: float) -> None:
    """Another connection: takes ``key``'s lock as every writer does, writes, waits, commits."""
    with psycopg.connect(**db.connect_params()) as conn, conn.cursor() as cur:
        cur.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [ADVISORY_CLASS, f"ns/{key}"])
        sql_then(cur)
        ready.set()
        time.sleep(hold)
        conn.commit()


@pytest.mark.parametrize("change", ["made", "changed", "deleted"])
def test_what_a_writer_committed_while_the_read_waited_is_what_it_reads(change: str) -> None:
    the_store = store()
    assert isinstance(the_store, PostgresStore)
    if change != "made":
        with connection.cursor() as cur:
            _insert(cur, "k", 1)
    step = {
        "made": lambda cur: _insert(cur, "k", 7),
        "changed": lambda cur: cur.execute("UPDATE queenadmin_kventry SET version = 7 WHERE key = 'k'"),
        "deleted": lambda cur: cur.execute("DELETE FROM queenadmin_kventry WHERE key = 'k'"),
    }[change]
    ready = threading.Event()
    writer = threading.Thread(target=_writer_holding, args=("k", step, ready, 0.5))
    writer.start()
    try:
        assert ready.wait(30)
        started = time.monotonic()
        with transaction.atomic():
            found = the_store.lock_and_read([("ns", "k"), ("ns", "other")], clock.now())
        waited = time.monotonic() - started
    finally:
        writer.join()
    assert waited > 0.2, "the read did not wait for the writer's lock"
    if change == "deleted":
        assert found == {}
    else:
        assert set(found) == {("ns", "k")}
        assert found[("ns", "k")].version == 7


def test_the_locks_are_held_when_no_key_has_a_row() -> None:
    the_store = store()
    with transaction.atomic():
        assert the_store.lock_and_read([("ns", "nothing")], clock.now()) == {}
        with psycopg.connect(**db.connect_params(), autocommit=True) as other:
            row = other.execute(
                "SELECT pg_try_advisory_lock(%s, hashtext(%s))", [ADVISORY_CLASS, "ns/nothing"]
            ).fetchone()
            assert row == (False,)


#: The plain statement ``lock_and_read`` ran before migration 0014: the
#: control of the test below (prepared, its generic plan goes stale).
_PLAIN = (
    "WITH lk AS MATERIALIZED (SELECT count(pg_advisory_xact_lock(%s, h)) AS held FROM "
    "(SELECT DISTINCT hashtext(n) AS h FROM unnest(%s::text[]) AS n ORDER BY 1) AS s) "
    "SELECT t.id FROM queenadmin_kventry AS t "
    "JOIN (SELECT r->>0 AS ns, r->>1 AS k FROM jsonb_array_elements(%s::jsonb) AS r) AS w "
    "ON t.namespace = w.ns AND t.key = w.k WHERE (SELECT held FROM lk) >= 0 FOR NO KEY UPDATE OF t"
)


def _seq_scans() -> int:
    with connection.cursor() as cur:
        cur.execute("SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relname = 'queenadmin_kventry'")
        return int(cur.fetchone()[0])


def test_the_read_probes_the_key_index_however_the_table_grew() -> None:
    """The read's plan is cached per connection (the call is prepared), and
    made with sequential scans off: made while the table held three rows,
    it still probes the index after 20,000 more arrive unanalyzed. The plain
    prepared statement it replaced, in the same steps, scans the table."""
    the_store = store()
    keys = [("ns", "a"), ("ns", "b")]
    with connection.cursor() as cur:
        cur.execute("ALTER TABLE queenadmin_kventry SET (autovacuum_enabled = false)")
        try:
            for key in ("a", "b", "c"):
                _insert(cur, key, 1)
            cur.execute("ANALYZE queenadmin_kventry")
            # Past PostgreSQL's five custom plans: the generic plans are cached.
            for _ in range(8):
                with transaction.atomic():
                    assert set(the_store.lock_and_read(keys, clock.now())) == set(keys)
                    db.pg_run(_PLAIN, [ADVISORY_CLASS, ["ns/a", "ns/b"], '[["ns","a"],["ns","b"]]'])
            cur.execute(
                "INSERT INTO queenadmin_kventry (namespace, key, value_json, version, expires_at, created_at, updated_at)"
                " SELECT 'bulk', 'k' || i, '0', i + 10, NULL, now(), now() FROM generate_series(1, 20000) AS i"
            )
            with transaction.atomic():
                before = _seq_scans()
                assert set(the_store.lock_and_read(keys, clock.now())) == set(keys)
                assert _seq_scans() == before, "lock_and_read scanned the table"
                db.pg_run(_PLAIN, [ADVISORY_CLASS, ["ns/a", "ns/b"], '[["ns","a"],["ns","b"]]'])
                assert _seq_scans() > before, "the control did not go stale: the test shows nothing"
        finally:
            cur.execute("ALTER TABLE queenadmin_kventry RESET (autovacuum_enabled)")
