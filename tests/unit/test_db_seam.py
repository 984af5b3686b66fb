"""What ``plumbing/db.py`` answers for the code outside the domain that
differs by database: ``serve``, ``settings`` and ``models.fields``."""

from __future__ import annotations

import pytest
from django.db import connection

from queenadmin.plumbing import db

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_database_label_names_the_database_without_its_password():
    label = db.database_label()
    name = connection.settings_dict["NAME"]
    assert label.startswith("postgresql://" if db.is_postgres() else "sqlite:///")
    assert label.endswith(f"/{name}")
    password = connection.settings_dict.get("PASSWORD")
    assert not password or password not in label


def test_migrations_are_serialised_by_an_advisory_lock_on_postgresql():
    """Inside the block this session holds the migration lock (PostgreSQL);
    on SQLite the block just runs."""

    def held() -> bool:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
                " AND ((classid::bigint << 32) | objid::bigint) = %s",
                [db.MIGRATE_LOCK],
            )
            return bool(cursor.fetchone()[0])

    ran = False
    with db.migrations_serialised():
        ran = True
        if db.is_postgres():
            assert held()
    assert ran
    if db.is_postgres():
        assert not held()


def test_byte_order_text_is_collated_c_on_postgresql_only():
    assert db.byte_order_collation(connection) == ("C" if db.is_postgres() else None)


def test_sqlite_connections_run_in_wal_with_the_chosen_synchronous():
    assert db.sqlite_init_command("NORMAL") == "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"


def test_closing_the_pool_leaves_the_connection_usable():
    db.close_pool()
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)
