"""PostgreSQL: the connection health check runs only after the connection idled.

A connection that ran a statement within ``DB_HEALTH_CHECK_IDLE_SECONDS``
is used without ``SELECT 1``; one idle longer is checked (and replaced if
dead) as Django does. The server side of a connection is ended with
``pg_terminate_backend``, which is what a PostgreSQL restart does to it.
"""

from __future__ import annotations

import time

import psycopg
import pytest
from django.db import DatabaseError, close_old_connections, connection

from tests.conftest import IS_POSTGRES

pytestmark = [
    pytest.mark.skipif(not IS_POSTGRES, reason="the health check is PostgreSQL's (SQLite has no server)"),
    pytest.mark.django_db(transaction=True),
]


def _kill_our_backend() -> None:
    pid = connection.connection.info.backend_pid
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with psycopg.connect(**{**params, "autocommit": True}) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])
    time.sleep(0.05)


def _a_request() -> int:
    """One request's worth of work, with Django's request-boundary checks."""
    close_old_connections()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 41 + 1")
            return cursor.fetchone()[0]
    finally:
        close_old_connections()


def test_a_recently_used_connection_skips_the_check(settings):
    settings.QUEENADMIN_DB_HEALTH_CHECK_IDLE_SECONDS = 60
    assert connection.vendor == "postgresql"
    assert _a_request() == 42
    _kill_our_backend()
    # Used a moment ago: no SELECT 1, so this request is the one that fails...
    with pytest.raises(DatabaseError):
        _a_request()
    # ...and the next one, on a new connection, succeeds.
    assert _a_request() == 42
    assert _a_request() == 42


def test_an_idle_connection_is_checked_and_replaced(settings):
    settings.QUEENADMIN_DB_HEALTH_CHECK_IDLE_SECONDS = 0.2
    assert _a_request() == 42
    _kill_our_backend()
    time.sleep(0.3)
    # Idle past the threshold: Django's check finds it dead and reconnects.
    assert _a_request() == 42


def test_a_zero_threshold_checks_before_every_request(settings):
    settings.QUEENADMIN_DB_HEALTH_CHECK_IDLE_SECONDS = 0
    assert _a_request() == 42
    _kill_our_backend()
    assert _a_request() == 42
