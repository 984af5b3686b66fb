"""Shared fixtures.

- The suite runs on SQLite, or on PostgreSQL when ``DATABASE_URL`` says so.
- ``live_server``: a real ``manage.py serve`` subprocess on a free port with a
  database of its own (a temp SQLite file, or a fresh PostgreSQL database),
  and an API token made with ``manage.py apitoken create``. Tests that use
  it talk HTTP only, with the official ``queen-mq`` client or httpx.
- ``spawn``: run a function in several real processes against the test
  database (PostgreSQL only; SQLite's test database is in memory).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parent.parent
IS_POSTGRES = os.environ.get("DATABASE_URL", "").startswith("postgres")

requires_postgres = pytest.mark.skipif(not IS_POSTGRES, reason="needs PostgreSQL (DATABASE_URL)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _admin_psql(sql: str) -> None:
    import psycopg

    base = os.environ["DATABASE_URL"]
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(sql)


@dataclass
class LiveServer:
    url: str
    token: str
    env: dict[str, str]
    process: subprocess.Popen[bytes]
    log_path: Path

    def manage(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            check=True,
            capture_output=True,
            text=True,
        )
        return done.stdout

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@contextlib.contextmanager
def run_server(
    extra_env: dict[str, str] | None = None, workers: int = 1, args: tuple[str, ...] = ()
) -> Iterator[LiveServer]:
    tmp = Path(tempfile.mkdtemp(prefix="qa-live-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["QUEENADMIN_DATA_DIR"] = str(tmp)
    env.pop("DJANGO_SETTINGS_MODULE", None)
    db_name = None
    if IS_POSTGRES:
        db_name = f"qa_live_{os.getpid()}_{secrets.token_hex(3)}"
        _admin_psql(f"CREATE DATABASE {db_name}")
        base = os.environ["DATABASE_URL"].rsplit("/", 1)[0]
        env["DATABASE_URL"] = f"{base}/{db_name}"
    env.update(extra_env or {})
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
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError("serve exited:\n" + log_path.read_text())
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("serve did not answer /health:\n" + log_path.read_text())
            time.sleep(0.1)
        server = LiveServer(url, "", env, process, log_path)
        server.token = server.manage("apitoken", "create", f"live-{secrets.token_hex(4)}").strip().splitlines()[-1]
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log_file.close()
        if db_name:
            with contextlib.suppress(Exception):
                _admin_psql(f"DROP DATABASE IF EXISTS {db_name} WITH (FORCE)")
        shutil.rmtree(tmp, ignore_errors=True)


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


@pytest.fixture
async def queen(live_server: LiveServer) -> Any:
    """The official client, pointed at the live server with its token."""
    from queen import Queen

    client = Queen(url=live_server.url, bearer_token=live_server.token, retry_attempts=1)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
def unique() -> Callable[[str], str]:
    """Names that no other test (or earlier run on a live server) uses."""

    def make(stem: str) -> str:
        return f"{stem}-{secrets.token_hex(4)}"

    return make


def _child_setup(db_settings: dict[str, Any]) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "queenadmin.settings")
    import django
    from django.conf import settings

    django.setup()
    settings.DATABASES["default"]["NAME"] = db_settings["NAME"]
    from django.db import connections

    connections.close_all()


def _child_run(db_settings: dict[str, Any], target: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    _child_setup(db_settings)
    try:
        return target(*args)
    finally:
        from django.db import connections

        connections.close_all()


@pytest.fixture
def spawn(transactional_db: None) -> Callable[..., list[Any]]:
    """Run ``target(*args)`` in real processes on the test database.

    Returns the results in order. ``target`` must be importable (module level).
    """
    if not IS_POSTGRES:
        pytest.skip("several processes on one database need PostgreSQL here")

    def run(target: Callable[..., Any], arg_list: list[tuple[Any, ...]]) -> list[Any]:
        ctx = multiprocessing.get_context("spawn")
        db_settings = {"NAME": connection.settings_dict["NAME"]}
        connection.close()
        with ctx.Pool(len(arg_list)) as pool:
            pending = [pool.apply_async(_child_run, (db_settings, target, args)) for args in arg_list]
            return [p.get(timeout=600) for p in pending]

    return run
