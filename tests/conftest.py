"""Shared fixtures.

- The suite runs on SQLite, or on PostgreSQL when ``DATABASE_URL`` says so.
- ``live_server``: a real ``manage.py serve`` subprocess on a free port with a
  database of its own (a temp SQLite file, or a fresh PostgreSQL database),
  and an API token made with ``manage.py apitoken create``. Tests that use
  it talk HTTP only, with the official ``queen-mq`` client or httpx.
- The SQLite test database is a file (``django_db_modify_db_settings``), so
  that several processes can share it.
- ``spawn``: run a function in several real processes against the test
  database, on either database.
- Through a pooler (issue 25): ``DATABASE_URL`` points at the pooler and
  ``QUEENADMIN_TEST_DIRECT_URL`` at PostgreSQL itself; databases are then
  created, copied and dropped over the direct URL (a pooler keeps server
  connections to a database open, which ``CREATE DATABASE ... TEMPLATE`` and
  ``DROP DATABASE`` refuse), and everything else goes through the pooler.
  Unset, nothing changes.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import multiprocessing
import os
import runpy
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parent.parent
IS_POSTGRES = os.environ.get("DATABASE_URL", "").startswith("postgres")

requires_postgres = pytest.mark.skipif(not IS_POSTGRES, reason="needs PostgreSQL (DATABASE_URL)")


def _share_the_default_ssl_context() -> None:
    """Every httpx client of this process shares one default SSL context.

    httpx makes a new one for each ``Client``/``AsyncClient`` (each
    ``httpx.get``, each ``Queen`` client), loading certifi's bundle: about
    46 ms of CPU a client here, 2 ms with the context shared. The tests
    talk plain HTTP to local servers; the context is only built, never
    used. A client given its own ``verify`` or ``cert`` still gets its own.
    """
    from httpx._transports import default

    made = default.create_ssl_context
    shared: list[Any] = []

    def create_ssl_context(verify: Any = True, cert: Any = None, trust_env: bool = True) -> Any:
        if verify is not True or cert is not None or not trust_env:
            return made(verify=verify, cert=cert, trust_env=trust_env)
        if not shared:
            shared.append(made())
        return shared[0]

    default.create_ssl_context = create_ssl_context  # type: ignore[assignment]


_share_the_default_ssl_context()


#: Rows post_migrate makes again after each flush: kept, so that it only reads them.
_KEPT_BY_FLUSH = frozenset({"django_content_type", "auth_permission"})


def _flush_only_the_tables_written() -> None:
    """A transactional test's flush empties only the tables holding rows.

    Django's flush empties every table (46 here: on PostgreSQL about 300 ms,
    since TRUNCATE gives each table, index and TOAST table a new file; on
    SQLite 60 to 130 ms of DELETEs), then post_migrate inserts the content
    types and permissions again (100 ms more). A test writes a handful of
    tables: those are found in one query and emptied (with the empty
    tables that point at them, as CASCADE would), about 40 ms; the content
    types and permissions stay. The statements are Django's own
    (``DatabaseOperations.sql_flush``); a flush that resets sequences is
    left as it was.
    """
    from django.core.management.commands import flush

    made = flush.sql_flush

    def sql_flush(style: Any, connection: Any, reset_sequences: bool = True, allow_cascade: bool = False) -> list[str]:
        if reset_sequences:
            return made(style, connection, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        tables = connection.introspection.django_table_names(only_existing=True, include_views=False)
        emptied = sorted(set(tables) - _KEPT_BY_FLUSH)
        probes = [f"SELECT %s WHERE EXISTS (SELECT 1 FROM {connection.ops.quote_name(table)})" for table in emptied]
        with connection.cursor() as cursor:
            cursor.execute(" UNION ALL ".join(probes), emptied)
            written = [table for (table,) in cursor.fetchall()]
        return list(connection.ops.sql_flush(style, written, allow_cascade=True))

    flush.sql_flush = sql_flush


_flush_only_the_tables_written()


def stop_process(process: subprocess.Popen[Any], timeout: float = 15) -> None:
    """Ask ``process`` to end, and kill it if it has not within ``timeout`` seconds."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def settings_of(environ: dict[str, str]) -> dict[str, Any]:
    """What ``queenadmin/settings.py`` makes of ``environ``: the module run
    again in this process, as a start reads it, without a Python process
    per configuration."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "environ", environ)
        return runpy.run_path(str(ROOT / "queenadmin" / "settings.py"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


#: PostgreSQL itself when ``DATABASE_URL`` is a pooler (see the docstring).
DIRECT_URL = os.environ.get("QUEENADMIN_TEST_DIRECT_URL", "")


def _admin_psql(sql: str) -> None:
    import psycopg

    base = DIRECT_URL or os.environ["DATABASE_URL"]
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(sql)


@dataclass
class LiveServer:
    url: str
    env: dict[str, str]
    process: subprocess.Popen[bytes]
    log_path: Path
    #: With ``run_server(clock=True)``: the file the clock hook reads.
    clock_file: Path | None = None
    #: Seconds the server's wall clock has been moved forward in all.
    shifted: float = 0.0
    #: The admin-scope token, once known (``token``).
    known_token: str | None = None

    @property
    def token(self) -> str:
        """An admin-scope API token of the server's database, made with
        ``manage.py apitoken`` when first asked for if the database did not
        come with one: a test that never calls the API saves the process."""
        if self.known_token is None:
            self.known_token = _admin_token(self.env, f"live-{secrets.token_hex(4)}")
        return self.known_token

    def manage(self, *args: str) -> str:
        return _manage(self.env, *args)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def shift(self, delta: timedelta) -> None:
        """Move the server's wall clock forward by ``delta``; return once it has.

        Only for a server started with ``clock=True`` (tests/clockhook): its
        leases, lifetimes and timers then pass as if that time had gone by,
        without the test waiting for it.
        """
        assert self.clock_file is not None, "start the server with run_server(clock=True)"
        self.shifted += delta.total_seconds()
        done = Path(f"{self.clock_file}.done")
        self.clock_file.write_text(repr(delta.total_seconds()))
        self.process.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 10
        while not (done.exists() and float(done.read_text() or "nan") == self.shifted):
            assert time.monotonic() < deadline, "the server did not move its clock"
            time.sleep(0.01)


def _server_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    if IS_POSTGRES:
        # serve refuses PostgreSQL without one; replicas share it.
        env.setdefault("DJANGO_SECRET_KEY", "live-tests-shared-secret-key")
    return env


def _manage(env: dict[str, str], *args: str) -> str:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True, capture_output=True, text=True
    ).stdout


def _admin_token(env: dict[str, str], name: str) -> str:
    """A new admin-scope API token (``apitoken create`` prints it last)."""
    return _manage(env, "apitoken", "create", name, "--scope", "admin").strip().splitlines()[-1]


@dataclass(frozen=True)
class _Template:
    """A migrated database with one admin-scope API token, made once a session.

    Each live server starts on a copy of it (PostgreSQL: ``CREATE DATABASE
    ... TEMPLATE``; SQLite: a copy of the file) instead of migrating an empty
    database and minting a token in a second ``manage.py`` process: about
    1.5 s less per server.
    """

    token: str
    #: PostgreSQL: the template database's name.
    database: str | None
    #: SQLite: the migrated database file.
    sqlite_file: Path | None


_template: _Template | None = None
SQLITE_FILE = "queenadmin.sqlite3"

#: The template's token by the database of each running server started on a
#: copy of the template (``_database_of``): a replica of one (``extra_env``
#: naming that database) uses it instead of minting a token of its own in a
#: ``manage.py apitoken`` process (about 1.5 s of CPU).
_template_copies: dict[str, str] = {}


def _database_of(env: dict[str, str]) -> str:
    """Which database a server with ``env`` opens: its URL, else (SQLite)
    the data folder that holds the file."""
    return env.get("DATABASE_URL") or env["QUEENADMIN_DATA_DIR"]


def _live_template() -> _Template:
    global _template
    if _template is not None:
        return _template
    folder = Path(tempfile.mkdtemp(prefix="qa-template-"))
    env = {**_server_env(), "QUEENADMIN_DATA_DIR": str(folder)}
    database = None
    if IS_POSTGRES:
        database = f"qa_tpl_{os.getpid()}_{secrets.token_hex(3)}"
        _admin_psql(f"CREATE DATABASE {database}")
        # Over the direct URL when there is one: a pooler would keep server
        # connections to the template, and CREATE DATABASE ... TEMPLATE
        # refuses a template anyone is connected to.
        env["DATABASE_URL"] = f"{(DIRECT_URL or os.environ['DATABASE_URL']).rsplit('/', 1)[0]}/{database}"
        if DIRECT_URL:
            env.pop("QUEENADMIN_DB_POOLER", None)
    # Both commands in one process: one Django start (about 1.5 s of CPU) less.
    both = (
        "import django; django.setup(); from django.core.management import call_command;"
        "call_command('migrate', verbosity=0);"
        "call_command('apitoken', 'create', 'live-tests', '--scope', 'admin')"
    )
    made = subprocess.run(
        [sys.executable, "-c", both],
        cwd=ROOT,
        env={**env, "DJANGO_SETTINGS_MODULE": "queenadmin.settings"},
        check=True,
        capture_output=True,
        text=True,
    )
    # apitoken prints the token last.
    token = made.stdout.strip().splitlines()[-1]
    sqlite_file = None
    if not IS_POSTGRES:
        sqlite_file = folder / SQLITE_FILE
        with contextlib.closing(sqlite3.connect(sqlite_file)) as conn:
            # Everything in the main file, so that a plain copy is whole.
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    _template = _Template(token, database, sqlite_file)
    return _template


#: Drops the databases of stopped live servers while the next test runs
#: (PostgreSQL checkpoints at each DROP DATABASE: about a second).
_dropper = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="qa-drop-db")
_drops: list[concurrent.futures.Future[None]] = []


def _drop_database(name: str) -> None:
    with contextlib.suppress(Exception):
        _admin_psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _drop_later(name: str) -> None:
    _drops.append(_dropper.submit(_drop_database, name))


def drop_live_template() -> None:
    global _template
    concurrent.futures.wait(_drops)
    _drops.clear()
    if _template is None:
        return
    if _template.database:
        _drop_database(_template.database)
    if _template.sqlite_file is not None:
        shutil.rmtree(_template.sqlite_file.parent, ignore_errors=True)
    _template = None


def pytest_sessionfinish(session: pytest.Session) -> None:
    drop_live_template()


def _database_for(env: dict[str, str], template: _Template | None) -> str | None:
    """Give a server with ``env`` a database of its own: on PostgreSQL a new
    one (a copy of ``template`` if given; its name is returned, to drop),
    on SQLite a copy of the template's file in the data folder (none: an
    empty folder, which ``serve`` migrates)."""
    if IS_POSTGRES:
        name = f"qa_live_{os.getpid()}_{secrets.token_hex(3)}"
        _admin_psql(f"CREATE DATABASE {name}" + (f" TEMPLATE {template.database}" if template else ""))
        env["DATABASE_URL"] = f"{os.environ['DATABASE_URL'].rsplit('/', 1)[0]}/{name}"
        return name
    if template is not None and template.sqlite_file is not None:
        copied = Path(env["QUEENADMIN_DATA_DIR"]) / SQLITE_FILE
        shutil.copyfile(template.sqlite_file, copied)
        copied.chmod(0o600)
    return None


@contextlib.contextmanager
def migrated_database(env: dict[str, str]) -> Iterator[None]:
    """For servers without a database of their own: ``env`` (with its
    ``QUEENADMIN_DATA_DIR``) gets a copy of the session's migrated template
    as its database, dropped afterwards, so that a start migrates nothing.
    A ``run_server`` given that database meanwhile gets the template's
    token."""
    template = _live_template()
    name = _database_for(env, template)
    database = _database_of(env)
    _template_copies[database] = template.token
    try:
        yield
    finally:
        del _template_copies[database]
        if name:
            _drop_later(name)


@contextlib.contextmanager
def run_server(
    extra_env: dict[str, str] | None = None,
    workers: int = 1,
    args: tuple[str, ...] = (),
    *,
    fresh: bool = False,
    clock: bool = False,
) -> Iterator[LiveServer]:
    """A real ``manage.py serve`` on a free port, with a database of its own.

    The database is a copy of the session's migrated template, with its
    admin-scope token (``server.token``), unless ``fresh`` (an empty
    database that ``serve`` migrates, as on a first start) or ``extra_env``
    names the database or data folder to use (a second replica of another
    server's database, say); then a token is made with ``manage.py
    apitoken`` when the test first asks for it, except for a replica of a
    running server on a template copy, which shares that server's token.
    ``clock=True`` lets the test move the server's wall clock
    (``server.shift``).
    """
    extra_env = dict(extra_env or {})
    tmp = Path(tempfile.mkdtemp(prefix="qa-live-"))
    env = _server_env()
    env["QUEENADMIN_DATA_DIR"] = str(tmp)
    own_database = not ({"DATABASE_URL", "QUEENADMIN_DATA_DIR"} & extra_env.keys())
    template = _live_template() if own_database and not fresh else None
    db_name = None
    if own_database:
        db_name = _database_for(env, template)
    clock_file = None
    if clock:
        clock_file = tmp / "clock-shift"
        hook = str(ROOT / "tests" / "clockhook")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (hook, env.get("PYTHONPATH", "")) if p)
        env["QA_SERVER_CLOCK"] = str(clock_file)
    env.update(extra_env)
    port = free_port()
    log_path = tmp / "serve.log"
    log_file = log_path.open("wb")
    process = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port), "--workers", str(workers), *args],
        cwd=ROOT,
        env=env,
        stdout=log_file,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    database = _database_of(env)
    copy_token = template.token if template is not None else _template_copies.get(database)
    if template is not None:
        _template_copies[database] = template.token
    try:
        _wait_for_health(process, url, log_path)
        yield LiveServer(url, env, process, log_path, clock_file, known_token=copy_token)
    finally:
        if template is not None:
            del _template_copies[database]
        stop_process(process)
        log_file.close()
        if db_name:
            _drop_later(db_name)
        shutil.rmtree(tmp, ignore_errors=True)


def _wait_for_health(process: subprocess.Popen[bytes], url: str, log_path: Path) -> None:
    """Return once ``/health`` answers 200; raise if serve exits or takes a minute.

    One client for all the tries: a client per try cost this process as
    much CPU as the starting server took.
    """
    deadline = time.monotonic() + 60
    with httpx.Client(timeout=1) as probe:
        while True:
            if process.poll() is not None:
                raise RuntimeError("serve exited:\n" + log_path.read_text())
            try:
                if probe.get(f"{url}/health").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("serve did not answer /health:\n" + log_path.read_text())
            time.sleep(0.05)


@contextlib.contextmanager
def open_files_at_least(wanted: int) -> Iterator[None]:
    """Raise this process's open-file limit to ``wanted`` (servers it starts inherit it)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        ceiling = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (ceiling, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.fixture
def short_connections() -> Iterator[None]:
    """Threads that reach the database (a pop's database thread, a socket
    consumer's) close their connection after each job, so the test database
    can be dropped: PostgreSQL refuses to drop a database still in use. Use it
    with ``pytest.mark.usefixtures("short_connections")``."""
    from django.db import connections

    saved = connections.settings["default"].get("CONN_MAX_AGE", 0)
    connections.settings["default"]["CONN_MAX_AGE"] = 0
    yield
    connections.settings["default"]["CONN_MAX_AGE"] = saved


@pytest.fixture(scope="session", autouse=True)
def _fast_password_hashing() -> Iterator[None]:
    """In-process tests hash passwords with MD5, not PBKDF2.

    Django's default costs about 0.25 s a password here, and most dashboard
    and admin tests make a user: that was a minute of every run. Live
    servers (the browser tests' logins) keep the production hasher.
    """
    from django.test import override_settings

    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        yield


@pytest.fixture(autouse=True)
def _live_server_helper() -> None:
    """Replace pytest-django's helper of the same name.

    Ours ``live_server`` is a subprocess with its own database, so it needs
    neither ``transactional_db`` nor pytest-django's settings overrides.
    """
    return


@pytest.fixture(scope="session")
def live_server() -> Iterator[LiveServer]:
    with run_server() as server:
        yield server


@pytest.fixture(scope="session")
def clock_server() -> Iterator[LiveServer]:
    """A live server whose wall clock tests move forward (``clock_server.shift``).

    For what would otherwise be waited out in real time: a lease, a lifetime,
    a timer's delay. Shared by every such test, so its clock only ever
    gains: give each test names of its own and shift relative to now.
    """
    with run_server(clock=True) as server:
        yield server


@contextlib.asynccontextmanager
async def _client_of(server: LiveServer) -> Any:
    from queen import Queen

    client = Queen(url=server.url, bearer_token=server.token, retry_attempts=1)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
async def queen(live_server: LiveServer) -> Any:
    """The official client, pointed at the live server with its token."""
    async with _client_of(live_server) as client:
        yield client


@pytest.fixture
async def clock_queen(clock_server: LiveServer) -> Any:
    """The official client, pointed at ``clock_server``."""
    async with _client_of(clock_server) as client:
        yield client


@pytest.fixture
def unique() -> Callable[[str], str]:
    """Names that no other test (or earlier run on a live server) uses."""

    def make(stem: str) -> str:
        return f"{stem}-{secrets.token_hex(4)}"

    return make


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> Iterator[None]:
    """Put the SQLite test database in a temp file instead of in memory.

    The race tests (``spawn``) need one database that several real
    processes open with the production settings (``BEGIN IMMEDIATE``, a
    20 s busy timeout, WAL); a private in-memory database cannot be shared
    between processes. Chosen over a race-only database of their own
    (migrated in a subprocess) by measurement: the whole SQLite suite took
    47.0 s in memory and 46.5 s on the file (tests/unit alone: 6.3 s and
    6.2 s), so the file costs nothing, needs no second migrate, and every
    test runs on the storage production uses (a race-only database would
    cost a ``manage.py migrate`` subprocess, 1.1 s, and a cleanup of its
    own). PostgreSQL is unchanged.
    """
    from django.conf import settings

    db = settings.DATABASES["default"]
    if DIRECT_URL and db["ENGINE"] != "django.db.backends.sqlite3":
        with _test_databases_dropped_directly():
            yield
        return
    if db["ENGINE"] != "django.db.backends.sqlite3":
        yield
        return
    folder = Path(tempfile.mkdtemp(prefix="qa-test-db-"))
    db.setdefault("TEST", {})["NAME"] = str(folder / "test.sqlite3")
    try:
        yield
    finally:
        # Django removes the database file; WAL leaves -wal and -shm beside it.
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def _test_databases_dropped_directly() -> Iterator[None]:
    """Django drops its test database over the direct URL, ending the
    pooler's server connections to it (``WITH (FORCE)``)."""
    creation = connection.creation

    def destroy(test_database_name: str, verbosity: int) -> None:
        _admin_psql(f"DROP DATABASE IF EXISTS {connection.ops.quote_name(test_database_name)} WITH (FORCE)")

    creation._destroy_test_db = destroy  # type: ignore[method-assign]
    try:
        yield
    finally:
        del creation._destroy_test_db


@pytest.fixture(scope="session", autouse=bool(DIRECT_URL))
def _listen_directly(django_db_setup: None) -> None:
    """Through a pooler, in-process LISTENs go to the test database directly,
    as ``DATABASE_LISTEN_URL`` sends them in production (live servers run
    without one: their wake-ups poll)."""
    from django.conf import settings

    if not os.environ.get("DATABASE_LISTEN_URL"):
        name = settings.DATABASES["default"]["NAME"]
        settings.QUEENADMIN_DB_LISTEN_URL = f"{DIRECT_URL.rsplit('/', 1)[0]}/{name}"


#: In a ``spawn`` child: the barrier that all children of the call meet at.
_start_line: Any = None


def _child_setup(db_settings: dict[str, Any], start_line: Any) -> None:
    global _start_line
    _start_line = start_line
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "queenadmin.settings")
    import django
    from django.conf import settings

    django.setup()
    settings.DATABASES["default"]["NAME"] = db_settings["NAME"]
    from django.db import connections

    connections.close_all()


def _child_run(target: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    try:
        return target(*args)
    except BaseException:
        # Free the others at once instead of leaving them at the barrier.
        _start_line.abort()
        raise
    finally:
        from django.db import connections

        connections.close_all()


def start_together() -> None:
    """In a ``spawn`` child: return once every child of the call is here.

    A start time fixed in advance does not do: sixteen spawned processes
    took 9 s to import Django on two busy cores, so the last ones came after
    a short race had ended.
    """
    _start_line.wait(timeout=300)


def _race_context() -> Any:
    """A fork server that has imported Django and the domain (tests/spawn_preload.py).

    Its children are forks of that process, not fresh interpreters: each
    starts in milliseconds instead of importing Django again. They share no
    connection or thread with the test process.
    """
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["tests.spawn_preload"])
    return ctx


@pytest.fixture
def spawn(transactional_db: None) -> Callable[..., list[Any]]:
    """Run ``target(*args)`` in real processes on the test database.

    One process per ``args``; returns the results in order. ``target`` must
    be importable (module level) and may call ``start_together()``. On
    SQLite the children open the test database file with the production
    options from settings.py (``BEGIN IMMEDIATE``, busy timeout, WAL).
    """

    def run(target: Callable[..., Any], arg_list: list[tuple[Any, ...]]) -> list[Any]:
        ctx = _race_context()
        db_settings = {"NAME": connection.settings_dict["NAME"]}
        start_line = ctx.Barrier(len(arg_list))
        connection.close()
        with ctx.Pool(len(arg_list), initializer=_child_setup, initargs=(db_settings, start_line)) as pool:
            # A child blocked at the barrier takes no second task, so each
            # task that meets it runs in a process of its own.
            pending = [pool.apply_async(_child_run, (target, args)) for args in arg_list]
            return [p.get(timeout=600) for p in pending]

    return run


def one_writer_at_a_time() -> bool:
    """Whether the test database runs one write transaction at a time.

    True on SQLite (a database-wide write lock, no row locks). Races there
    keep their invariants at a smaller scale, since every process queues
    for the same lock.
    """
    return not connection.features.has_select_for_update


def permit_key_waiters(lock_name: str, slot: int) -> int:
    """Backends waiting for the key lock of permit ``slot`` of ``lock_name``
    (PostgreSQL): the advisory lock of KV key ``queen-locks/<name>#<slot>``,
    in the two-int form (``ADVISORY_CLASS``, ``hashtext(name)``) of
    ``domain/kv/store/postgres.py``."""
    from queenadmin.domain import locks
    from queenadmin.domain.kv.store.postgres import ADVISORY_CLASS

    with connection.cursor() as cur:
        cur.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objsubid = 2"
            " AND classid::bigint = %s AND objid::bigint = (hashtext(%s)::bigint & 4294967295)",
            [ADVISORY_CLASS, f"{locks.NAMESPACE}/{lock_name}#{slot}"],
        )
        (count,) = cur.fetchone()
    return int(count)
