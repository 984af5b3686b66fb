"""PostgreSQL: the connection health check runs only after the connection idled.

A connection that ran a statement within ``DB_HEALTH_CHECK_IDLE_SECONDS``
is used without ``SELECT 1``; one idle longer is checked (and replaced if
dead) as Django does. The server side of a connection is ended with
``pg_terminate_backend``, which is what a PostgreSQL restart does to it.
"""

from __future__ import annotations

import io
import json
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


def _api_put(handler, token: str) -> tuple[int, dict, dict]:
    """A KV put through the API's own WSGI handler, request signals and all."""
    body = json.dumps({"operations": [{"op": "put", "ns": "lost", "key": "k", "value": 1, "forever": True}]}).encode()
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/api/v1/kv",
        "SERVER_NAME": "testserver",
        "SERVER_PORT": "80",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": io.StringIO(),
        "CONTENT_LENGTH": str(len(body)),
        "CONTENT_TYPE": "application/json",
        "HTTP_AUTHORIZATION": f"Bearer {token}",
    }
    started: dict = {}
    chunks = handler(environ, lambda status, headers, exc_info=None: started.update(status=status, headers=headers))
    raw = b"".join(chunks)
    chunks.close()
    return int(started["status"].split()[0]), dict(started["headers"]), json.loads(raw)


def test_an_api_call_on_a_lost_connection_answers_503_then_works(settings):
    """The one request that finds the connection gone answers 503 with
    Retry-After in the API's envelope (nothing was written), the next 200."""
    from queenadmin.domain import tokens
    from queenadmin.server.handlers import ApiWSGIHandler

    settings.QUEENADMIN_DB_HEALTH_CHECK_IDLE_SECONDS = 60
    handler = ApiWSGIHandler()
    token = tokens.token_create(by=tokens.HOST, name="lost")
    status, _, body = _api_put(handler, token)
    assert status == 200
    first = body["results"][0]["version"]
    _kill_our_backend()
    status, headers, body = _api_put(handler, token)
    assert status == 503
    assert body == {"error": "the database is unavailable; retry", "code": "unavailable"}
    assert headers["Retry-After"] == "1"
    status, _, body = _api_put(handler, token)
    assert status == 200
    # The lost call drew no version: the store-wide counter moved once.
    assert body["results"][0]["version"] == first + 1
