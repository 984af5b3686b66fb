"""``python manage.py serve``: migrate, then serve API, dashboard and loops."""

from __future__ import annotations

import os
import secrets
import socket
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from queenadmin.domain import tokens
from queenadmin.files import create_private_file, private_data_dir


def _run_workers(config: Any) -> None:
    """``uvicorn.run``'s several-workers branch, with Nagle off.

    uvicorn binds the shared listener with ``proto`` 0; accepted sockets
    inherit it and asyncio then skips ``TCP_NODELAY`` (uvicorn issue 3149),
    so every keep-alive response waits ~40 ms for the client's delayed ACK
    (measured: 22 calls/s at concurrency 1 with 2 workers, against 600 with
    one). Re-wrapping the descriptor lets Python read the real protocol.
    """
    from uvicorn.supervisors import Multiprocess

    sock = config.bind_socket()
    if sock.family in (socket.AF_INET, socket.AF_INET6):
        sock = socket.socket(fileno=sock.detach())
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    Multiprocess(config, sockets=[sock]).run()


#: Session advisory lock that serialises ``migrate`` among replicas starting
#: together on one PostgreSQL database (an arbitrary constant of ours).
MIGRATE_LOCK = 0x51AD_0001


def _migrate() -> None:
    """Apply migrations; on PostgreSQL one replica at a time.

    Without the lock, replicas starting together race to create the same
    tables and all but one fail. The others wait, then find nothing to do.
    """
    if connection.vendor != "postgresql":
        call_command("migrate", interactive=False, verbosity=0)
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s)", [MIGRATE_LOCK])
    try:
        call_command("migrate", interactive=False, verbosity=0)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [MIGRATE_LOCK])


class Command(BaseCommand):
    help = "Apply migrations and serve the API, the dashboard, websockets and the background loops."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument(
            "--workers",
            type=int,
            default=int(os.environ.get("QUEENADMIN_WORKERS", "1")),
            help="Server processes (PostgreSQL; set REDIS_URL so dashboards see every worker's events).",
        )
        parser.add_argument("--no-migrate", action="store_true", help="Skip applying migrations.")
        parser.add_argument(
            "--bootstrap",
            action="store_true",
            help="On first start, create a local admin user and an API token and print them once.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if connection.vendor == "postgresql" and settings.SECRET_KEY_GENERATED:
            # Each replica would invent a key of its own: sessions and signed
            # values made by one would be refused by the others.
            raise CommandError("DJANGO_SECRET_KEY must be set on PostgreSQL (the same on every replica).")
        if not options["no_migrate"]:
            _migrate()
        if options["bootstrap"]:
            self._bootstrap(options["host"], options["port"])
        if connection.vendor == "sqlite" and options["workers"] > 1:
            self.stderr.write("SQLite is served by one process; ignoring --workers.")
            options["workers"] = 1
        connection.close()
        if connection.vendor == "postgresql":
            # The pool of this process: a supervisor of several workers
            # would keep its connections open for good.
            connection.close_pool()  # type: ignore[attr-defined]
        import uvicorn

        self.stdout.write(f"queenadmin serving on http://{options['host']}:{options['port']}/")
        self.stdout.flush()
        config = {
            "host": options["host"],
            "port": options["port"],
            "workers": options["workers"],
            "lifespan": "on",
            "log_level": os.environ.get("QUEENADMIN_UVICORN_LOG_LEVEL", "warning"),
            "access_log": False,
            "ws": "websockets-sansio",
            # httptools with a deadline on request headers (issue 13).
            "http": "queenadmin.httpproto:HeaderDeadlineProtocol",
        }
        if options["workers"] > 1:
            _run_workers(uvicorn.Config("queenadmin.asgi:application", **config))
        else:
            uvicorn.run("queenadmin.asgi:application", **config)

    def _bootstrap(self, host: str, port: int) -> None:
        user_model = get_user_model()
        notes = Path(settings.DATA_DIR) / "first-run.txt"
        if user_model.objects.filter(is_superuser=True).exists():
            if notes.exists():
                self.stdout.write(f"Local credentials were printed on first start; they are in {notes}.")
            return
        password = secrets.token_urlsafe(12)
        user_model.objects.create_superuser("admin", "", password)
        token = tokens.token_create(name=f"local-{secrets.token_hex(3)}")
        base = f"http://{host}:{port}"
        text = (
            "First start: created a local admin user and an API token (shown this once).\n"
            f"  Dashboard: {base}/  (user admin, password {password})\n"
            f"  Admin:     {base}/admin/\n"
            f"  API docs:  {base}/api/v1/docs\n"
            f"  API token: {token}\n"
            f"  Try:       curl -H 'Authorization: Bearer {token}' -H 'Content-Type: application/json' \\\n"
            f'               -d \'{{"operations":[{{"op":"put","ns":"demo","key":"hello","value":1,"forever":true}}]}}\' \\\n'
            f"               {base}/api/v1/kv\n"
        )
        private_data_dir(notes.parent)
        notes.unlink(missing_ok=True)
        create_private_file(notes, text)
        if self.stdout.isatty():
            self.stdout.write(text + f"(Also kept in {notes}, readable by you only.)")
        else:
            # A log file or a pipe may be read by others, and kept: say where
            # the credentials are rather than print them.
            self.stdout.write(
                f"First start: created a local admin user and an API token; read them in {notes} (readable by you only)."
            )
