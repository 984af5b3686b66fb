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

from queenadmin.domain import clock, db
from queenadmin.domain.kv.store import PostgresStore, store
from queenadmin.domain.kv.store.postgres import ADVISORY_CLASS

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
