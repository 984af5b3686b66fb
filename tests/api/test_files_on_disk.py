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

from queenadmin.domain import firstrun, tokens
from queenadmin.models import TokenScope
from queenadmin.plumbing import files
from tests.conftest import IS_POSTGRES, ROOT, migrated_database, requires_postgres, run_server

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
    existing = {"QUEENADMIN_DATA_DIR": str(data)}
    # A migrated database (on SQLite, its file in the folder), so that the
    # start migrates nothing.
    with migrated_database(existing), run_server(extra_env=existing):
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
    import select
    import time

    from tests.conftest import free_port

    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    env["QUEENADMIN_DATA_DIR"] = str(tmp_path)
    if IS_POSTGRES:
        env["DJANGO_SECRET_KEY"] = "tty-test-key"
    master, slave = pty.openpty()
    # A migrated database with no account yet: the first start's
    # credentials are what is tested, not its migrations.
    with migrated_database(env):
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
    text = seen.decode(errors="replace")
    written = (tmp_path / "first-run.txt").read_text()
    token = next(line.split(": ", 1)[1] for line in written.splitlines() if "API token:" in line)
    assert token in text
    assert "user admin, password " in text


@pytest.fixture
def first_run_notes(tmp_path, settings, django_user_model):
    """first-run.txt in a data folder of its own, for an admin account and an
    admin token made as ``serve --bootstrap`` makes them; returns its path
    and the password."""
    settings.DATA_DIR = tmp_path
    django_user_model.objects.create_superuser("admin", "", "first-password")
    token = tokens.token_create(by=tokens.HOST, name="local-first", scope=TokenScope.ADMIN)
    notes = files.first_run_notes_write(
        tmp_path, base_url="http://127.0.0.1:8000", username="admin", password="first-password", token=token
    )
    assert notes.exists()
    return notes


@pytest.mark.django_db
def test_a_login_of_the_first_admin_removes_the_first_run_notes(first_run_notes, client, django_user_model):
    """The admin's login on the dashboard removes first-run.txt at once; a
    wrong password, or another account's login, leaves it."""
    django_user_model.objects.create_user("otto", "", "otto-password", is_staff=True)
    assert client.post("/login/", {"username": "otto", "password": "otto-password"}).status_code == 302
    client.logout()
    assert client.post("/login/", {"username": "admin", "password": "wrong"}).status_code == 200
    assert first_run_notes.exists()
    assert client.post("/login/", {"username": "admin", "password": "first-password"}).status_code == 302
    assert not first_run_notes.exists()


@pytest.mark.django_db
def test_revoking_the_first_token_removes_the_first_run_notes(first_run_notes, django_capture_on_commit_callbacks):
    """Revoking the token of first-run.txt removes the file once the
    revocation commits; revoking another token leaves it."""
    tokens.token_create(by=tokens.HOST, name="other", scope=TokenScope.WRITE)
    with django_capture_on_commit_callbacks(execute=True):
        tokens.token_revoke(name="other")
    assert first_run_notes.exists()
    with django_capture_on_commit_callbacks(execute=True):
        tokens.token_revoke(name="local-first")
    assert not first_run_notes.exists()


@pytest.mark.django_db
def test_a_start_removes_the_first_run_notes_no_longer_needed(
    first_run_notes, settings, tmp_path_factory, django_capture_on_commit_callbacks, django_user_model, client
):
    """A replica that did not see the revocation (another data folder) keeps
    its notes until it starts: then ``first_run_settle``, which ``serve``
    runs at every start, removes them. So it does for an admin who logged
    in elsewhere. Notes still needed are kept."""
    data_dir = settings.DATA_DIR
    assert firstrun.first_run_settle() is None
    assert first_run_notes.exists()
    other_replica = tmp_path_factory.mktemp("other-replica")
    settings.DATA_DIR = other_replica
    with django_capture_on_commit_callbacks(execute=True):
        tokens.token_revoke(name="local-first")
    assert first_run_notes.exists()
    settings.DATA_DIR = data_dir
    assert firstrun.first_run_settle() == "token revoked"
    assert not first_run_notes.exists()

    token = tokens.token_create(by=tokens.HOST, name="local-second", scope=TokenScope.ADMIN)
    files.first_run_notes_write(data_dir, base_url="http://h", username="admin", password="p", token=token)
    settings.DATA_DIR = other_replica
    client.force_login(django_user_model.objects.get(username="admin"))
    settings.DATA_DIR = data_dir
    assert first_run_notes.exists()
    assert firstrun.first_run_settle() == "admin logged in"
    assert not first_run_notes.exists()


@pytest.mark.django_db
def test_first_run_notes_of_another_store_are_left_alone(tmp_path, settings, django_user_model, client):
    """Notes whose token this database never made (a developer's data/ beside
    the test database, say) stay through a login of an account of their
    name, a revocation and a start."""
    settings.DATA_DIR = tmp_path
    notes = files.first_run_notes_write(tmp_path, base_url="http://h", username="admin", password="p", token="qa_x")
    client.force_login(django_user_model.objects.create_superuser("admin", "", "pw"))
    tokens.token_create(by=tokens.HOST, name="any", scope=TokenScope.WRITE)
    tokens.token_revoke(name="any")
    assert firstrun.first_run_settle() is None
    assert notes.exists()
