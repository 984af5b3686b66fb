"""Serving behind a transaction pooler (issue 25): ``QUEENADMIN_DB_POOLER``.

Some tests need no pooler: the settings it implies, the 503 a prepared
statement gone from the server session answers, and the poll that stands in
for ``LISTEN`` (a server in pooler mode runs as well directly on
PostgreSQL). The others need a real PgBouncer in transaction pooling: run
the suite with ``DATABASE_URL`` pointing at it and
``QUEENADMIN_TEST_DIRECT_URL`` at PostgreSQL itself (``.ci/pgbouncer``
starts one):

    port=$(.ci/pgbouncer start /tmp/qa-bouncer)
    DATABASE_URL=postgresql://postgres@127.0.0.1:$port/test \\
    QUEENADMIN_TEST_DIRECT_URL=postgresql://postgres@127.0.0.1:5432/postgres \\
    QUEENADMIN_DB_POOLER=transaction .venv/bin/python -m pytest tests/pooler
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import os
import threading
import time
from contextlib import ExitStack
from datetime import timedelta

import httpx
import psycopg
import pytest
from django.db import ProgrammingError, connection

from queenadmin.api.envelope import ApiErrorMiddleware
from queenadmin.plumbing import db
from tests.conftest import (
    DIRECT_URL,
    IS_POSTGRES,
    LiveServer,
    migrated_database,
    requires_postgres,
    run_server,
    settings_of,
)

#: DATABASE_URL is a pooler in front of QUEENADMIN_TEST_DIRECT_URL.
BEHIND_POOLER = IS_POSTGRES and bool(DIRECT_URL)

requires_pooler = pytest.mark.skipif(
    not BEHIND_POOLER,
    reason="needs a PgBouncer in transaction pooling: DATABASE_URL at it, QUEENADMIN_TEST_DIRECT_URL at PostgreSQL",
)

#: Long enough that only a LISTEN or the pooler poll can explain a quick wake.
SLOW = "60"


def _settings_of(env: dict[str, str]) -> dict[str, object]:
    """What settings.py makes of ``env`` (with this process's environment
    less its database variables)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("QUEENADMIN_DB_", "DATABASE_"))}
    s = settings_of({**base, **env})
    d = s["DATABASES"]["default"]
    return {
        "prepare_threshold": d["OPTIONS"].get("prepare_threshold", "unset"),
        "server_side_cursors_off": d.get("DISABLE_SERVER_SIDE_CURSORS", False),
        "pooler": s["QUEENADMIN_DB_POOLER"],
        "listen": s["QUEENADMIN_DB_LISTEN_URL"],
    }


def test_behind_a_transaction_pooler_nothing_is_prepared_and_no_cursor_outlives_its_transaction():
    """Settings: no prepare threshold (psycopg then ignores prepare=True too)
    and no server-side cursors; directly, the hot statements may prepare."""
    url = "postgresql://postgres@127.0.0.1:6432/queen"
    pooled = _settings_of({"DATABASE_URL": url, "QUEENADMIN_DB_POOLER": "transaction"})
    assert pooled == {"prepare_threshold": None, "server_side_cursors_off": True, "pooler": "transaction", "listen": ""}
    tracked = _settings_of(
        {"DATABASE_URL": url, "QUEENADMIN_DB_POOLER": "transaction", "QUEENADMIN_DB_POOLER_PREPARED": "1"}
    )
    assert (tracked["prepare_threshold"], tracked["server_side_cursors_off"]) == (2**62, True)
    direct = _settings_of({"DATABASE_URL": url})
    assert direct == {"prepare_threshold": 2**62, "server_side_cursors_off": False, "pooler": "", "listen": ""}
    listen = _settings_of(
        {
            "DATABASE_URL": url,
            "QUEENADMIN_DB_POOLER": "transaction",
            "DATABASE_LISTEN_URL": "postgresql://postgres@127.0.0.1:5432/queen",
        }
    )
    assert listen["listen"] == "postgresql://postgres@127.0.0.1:5432/queen"


def test_an_unknown_pooler_mode_is_refused_at_start():
    with pytest.raises(ValueError, match=r"^QUEENADMIN_DB_POOLER must be transaction, session or none$"):
        _settings_of({"DATABASE_URL": "postgresql://postgres@127.0.0.1/queen", "QUEENADMIN_DB_POOLER": "statement"})


@pytest.mark.django_db
def test_a_prepared_statement_error_answers_503_in_the_envelope_and_one_line(rf, caplog, monkeypatch):
    """psycopg's "does not exist" / "already exists", as Django wraps them,
    answer 503 with Retry-After and log one line a minute naming the
    setting; any other programming error is left to the 500 handler."""
    monkeypatch.setattr(db, "_pooler_logged_at", float("-inf"))
    middleware = ApiErrorMiddleware(lambda request: None)  # type: ignore[arg-type,return-value]
    answers = []
    with caplog.at_level(logging.ERROR, logger="queenadmin"):
        for cause in (
            psycopg.errors.InvalidSqlStatementName('prepared statement "_pg3_0" does not exist'),
            psycopg.errors.DuplicatePreparedStatement('prepared statement "_pg3_0" already exists'),
        ):
            try:
                raise ProgrammingError(str(cause)) from cause
            except ProgrammingError as wrapped:
                answers.append(middleware.process_exception(rf.post("/api/v1/kv"), wrapped))
        other = ProgrammingError("syntax error")
        assert middleware.process_exception(rf.post("/api/v1/kv"), other) is None
    for answer in answers:
        assert answer is not None
        assert (answer.status_code, answer["Retry-After"]) == (503, "1")
        assert json.loads(answer.content) == {"error": "the database is unavailable; retry", "code": "unavailable"}
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1, lines
    assert "QUEENADMIN_DB_POOLER" in lines[0]
    assert not any(r.exc_info for r in caplog.records)


def test_a_command_answered_twice_through_pgbouncer_answers_503(rf):
    """psycopg's InternalError without an SQLSTATE ("received 2 results from
    command 'BEGIN'": PgBouncer turning a client away while PostgreSQL
    restarts) answers 503 in the envelope; PostgreSQL's own internal error
    (SQLSTATE XX000) is left to the 500 handler."""
    from django.db import InternalError

    middleware = ApiErrorMiddleware(lambda request: None)  # type: ignore[arg-type,return-value]

    def answer_to(cause: Exception):
        try:
            raise InternalError(str(cause)) from cause
        except InternalError as wrapped:
            return middleware.process_exception(rf.post("/api/v1/push"), wrapped)

    lost = answer_to(psycopg.InternalError("received 2 results from command 'BEGIN'"))
    assert lost is not None
    assert (lost.status_code, lost["Retry-After"]) == (503, "1")
    assert json.loads(lost.content) == {"error": "the database is unavailable; retry", "code": "unavailable"}
    assert answer_to(psycopg.errors.InternalError_("could not read block 7")) is None


@pytest.mark.django_db(transaction=True)
def test_a_timer_loop_failing_on_an_undeclared_pooler_logs_one_line_not_a_traceback_a_step(caplog, monkeypatch):
    """Every step of a loop behind a pooler nobody declared fails the same
    way: the loop logs the one line naming the setting (at most once a
    minute), not "timer loop step failed" with a traceback each time, and
    keeps running; another error still gets its traceback."""
    import threading

    from queenadmin.domain import timers

    monkeypatch.setattr(db, "_pooler_logged_at", float("-inf"))
    stop = threading.Event()
    causes = [
        psycopg.errors.InvalidSqlStatementName('prepared statement "_pg3_0" does not exist'),
        psycopg.errors.DuplicatePreparedStatement('prepared statement "_pg3_1" already exists'),
        RuntimeError("something else"),
    ]

    def failing_step(self, after=None):
        cause = causes.pop(0)
        if not causes:
            stop.set()
        if isinstance(cause, psycopg.Error):
            raise ProgrammingError(str(cause)) from cause
        raise cause

    monkeypatch.setattr(timers.TimerLoop, "step", failing_step)
    with caplog.at_level(logging.INFO, logger="queenadmin"):
        timers.TimerLoop().run(stop)
    assert causes == []
    named = [r for r in caplog.records if "QUEENADMIN_DB_POOLER" in r.getMessage()]
    assert len(named) == 1
    assert not named[0].exc_info
    failed = [r for r in caplog.records if r.getMessage() == "timer loop step failed"]
    assert len(failed) == 1
    assert failed[0].exc_info is not None
    assert failed[0].exc_info[0] is RuntimeError


def _prepared_on_this_session() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


def _kv_put(client, key: str):
    body = {"operations": [{"op": "put", "ns": "pooler", "key": key, "value": 1, "ttlSeconds": 60}]}
    return client.post("/api/v1/kv", data=json.dumps(body), content_type="application/json")


@requires_postgres
@pytest.mark.skipif(BEHIND_POOLER, reason="needs one server session per connection: PostgreSQL directly")
@pytest.mark.django_db(transaction=True)
def test_a_statement_gone_from_the_server_session_answers_503_and_one_line(caplog, monkeypatch):
    """The hot KV statement is prepared on the session; once it is gone
    behind psycopg's back (what a transaction pooler does), each call
    answers 503 in the envelope, one line names QUEENADMIN_DB_POOLER, and
    django.request logs nothing; the call after that works again."""
    from django.test import Client

    from queenadmin.domain import tokens

    monkeypatch.setattr(db, "_pooler_logged_at", float("-inf"))
    client = Client(HTTP_AUTHORIZATION=f"Bearer {tokens.token_create(by=tokens.HOST, name='pooler-tests')}")
    assert _kv_put(client, "warm").status_code == 200
    with caplog.at_level(logging.INFO):
        for attempt in range(3):
            names = _prepared_on_this_session()
            assert names, "the hot KV statements are prepared directly on PostgreSQL"
            with connection.cursor() as cursor:
                for name in names:
                    # Not DEALLOCATE ALL: psycopg notices that one and forgets its own.
                    cursor.execute(f"DEALLOCATE {connection.ops.quote_name(name)}")
            gone = _kv_put(client, f"k{attempt}")
            assert gone.status_code == 503
            assert gone["Retry-After"] == "1"
            assert gone.json() == {"error": "the database is unavailable; retry", "code": "unavailable"}
            # The connection whose statements were out of step was closed.
            assert _kv_put(client, f"again{attempt}").status_code == 200
    named = [r for r in caplog.records if "QUEENADMIN_DB_POOLER" in r.getMessage()]
    assert len(named) == 1
    assert not [r for r in caplog.records if r.name == "django.request"]
    assert not any(r.exc_info for r in caplog.records)


@requires_postgres
@pytest.mark.skipif(BEHIND_POOLER, reason="needs one server session per connection: PostgreSQL directly")
@pytest.mark.django_db(transaction=True)
def test_pooler_mode_leaves_no_statement_prepared_on_the_session(settings):
    """The writes that prepare their hot statements directly prepare none
    in pooler mode (looked up on the one session a direct connection has)."""
    from django.test import Client

    from queenadmin.domain import tokens

    client = Client(HTTP_AUTHORIZATION=f"Bearer {tokens.token_create(by=tokens.HOST, name='pooler-tests')}")
    connection.close()
    assert _kv_put(client, "direct").status_code == 200
    assert _prepared_on_this_session()
    settings.QUEENADMIN_DB_POOLER = "transaction"
    connection.close()
    for n in range(10):
        assert _kv_put(client, f"pooled{n}").status_code == 200
    assert _prepared_on_this_session() == []


# -- live servers ------------------------------------------------------------


def _pooler_env(**extra: str) -> dict[str, str]:
    """A live server in pooler mode (directly on PostgreSQL where no pooler
    runs: the mode needs none), with the slow re-checks that only a LISTEN
    or the poll can beat."""
    return {
        "QUEENADMIN_DB_POOLER": "transaction",
        "QUEENADMIN_POP_RECHECK_SECONDS": SLOW,
        "QUEENADMIN_TIMER_IDLE_SECONDS": SLOW,
        "QUEENADMIN_TIMER_LEASE_SECONDS": "300",
        "QUEENADMIN_SAMPLER_IN_SERVE": "0",
        **extra,
    }


def _replica_env(first: LiveServer, **extra: str) -> dict[str, str]:
    """A second replica of ``first``'s database."""
    return {"DATABASE_URL": first.env["DATABASE_URL"], **_pooler_env(**extra)}


async def _push(server: LiveServer, queue: str, payload: object) -> None:
    from queen import Queen

    client = Queen(url=server.url, bearer_token=server.token, retry_attempts=1)
    try:
        await client.queue(queue).push([{"data": payload}])
    finally:
        await client.close()


async def _pop(server: LiveServer, queue: str, seconds: float) -> list:
    from queen import Queen

    client = Queen(url=server.url, bearer_token=server.token, retry_attempts=1)
    try:
        return await client.queue(queue).batch(1).wait(True).timeout_millis(int(seconds * 1000)).pop()  # type: ignore[no-any-return]
    finally:
        await client.close()


async def _woken_within(waiting_on: LiveServer, pushing_to: LiveServer, queue: str) -> float:
    """Seconds from a push on one replica to the answer of a pop waiting on the other."""
    pop = asyncio.ensure_future(_pop(waiting_on, queue, 20.0))
    await asyncio.sleep(1.0)  # the pop waits (its first claim found nothing)
    assert not pop.done()
    pushed = time.monotonic()
    await _push(pushing_to, queue, {"n": 1})
    got = await pop
    assert [m["data"] for m in got] == [{"n": 1}]
    return time.monotonic() - pushed


@requires_postgres
@pytest.mark.live
async def test_without_a_listen_url_the_poll_wakes_a_pop_and_a_timer_of_another_replica(unique):
    """No LISTEN in pooler mode without DATABASE_LISTEN_URL: a push or a
    timer written on one replica reaches the other within the poll
    interval, though its own re-checks would wait a minute."""
    from queen import Queen

    with ExitStack() as stack:
        first = stack.enter_context(run_server(_pooler_env(QUEENADMIN_DB_POOLER_POLL_SECONDS="0.3")))
        second_env = _replica_env(first, QUEENADMIN_DB_POOLER_POLL_SECONDS="0.3", QUEENADMIN_TIMER_LOOP_IN_SERVE="0")
        second = stack.enter_context(run_server(second_env))
        late = await _woken_within(first, second, unique("poll"))
        assert late < 2.0

        # The timer is written on the replica without a loop; the other's
        # loop, idle for a minute, polls.
        queue = unique("polltimer")
        client = Queen(url=second.url, bearer_token=second.token, retry_attempts=1)
        try:
            await asyncio.sleep(1.0)  # the firing loop has gone to sleep
            scheduled_at = time.monotonic()
            await client.timers.schedule(queue, "t", {"fired": True}, delay=timedelta(milliseconds=200))
            got = await _pop(first, queue, 10.0)
        finally:
            await client.close()
        assert [m["data"] for m in got] == [{"fired": True}]
        assert time.monotonic() - scheduled_at < 3.0


def _pooler_server_ports() -> set[int]:
    """The local ports of PgBouncer's connections to PostgreSQL (SHOW SERVERS)."""
    admin = os.environ["DATABASE_URL"].rsplit("/", 1)[0] + "/pgbouncer"
    with psycopg.connect(admin, autocommit=True, prepare_threshold=None) as conn:
        cur = conn.execute("SHOW SERVERS", prepare=False)
        columns = [c.name for c in cur.description or []]
        return {int(row[columns.index("local_port")]) for row in cur.fetchall()}


def _listening_ports(database: str) -> set[int]:
    with psycopg.connect(DIRECT_URL, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT client_port FROM pg_stat_activity WHERE datname = %s AND query LIKE 'LISTEN %%'",
            [database],
        ).fetchall()
    return {int(port) for (port,) in rows}


@requires_pooler
@pytest.mark.live
async def test_listen_goes_over_the_listen_url_and_wakes_another_replica_at_once(unique, tmp_path):
    """With DATABASE_LISTEN_URL, every LISTEN runs on a direct connection
    (none on PgBouncer's server connections) and a push on one replica
    wakes a pop waiting on the other without waiting for any poll."""
    with ExitStack() as stack:
        copy = {"QUEENADMIN_DATA_DIR": str(tmp_path)}
        stack.enter_context(migrated_database(copy))
        database = copy["DATABASE_URL"].rsplit("/", 1)[1]
        listen_url = f"{DIRECT_URL.rsplit('/', 1)[0]}/{database}"
        env = {
            "DATABASE_URL": copy["DATABASE_URL"],
            **_pooler_env(QUEENADMIN_DB_POOLER_POLL_SECONDS=SLOW, DATABASE_LISTEN_URL=listen_url),
        }
        waiting = stack.enter_context(run_server(env))
        pushing = stack.enter_context(run_server(env))
        late = await _woken_within(waiting, pushing, unique("listen"))
        assert late < 1.0
        deadline = time.monotonic() + 10
        while len(_listening_ports(database)) < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        listening = _listening_ports(database)
        # The pop hubs' and the timer loops' LISTENs, two replicas' worth.
        assert len(listening) >= 2
        assert not listening & _pooler_server_ports()


def _take_freed_server_sessions(url: str, stop: threading.Event) -> None:
    """Take, again and again, the server session the pooler freed last.

    PgBouncer hands out idle server sessions last in, first out, so a
    server whose transactions never overlap gets the same session every
    time and never misses a statement it prepared. Holding that session for
    a moment sends the server's next transaction to another one, which is
    what a pooler does to any busy deployment."""
    with psycopg.connect(url, prepare_threshold=None, autocommit=True) as taker:
        while not stop.is_set():
            with taker.transaction():
                taker.execute("SELECT 1")
                stop.wait(0.005)


@requires_pooler
@pytest.mark.live
def test_a_server_not_told_about_the_pooler_answers_503_and_says_so_once():
    """Through PgBouncer without QUEENADMIN_DB_POOLER the prepared hot
    statements land on other server sessions: calls answer 503 in the
    envelope, never 500, and the log names the setting once, without a
    traceback."""
    env = {"QUEENADMIN_DB_POOLER": "", "QUEENADMIN_SAMPLER_IN_SERVE": "0", "QUEENADMIN_TIMER_LOOP_IN_SERVE": "0"}
    with run_server(env) as server:
        headers = {"Authorization": f"Bearer {server.token}"}

        def puts(worker: int) -> list[tuple[int, dict[str, str]]]:
            got = []
            with httpx.Client(base_url=server.url, headers=headers, timeout=30) as http:
                for n in range(30):
                    op = {"op": "put", "ns": "pooler", "key": f"w{worker}-{n}", "value": n, "ttlSeconds": 60}
                    answer = http.post("/api/v1/kv", json={"operations": [op]})
                    got.append((answer.status_code, answer.json()))
            return got

        stop = threading.Event()
        with concurrent.futures.ThreadPoolExecutor(10) as pool:
            takers = [pool.submit(_take_freed_server_sessions, server.env["DATABASE_URL"], stop) for _ in range(2)]
            try:
                answers = [a for batch in pool.map(puts, range(8)) for a in batch]
            finally:
                stop.set()
            for taker in takers:
                taker.result()
        statuses = {status for status, _ in answers}
        assert statuses <= {200, 503}, statuses
        assert 503 in statuses
        assert {json.dumps(body) for status, body in answers if status == 503} == {
            json.dumps({"error": "the database is unavailable; retry", "code": "unavailable"})
        }
        log = server.log()
    assert len([line for line in log.splitlines() if "QUEENADMIN_DB_POOLER" in line]) == 1, log
    assert "Traceback" not in log


def _migrate_lock_taken_elsewhere() -> bool:
    """Whether another session holds the migration lock: a try from a
    connection of its own (in a transaction, so that through a pooler it
    neither keeps nor leaks the lock)."""
    with psycopg.connect(**db.connect_params(), prepare_threshold=None) as other:
        (got,) = other.execute("SELECT pg_try_advisory_xact_lock(%s)", [db.MIGRATE_LOCK]).fetchone() or (None,)
        other.rollback()
    return not got


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_behind_a_transaction_pooler_the_migration_lock_lives_in_a_transaction(settings):
    """In pooler mode the migration lock is held by a transaction of its own
    for the whole block (another replica's try fails) and is gone after it."""
    settings.QUEENADMIN_DB_POOLER = "transaction"
    assert not _migrate_lock_taken_elsewhere()
    with db.migrations_serialised():
        assert _migrate_lock_taken_elsewhere()
        # Django's own connection goes on working meanwhile (migrate runs on it).
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    assert not _migrate_lock_taken_elsewhere()
