"""``python manage.py serve``: check, migrate, then serve API, dashboard and loops.

What it prints, in order: a banner (version, database without password,
channel layer, workers and threads), "applying migrations…", "serving on
…" once the port takes connections (with several workers, once one of
them has loaded the app: until then connections are refused), and
"stopped" after a signal. Each failure a new operator meets first
(database or Redis down, port taken) is one line and exit code 1, not a
traceback.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import secrets
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser
from django.db import DatabaseError, connection

from queenadmin.api import openmode
from queenadmin.conf import settings as app_settings
from queenadmin.domain import firstrun, identity, tokens
from queenadmin.domain.identity import sso
from queenadmin.metrics import process
from queenadmin.models import TokenScope
from queenadmin.plumbing import db
from queenadmin.plumbing.files import FIRST_RUN_NOTES, FIRST_RUN_REMOVAL, first_run_notes_write
from queenadmin.server import logs
from queenadmin.server.wsgi_bridge import http_threads

log = logging.getLogger("queenadmin.serve")

#: Seconds uvicorn waits for requests in flight after a stop signal before
#: it cancels them. Waiting pops are answered at once (``server.loops``
#: closes the pop hub on the signal), so this only bounds slow ordinary
#: requests and keeps a stop within 5 s.
GRACEFUL_SHUTDOWN_SECONDS = 3


#: ``serve``'s default workers directly on PostgreSQL, at the most: each
#: costs up to 19 PostgreSQL connections without a pool and the pool + 2
#: with one (docs/operations.md, "The connection budget"; bench/connections.py).
DIRECT_WORKERS_CAP = 2


def default_workers() -> int:
    """``serve --workers`` when not given: ``QUEENADMIN_WORKERS``; else on
    PostgreSQL one per usable core, behind a transaction pooler without a
    cap (a worker costs the pooler a client connection, not PostgreSQL a
    server one) and directly up to ``DIRECT_WORKERS_CAP``; on SQLite one
    (one process only).

    A process keeps about one core busy (one GIL), so a worker per core
    serves more: measured with bench/workers.py (docs/design.md, "Serving
    requests").
    """
    configured = app_settings.WORKERS
    if configured:
        return configured
    if not db.is_postgres():
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return cores if db.pooler() else min(cores, DIRECT_WORKERS_CAP)


def version() -> str:
    try:
        return importlib.metadata.version("queenadmin")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def redis_label(url: str) -> str:
    """``url`` without its password."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    if parts.username:
        host = f"{parts.username}@{host}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0].strip()


def _fail(message: str, *args: Any) -> NoReturn:
    log.error(message, *args)
    sys.exit(1)


def _check_jwt() -> None:
    """Refuse the JWT settings Queen's broker refuses (``domain/identity/jwt.py``)."""
    if not app_settings.JWT_ENABLED:
        return
    refused = identity.jwt_start_refusal()
    if refused:
        _fail("%s", refused)
    if app_settings.OPEN_API:
        _fail("JWT_ENABLED=true and QUEENADMIN_OPEN_API=1 contradict each other: the open API takes no token")
    for warning in identity.jwt_start_warnings():
        log.warning("%s", warning)
    failed = identity.jwt_prefetch()
    if failed:
        log.warning("JWT_JWKS_URL could not be fetched (%s); the first token that needs a key fetches again", failed)
    log.info("  JWTs:          %s, beside API tokens", app_settings.JWT_ALGORITHM)


def _check_sso() -> None:
    """Refuse single sign-on settings that cannot work (``domain/identity/sso.py``)."""
    refused = sso.sso_start_refusal()
    if refused:
        _fail("%s", refused)
    config = sso.sso_offered()
    if config is not None:
        login = "and passwords" if config.local_login else "only (password login off)"
        log.info("  sign-in:       %s (%s) %s", config.provider_name, config.issuer, login)


def _check_database() -> None:
    try:
        connection.ensure_connection()
    except DatabaseError as exc:
        _fail("cannot reach the database %s: %s", db.database_label(), _first_line(exc))


def _check_redis(url: str) -> None:
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=3, socket_timeout=3)
    try:
        client.ping()
    except (redis.RedisError, OSError) as exc:
        _fail("cannot reach Redis at %s: %s", redis_label(url), _first_line(exc))
    finally:
        client.close()


def _bind(host: str, port: int) -> socket.socket:
    """Bind (not yet listen) a socket on ``host``/``port``, or fail in one line.

    Made with an explicit ``IPPROTO_TCP`` so that accepted sockets inherit
    it: uvicorn's own shared socket (several workers) has ``proto`` 0,
    accepted sockets inherit that and asyncio then skips ``TCP_NODELAY``
    (uvicorn issue 3149), so every keep-alive response waited ~40 ms for
    the client's delayed ACK (measured: 22 calls/s at concurrency 1 with 2
    workers, against 600).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        _fail("cannot listen on %s port %d: %s", host, port, exc.strerror or _first_line(exc))
    sock.set_inheritable(True)
    return sock


def _serving_on(sock: socket.socket) -> None:
    address, port = sock.getsockname()[:2]
    shown = f"[{address}]" if ":" in address else address
    log.info("serving on http://%s:%d/ (Ctrl-C stops)", shown, port)


def _single_server(config: Any) -> Any:
    """A uvicorn server that says "serving on" once it listens.

    One process binds its own socket, as ``uvicorn.run`` does: handing it
    a socket bound here made 2,000 long-poll pops arriving at 500 a second
    answer up to 3 s late (tests/api/test_longpoll_scale.py; the server
    used 0.39 cores with them waiting, against 0.01), for reasons not found.
    """
    import uvicorn

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            # uvicorn's own line ("Uvicorn running on") is logged at INFO
            # to its error logger, which serve keeps at WARNING.
            await super().startup(sockets)
            if self.started:
                _serving_on(self.servers[0].sockets[0])

    return Server(config)


def _supervisor(config: Any, sock: socket.socket) -> Any:
    """uvicorn's supervisor of several workers on ``sock`` (bound, not
    listening), which says "serving on" once a worker answers.

    The socket listens only once a worker has loaded the app and run its
    lifespan: asyncio's ``create_server`` calls ``listen()`` on a socket it
    is handed, in the worker, at the end of uvicorn's startup. Until then a
    connection is refused, which a load balancer or a client retries at
    once on another replica (nginx and HAProxy do so even for a POST, since
    nothing was sent). The supervisor used to listen before it started the
    workers: the kernel then queued connections that no process could
    answer while the workers imported the app, and a client hung for that
    long (2.9 s measured with two workers, 4.5 s on a slower machine). A
    503 ``starting`` answer would need a process able to answer while the
    app loads, and a load balancer only retries it for idempotent requests.
    """
    from uvicorn.supervisors import Multiprocess

    class Supervisor(Multiprocess):
        def init_processes(self) -> None:
            super().init_processes()
            # Until the first worker is ready, a stop signal, or no worker left.
            while not self.signal_queue:
                if any(process.is_ready(timeout=1) for process in self.processes):
                    _serving_on(sock)
                    return
                if not any(process.process.is_alive() for process in self.processes):
                    return
                time.sleep(0.05)

    return Supervisor(config, sockets=[sock])


def _metrics_dir() -> Path | None:
    """A fresh directory for the workers' request counters (``metrics``).

    prometheus_client's multiprocess mode: every worker writes its counters
    to files here and ``/metrics`` in any worker sums them. Must be set
    before any worker imports prometheus_client. Returns the directory to
    remove at exit: None when ``PROMETHEUS_MULTIPROC_DIR`` names one (it
    is only emptied of an earlier run's files).
    """
    given = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")
    if given:
        path = Path(given)
        path.mkdir(parents=True, exist_ok=True)
        for stale in path.glob("*.db"):
            stale.unlink()
        return None
    path = Path(tempfile.mkdtemp(prefix="queenadmin-metrics-"))
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(path)
    return path


def _migrate() -> None:
    """Apply migrations, one replica at a time.

    Without the lock, replicas starting together race to create the same
    tables and all but one fail. The others wait, then find nothing to do.
    """
    with db.migrations_serialised():
        call_command("migrate", interactive=False, verbosity=0)


class Command(BaseCommand):
    help = "Apply migrations and serve the API, the dashboard, websockets and the background loops."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument(
            "--workers",
            type=int,
            default=None,
            help=(
                "Server processes (PostgreSQL; default QUEENADMIN_WORKERS, else one per core, at most "
                f"{DIRECT_WORKERS_CAP} without QUEENADMIN_DB_POOLER; "
                "set REDIS_URL so dashboards see every worker's events)."
            ),
        )
        parser.add_argument("--no-migrate", action="store_true", help="Skip applying migrations.")
        parser.add_argument(
            "--bootstrap",
            action="store_true",
            help="On first start, create a local admin user and an API token and print them once.",
        )
        parser.add_argument(
            "--access-log",
            action="store_true",
            help="Log one line per request (off by default; QUEENADMIN_LOG_FORMAT=json makes it JSON).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        host, port, workers = options["host"], options["port"], options["workers"]
        if workers is None:
            workers = default_workers()
        if not db.is_postgres() and workers > 1:
            log.warning("SQLite is served by one process; ignoring --workers %d.", workers)
            workers = 1
        redis_url = app_settings.REDIS_URL
        layer = f"redis, {redis_label(redis_url)}" if redis_url else "in-memory (this process only)"
        log.info("queenadmin %s", version())
        log.info("  database:      %s", db.database_label())
        log.info("  channel layer: %s", layer)
        log.info("  workers:       %d, %d HTTP threads each", workers, http_threads())
        if app_settings.OPEN_API:
            # No tokens: said at every start, and only on loopback unless asked.
            refused = openmode.start_refusal(host, any_host=app_settings.OPEN_API_ANY_HOST)
            if refused:
                _fail("%s", refused)
            log.warning("%s", openmode.start_warning(host, port))
        _check_jwt()
        _check_sso()
        _check_database()
        if redis_url:
            _check_redis(redis_url)
        # Bound before migrating, so a taken port fails at once. With one
        # worker the socket only checks that: uvicorn binds its own.
        sock = _bind(host, port)
        if workers == 1:
            port = sock.getsockname()[1]
            sock.close()
        # The workers' process samples name the port (Queen's replica port).
        os.environ[process.PORT_ENV] = str(sock.getsockname()[1] if workers > 1 else port)
        if db.is_postgres() and settings.SECRET_KEY_GENERATED:
            # Each replica would invent a key of its own: sessions and signed
            # values made by one would be refused by the others.
            _fail("DJANGO_SECRET_KEY must be set on PostgreSQL (the same on every replica).")
        if not options["no_migrate"]:
            log.info("applying migrations…")
            _migrate()
        # A replica that did not see the admin's login, or the revocation of
        # the first token, removes its copy of the first-run notes now.
        removed = firstrun.first_run_settle()
        if removed is not None:
            log.info("removed %s (%s)", Path(settings.DATA_DIR) / FIRST_RUN_NOTES, removed)
        if options["bootstrap"]:
            self._bootstrap(host, port)
        connection.close()
        metrics_dir = _metrics_dir()
        try:
            self._serve(host, port, sock, workers, options["access_log"])
        finally:
            if metrics_dir is not None:
                shutil.rmtree(metrics_dir, ignore_errors=True)
        log.info("stopped")

    def _serve(self, host: str, port: int, sock: socket.socket, workers: int, access_log: bool) -> None:
        import uvicorn

        # The pool of this process: a supervisor of several workers would
        # keep its connections open for good.
        db.close_pool()

        # Until uvicorn's own handlers are in place (the supervisor's, or
        # the single server's once it runs), a stop signal is kept here and
        # handed to them, never dropped: a SIGTERM right after "serving on"
        # used to leave a supervisor serving for good. uvicorn also re-raises
        # the stop signal once it has shut down, to the handler found before
        # it ran: this one is quiet, so a stop ends with "stopped" and exit
        # code 0, not a KeyboardInterrupt.
        early: list[int] = []
        on_stop: list[Callable[[], None]] = []

        def keep(signum: int, frame: Any) -> None:
            early.append(signum)
            for stop in on_stop:
                stop()

        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, keep)
        app = "queenadmin.asgi:metered_application" if app_settings.METRICS_REQUESTS else "queenadmin.asgi:application"
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            workers=workers,
            lifespan="on",
            log_config=logs.logging_config(
                log_format=app_settings.LOG_FORMAT,
                level=app_settings.LOG_LEVEL,
                uvicorn_level=app_settings.UVICORN_LOG_LEVEL,
                uvicorn=True,
                access_log=access_log,
            ),
            log_level=None,
            access_log=access_log,
            ws="websockets-sansio",
            # httptools with a deadline on request headers (issue 13).
            http="queenadmin.server.httpproto:HeaderDeadlineProtocol",
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
        )
        if workers > 1:
            # Not listening yet: the first worker that has loaded the app
            # makes the socket listen (see _supervisor).
            supervisor = _supervisor(config, sock)  # its handlers replace keep()
            supervisor.signal_queue.extend(early)
            supervisor.run()
        else:
            server = _single_server(config)
            # Before server.run() installs uvicorn's handlers, and after it
            # puts keep() back: a stop ends the server once it has started.
            on_stop.append(lambda: setattr(server, "should_exit", True))
            if early:
                server.should_exit = True
            server.run()
            if not server.started:
                sys.exit(1)

    def _bootstrap(self, host: str, port: int) -> None:
        user_model = get_user_model()
        notes = Path(settings.DATA_DIR) / FIRST_RUN_NOTES
        if user_model.objects.filter(is_superuser=True).exists():
            if notes.exists():
                self.stdout.write(
                    f"Local credentials were printed on first start; they are in {notes} ({FIRST_RUN_REMOVAL})."
                )
            return
        password = secrets.token_urlsafe(12)
        user_model.objects.create_superuser("admin", "", password)
        # The operator's own first token, beside the superuser: it may do
        # everything, as every token could before scopes.
        token = tokens.token_create(name=f"local-{secrets.token_hex(3)}", by=tokens.HOST, scope=TokenScope.ADMIN)
        notes = first_run_notes_write(
            Path(settings.DATA_DIR), base_url=f"http://{host}:{port}", username="admin", password=password, token=token
        )
        if self.stdout.isatty():
            self.stdout.write(notes.read_text(), ending="")
        else:
            # A log file or a pipe may be read by others, and kept: say where
            # the credentials are rather than print them.
            self.stdout.write(
                "First start: created a local admin user and an API token; "
                f"read them in {notes} (readable by you only; {FIRST_RUN_REMOVAL})."
            )
