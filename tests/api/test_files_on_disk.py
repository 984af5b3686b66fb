"""Secrets and data on disk (issue 13): private files, a shared key on
PostgreSQL, and durable SQLite writes."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from tests.conftest import IS_POSTGRES, ROOT, requires_postgres, run_server

pytestmark = pytest.mark.live


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_data_folder_is_0700_and_every_file_in_it_0600():
    """After a first start with --bootstrap: the folder, the secret key, the
    SQLite database with its -wal and -shm, and first-run.txt."""
    with run_server(args=("--bootstrap",)) as server:
        data = Path(server.env["QUEENADMIN_DATA_DIR"])
        assert _mode(data) == 0o700
        names = {p.name for p in data.iterdir() if p.name != "serve.log"}
        expected = {"first-run.txt"} if IS_POSTGRES else {"first-run.txt", "secret_key", "queenadmin.sqlite3"}
        assert expected <= names
        for name in names:
            assert _mode(data / name) == 0o600, name


def test_an_existing_open_data_folder_is_tightened(tmp_path):
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    data.chmod(0o755)
    with run_server(extra_env={"QUEENADMIN_DATA_DIR": str(data)}):
        assert _mode(data) == 0o700


@requires_postgres
def test_serve_refuses_postgresql_without_a_secret_key():
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST") and k != "DJANGO_SECRET_KEY"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    done = subprocess.run(
        [sys.executable, "manage.py", "serve", "--no-migrate", "--port", "9"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    # serve's banner, then one line saying why (no traceback).
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .endswith("DJANGO_SECRET_KEY must be set on PostgreSQL (the same on every replica).")
    )
    assert "Traceback" not in done.stderr


@pytest.mark.django_db
@pytest.mark.skipif(IS_POSTGRES, reason="a SQLite pragma")
def test_sqlite_writes_are_synchronous_full_by_default():
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA synchronous")
        assert cursor.fetchone()[0] == 2  # FULL


def test_bootstrap_credentials_are_printed_to_a_terminal(tmp_path):
    """On a terminal the first start prints the password and token (into a
    log it only says where they are: test_serve.py)."""
    import os as _os
    import pty
    import secrets
    import select
    import time

    from tests.conftest import _admin_psql, free_port

    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    env["QUEENADMIN_DATA_DIR"] = str(tmp_path)
    db_name = None
    if IS_POSTGRES:
        db_name = f"qa_tty_{secrets.token_hex(3)}"
        _admin_psql(f"CREATE DATABASE {db_name}")
        env["DATABASE_URL"] = f"{os.environ['DATABASE_URL'].rsplit('/', 1)[0]}/{db_name}"
        env["DJANGO_SECRET_KEY"] = "tty-test-key"
    master, slave = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--bootstrap", "--port", str(free_port())],
        cwd=ROOT,
        env=env,
        stdout=slave,
        stderr=slave,
    )
    _os.close(slave)
    seen = b""
    try:
        deadline = time.monotonic() + 60
        while b"serving on http" not in seen and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1)
            if ready:
                try:
                    seen += _os.read(master, 4096)
                except OSError:
                    break
    finally:
        process.terminate()
        process.wait(timeout=15)
        _os.close(master)
        if db_name:
            _admin_psql(f"DROP DATABASE IF EXISTS {db_name} WITH (FORCE)")
    text = seen.decode(errors="replace")
    written = (tmp_path / "first-run.txt").read_text()
    token = next(line.split(": ", 1)[1] for line in written.splitlines() if "API token:" in line)
    assert token in text
    assert "user admin, password " in text
