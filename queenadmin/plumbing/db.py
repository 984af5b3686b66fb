"""The database seam shared by every domain module, and by the rest.

One place for what differs between PostgreSQL and SQLite in raw SQL: the
vendor test, the time adapters, the JSON text we store, and running a hot
PostgreSQL statement prepared and bound on the server on Django's own
connection (so inside its transaction, with its error wrapping). The few
things outside the domain that differ by database ask here too: ``serve``
(the database's label, migrations one replica at a time, the pool),
``settings`` (SQLite's connection pragmas) and ``models.fields`` (the byte
order collation, which is why the seam stands on the ground floor).

Behind a transaction pooler (``QUEENADMIN_DB_POOLER=transaction``, issue
25) each transaction may run on another server session, so nothing here
keeps state in a session past its transaction: no prepared statement
(unless the pooler tracks them), the migration lock held by a transaction
of its own, and ``LISTEN`` only on the direct ``DATABASE_LISTEN_URL``
(``listen_params``) or not at all (``wake_poll_seconds``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import psycopg
from django.conf import settings as django_settings
from django.db import DEFAULT_DB_ALIAS, connection, connections
from psycopg import Cursor as PgCursor

log = logging.getLogger(__name__)

T = TypeVar("T")

_TIMESTAMPTZ_LOADER: Any = psycopg.adapters.get_loader(
    psycopg.adapters.types["timestamptz"].oid,
    psycopg.pq.Format.TEXT,
)


@functools.cache
def is_postgres() -> bool:
    # A process serves one database (the backend's vendor is a class
    # attribute): asked once, not through the connection proxy per call.
    return connection.vendor == "postgresql"


def by_vendor(*, postgres: T, sqlite: T) -> Callable[[], T]:
    """A function answering ``postgres`` or ``sqlite``, whichever serves the
    database in use: each concept's ``store()``.

    It asks ``is_postgres``, cached, since hot paths (a push) call their
    ``store()`` several times.
    """

    def chosen() -> T:
        return postgres if is_postgres() else sqlite

    return chosen


def database_label() -> str:
    """The database in use as a URL without its password."""
    db = connection.settings_dict
    if not is_postgres():
        return f"sqlite:///{db['NAME']}"
    user = f"{db['USER']}@" if db.get("USER") else ""
    host = db.get("HOST") or "localhost"
    port = f":{db['PORT']}" if db.get("PORT") else ""
    return f"postgresql://{user}{host}{port}/{db['NAME']}"


def pooler() -> str:
    """``"transaction"`` behind a transaction pooler, else ``""`` (settings.py)."""
    return str(getattr(django_settings, "QUEENADMIN_DB_POOLER", ""))


def may_prepare() -> bool:
    """Whether a statement may stay prepared on the server session.

    Not behind a transaction pooler, unless it tracks prepared statements
    per client (``QUEENADMIN_DB_POOLER_PREPARED``).
    """
    return pooler() != "transaction" or bool(getattr(django_settings, "QUEENADMIN_DB_POOLER_PREPARED", False))


#: Advisory lock that serialises ``migrate`` among replicas starting
#: together on one PostgreSQL database (an arbitrary constant of ours).
MIGRATE_LOCK = 0x51AD_0001


@contextlib.contextmanager
def migrations_serialised() -> Iterator[None]:
    """Hold the migration lock while the block runs (PostgreSQL).

    Directly on PostgreSQL, a session lock on Django's connection. Behind a
    transaction pooler a session lock would stay with whichever server
    session took it (and a later unlock may run on another): there the
    lock is a transaction lock, held by a transaction left open on a
    connection of its own until the block ends. That transaction keeps one
    server connection of the pool for as long as migrate runs, and
    PostgreSQL frees the lock if the process dies. Migrations themselves
    run through the pooler like any statement: each is one transaction.

    On SQLite one process serves the file, so there is nothing to wait for.
    """
    if not is_postgres():
        yield
        return
    if pooler() == "transaction":
        with psycopg.connect(**connect_params(), prepare_threshold=None) as holder:
            holder.execute("SELECT pg_advisory_xact_lock(%s)", [MIGRATE_LOCK])
            try:
                yield
            finally:
                holder.rollback()
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s)", [MIGRATE_LOCK])
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [MIGRATE_LOCK])


def close_pool() -> None:
    """Close this process's connection pool, if the database has one."""
    if is_postgres():
        connection.close_pool()  # type: ignore[attr-defined]


def sqlite_init_command(synchronous: str) -> str:
    """SQLite's pragmas for every new connection (``settings.py``).

    WAL lets readers run beside the one writer; ``synchronous`` is FULL,
    NORMAL or EXTRA.
    """
    return f"PRAGMA journal_mode=WAL; PRAGMA synchronous={synchronous};"


def byte_order_collation(conn: Any) -> str | None:
    """The collation that compares text as its UTF-8 bytes on ``conn``;
    None where the default already does (SQLite's BINARY)."""
    return "C" if conn.vendor == "postgresql" else None


def json_text(value: Any) -> str:
    """Compact JSON text of ``value``, as stored (no NaN, UTF-8 kept).

    Raises ``ValueError`` or ``TypeError`` for what JSON cannot hold.
    """
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def to_db_time(moment: datetime | None) -> Any:
    """A datetime as raw SQL parameters need it on this backend."""
    return connection.ops.adapt_datetimefield_value(moment)


def from_db_time(value: Any) -> Any:
    """A datetime read by raw SQL, in UTC with ``datetime.UTC`` as tzinfo.

    SQLite gives naive UTC (or ISO text); psycopg gives the session zone.
    None stays None.
    """
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if value.tzinfo is UTC:
        return value
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def connect_params() -> dict[str, Any]:
    """psycopg ``connect()`` arguments for a connection of our own to the
    default database (a LISTEN connection beside Django's)."""
    settings = connection.settings_dict
    params = {
        "dbname": settings["NAME"],
        "user": settings.get("USER"),
        "password": settings.get("PASSWORD"),
        "host": settings.get("HOST"),
        "port": settings.get("PORT"),
    }
    return {k: v for k, v in params.items() if v}


def _listen_url() -> str:
    return str(getattr(django_settings, "QUEENADMIN_DB_LISTEN_URL", ""))


def listen_params() -> dict[str, Any] | None:
    """psycopg ``connect()`` arguments for a ``LISTEN`` connection; None when
    there is nothing to listen on.

    ``DATABASE_LISTEN_URL`` when set (a direct connection past the pooler).
    Else the default database, unless it is reached through a transaction
    pooler: a ``LISTEN`` there would be heard by whichever server session
    ran it, and wake-ups fall back to a poll (``wake_poll_seconds``).
    """
    url = _listen_url()
    if url:
        # As separate arguments (dbname, host...), like connect_params().
        return dict(psycopg.conninfo.conninfo_to_dict(url))
    if pooler() == "transaction":
        return None
    return connect_params()


def wake_poll_seconds() -> float | None:
    """How often waiters look for other replicas' writes without a ``LISTEN``
    connection (transaction pooling without ``DATABASE_LISTEN_URL``); None
    where notifications come (or, on SQLite, where one process serves)."""
    if not is_postgres() or pooler() != "transaction" or _listen_url():
        return None
    return float(getattr(django_settings, "QUEENADMIN_DB_POOLER_POLL_SECONDS", 0.5))


#: SQLSTATEs of a prepared statement missing from the server session, or
#: already there: a statement prepared on one session of a transaction
#: pooler and used on another.
_PREPARED_STATEMENT_ERRORS = frozenset({"26000", "42P05"})

#: ``time.monotonic()`` of the last line ``pooler_session_error`` logged.
_pooler_logged_at = float("-inf")

#: The shortest gap between two such lines: one per minute, not one per call.
POOLER_LOG_GAP_SECONDS = 60.0


def lost_mid_command(exc: BaseException) -> bool:
    """Whether psycopg got two answers to one of its own commands, the
    connection lost under the call (then this thread's connection is closed:
    the next call opens a new one).

    While PostgreSQL restarts, PgBouncer turns a client away in the middle
    of a command ("server login has been failing, try again later"): it
    sends its error and closes the connection, and psycopg can take that as
    two results of its own ``BEGIN`` or ``COMMIT`` and raise
    ``InternalError`` without an SQLSTATE (2 of about 3,000 calls in one
    restart under load, tests/pooler/test_faults.py). The call may or may
    not have applied, as a 503 says. An ``InternalError`` from PostgreSQL
    itself (SQLSTATE class XX) is not this.
    """
    cause = exc.__cause__
    if not (isinstance(cause, psycopg.InternalError) and cause.sqlstate is None):
        return False
    with contextlib.suppress(Exception):
        connection.close()
    return True


def pooler_session_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a prepared statement the server session lacks (or
    already has): a pooler in transaction mode that this process was not
    told about (``QUEENADMIN_DB_POOLER``), or one that does not track
    prepared statements although ``QUEENADMIN_DB_POOLER_PREPARED`` says so.

    Logs one line naming the setting, at most once a minute, and closes
    this thread's connection (its prepared statements are out of step with
    the server session). Call it only outside any transaction.
    """
    global _pooler_logged_at
    seen: BaseException | None = exc
    while seen is not None and not (isinstance(seen, psycopg.Error) and seen.sqlstate in _PREPARED_STATEMENT_ERRORS):
        seen = seen.__cause__ or seen.__context__
    if seen is None:
        return False
    now = time.monotonic()
    if now - _pooler_logged_at >= POOLER_LOG_GAP_SECONDS:
        _pooler_logged_at = now
        log.error(
            "a prepared statement went missing between transactions (%s): PostgreSQL is reached"
            " through a pooler in transaction mode; set QUEENADMIN_DB_POOLER=transaction"
            " (and QUEENADMIN_DB_POOLER_PREPARED=1 only if the pooler tracks prepared statements)",
            str(seen).strip().splitlines()[0] if str(seen).strip() else type(seen).__name__,
        )
    with contextlib.suppress(Exception):
        if not connection.in_atomic_block:
            connection.close()
    return True


def server_cursor() -> PgCursor[Any]:
    """A psycopg cursor that binds on the server, on Django's connection.

    Django's psycopg cursors bind on the client, quoting every array
    element in Python: 16 ms of a 1,000-item push (measured). Bound on the
    server (binary), the same arrays cost well under a millisecond. It
    shares the connection, so it runs inside the current transaction.
    """
    conn: Any = connections[DEFAULT_DB_ALIAS]  # queenadmin.pgbackend's wrapper
    # Connect and health-check the Django way (``pgbackend``), without
    # making a Django cursor only to drop it.
    return PgCursor(conn.raw_connection())


def pg_run(sql: str, params: Sequence[Any], *, prepare: bool = True) -> list[tuple[Any, ...]]:
    """Run one hot PostgreSQL statement bound on the server; its rows.

    ``prepare=True`` keeps it as a prepared statement on the connection:
    Django never prepares, so PostgreSQL parses and plans every statement
    again (the single-put upsert measured 167 us of PostgreSQL CPU
    unprepared against 90 us prepared, bench/README.md). Behind a
    transaction pooler nothing is prepared (``may_prepare``). This needs the
    connection's ``prepare_threshold`` to be a number (settings.py sets one
    that automatic preparing never reaches; Django's default, None, makes
    psycopg ignore ``prepare=True``).

    Prepare only statements whose plan cannot go bad: after five runs
    PostgreSQL may keep a generic plan, and one made while the table was
    nearly empty is a sequential scan (measured: 12 ms of PostgreSQL CPU
    per 100-key read instead of 1.5). ``prepare=False`` still binds on the
    server, planned for the actual values every time.
    """
    with connections[DEFAULT_DB_ALIAS].wrap_database_errors, server_cursor() as cursor:
        # psycopg's C timestamptz loader, not Django's pure-Python one (a
        # tenth of the cost; a 100-row read parses 200 of them). Results are
        # in the session time zone; from_db_time() makes them UTC.
        cursor.adapters.register_loader("timestamptz", _TIMESTAMPTZ_LOADER)
        cursor.execute(sql, params, prepare=prepare and may_prepare())
        # rownumber, not description: that builds a Column per field.
        return cursor.fetchall() if cursor.rownumber is not None else []


def distinct_leading(model: Any, column: str, *, limit: int) -> list[str]:
    """The first ``limit`` distinct values of ``column``, in order.

    ``column`` must lead an index of ``model``'s table: one index probe per
    value (a loose index scan, as a recursive CTE), so ten namespaces over a
    hundred thousand keys cost ten probes, not a scan. Takes no lock.
    """
    table = connection.ops.quote_name(model._meta.db_table)
    col = connection.ops.quote_name(model._meta.get_field(column).column)
    sql = (
        f"WITH RECURSIVE v(x) AS (SELECT MIN({col}) FROM {table} "
        f"UNION ALL SELECT (SELECT MIN({col}) FROM {table} WHERE {col} > v.x) FROM v WHERE v.x IS NOT NULL) "
        f"SELECT x FROM v WHERE x IS NOT NULL LIMIT %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [limit])
        return [row[0] for row in cursor.fetchall()]
