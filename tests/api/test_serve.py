"""``manage.py serve``: the first start a newcomer sees, and its loops."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import pytest

from queenadmin.plumbing.files import create_private_file
from tests.conftest import ROOT, _admin_psql, free_port, requires_postgres, run_server

pytestmark = pytest.mark.live


def test_first_start_prints_working_credentials_once():
    """The first start writes the admin's password and an admin token into
    first-run.txt (the log only says where); they work, and the file is
    removed once the admin logs in. A start that finds the file although
    the admin has logged in (left by an older version, or on a replica that
    did not see the login) removes it, and prints no credentials."""
    with run_server(args=("--bootstrap",)) as server:
        first = server.log()
        notes = Path(server.env["QUEENADMIN_DATA_DIR"]) / "first-run.txt"
        # The log is no terminal: it says where the credentials are, not what.
        assert (
            f"read them in {notes} (readable by you only; removed once admin logs in or the token is revoked)" in first
        )
        written = notes.read_text()
        password = re.search(r"user admin, password (\S+)\)", written).group(1)
        token = re.search(r"API token: (qa_\S+)", written).group(1)
        assert password not in first
        assert token not in first
        api = httpx.post(
            f"{server.url}/api/v1/kv",
            json={"operations": [{"op": "put", "ns": "demo", "key": "hello", "value": 1, "forever": True}]},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert api.json()["results"][0]["applied"] is True
        assert notes.exists()
        with httpx.Client(base_url=server.url, follow_redirects=True) as browser:
            page = browser.get("/admin/login/")
            csrf = browser.cookies["csrftoken"]
            assert page.status_code == 200
            logged_in = browser.post(
                "/admin/login/?next=/",
                data={"username": "admin", "password": password, "csrfmiddlewaretoken": csrf},
                headers={"Referer": f"{server.url}/admin/login/"},
            )
            assert logged_in.status_code == 200
            assert "Server clock" in logged_in.text  # the overview
            assert browser.get("/static/queenadmin/queenadmin.css").status_code == 200
            assert browser.get("/static/queenadmin/queues.css").status_code == 200
        assert not notes.exists()
        # As an older version left it.
        create_private_file(notes, written)
        # A second start on the same data prints no new credentials.
        same = {"QUEENADMIN_DATA_DIR": server.env["QUEENADMIN_DATA_DIR"]}
        if "DATABASE_URL" in server.env:
            same["DATABASE_URL"] = server.env["DATABASE_URL"]
        with run_server(extra_env=same, args=("--bootstrap",)) as again:
            log = again.log()
            assert f"removed {notes} (admin logged in)" in log
            assert not notes.exists()
            assert "API token:" not in log
            assert "were printed on first start" not in log


def test_the_reaper_loop_removes_expired_rows():
    with run_server(extra_env={"QUEENADMIN_REAPER_INTERVAL_SECONDS": "0.2"}) as server:
        headers = {"Authorization": f"Bearer {server.token}"}
        httpx.post(
            f"{server.url}/api/v1/kv",
            json={"operations": [{"op": "put", "ns": "reap", "key": "k", "value": 1, "ttlSeconds": 1}]},
            headers=headers,
        )
        listing = {"namespace": "reap", "includeExpired": True}
        assert (
            len(httpx.post(f"{server.url}/api/v1/resources/kv/list", json=listing, headers=headers).json()["rows"]) == 1
        )
        deadline = time.monotonic() + 10
        rows = [1]
        while rows and time.monotonic() < deadline:
            time.sleep(0.2)
            rows = httpx.post(f"{server.url}/api/v1/resources/kv/list", json=listing, headers=headers).json()["rows"]
        assert rows == []


@requires_postgres
def test_several_workers_serve_one_store():
    """``serve --workers 2`` on PostgreSQL: every call lands in the one store."""
    with run_server(workers=2) as server:
        headers = {"Authorization": f"Bearer {server.token}"}
        versions = []
        with httpx.Client(base_url=server.url, headers=headers) as client:
            for i in range(40):
                # A fresh connection per call: the kernel hands each to either process.
                response = httpx.post(
                    f"{server.url}/api/v1/kv",
                    json={"operations": [{"op": "incr", "ns": "workers", "key": "n", "delta": 1, "forever": True}]},
                    headers=headers,
                )
                assert response.status_code == 200
                result = response.json()["results"][0]
                assert result["value"] == i + 1
                versions.append(result["version"])
            assert versions == sorted(versions)
            assert client.get("/api/v1/kv/workers/n").json()["value"] == 40


@requires_postgres
def test_replicas_starting_together_on_an_empty_database_all_come_up():
    """Three ``serve`` processes at once: migrations run one at a time."""
    db_name = f"qa_replicas_{secrets.token_hex(3)}"
    _admin_psql(f"CREATE DATABASE {db_name}")
    base = os.environ["DATABASE_URL"].rsplit("/", 1)[0]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["DATABASE_URL"] = f"{base}/{db_name}"
    env.setdefault("DJANGO_SECRET_KEY", "live-tests-shared-secret-key")
    ports = [free_port() for _ in range(3)]
    stack = contextlib.ExitStack()
    logs = [stack.enter_context(tempfile.TemporaryFile()) for _ in ports]  # noqa: SIM115 (the stack closes them)
    procs = [
        subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        for port, log in zip(ports, logs, strict=True)
    ]
    try:
        deadline = time.monotonic() + 60
        up: set[int] = set()
        while len(up) < len(ports) and time.monotonic() < deadline:
            for port, proc, log in zip(ports, procs, logs, strict=True):
                if proc.poll() is not None:
                    log.seek(0)
                    pytest.fail(f"a replica exited:\n{log.read().decode(errors='replace')}")
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                        up.add(port)
                except httpx.HTTPError:
                    pass
            time.sleep(0.2)
        assert up == set(ports)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=15)
        stack.close()
        _admin_psql(f"DROP DATABASE IF EXISTS {db_name} WITH (FORCE)")


def test_a_starting_server_refuses_connections_until_a_worker_can_answer(tmp_path):
    """While ``serve --workers 2`` starts (held by tests/startgate with the app
    imported, before its lifespan runs), its port refuses connections: none
    is accepted that no worker could answer yet, so a load balancer tries
    another replica at once instead of hanging. Once the startup goes on,
    ``/health`` answers. The supervisor used to listen before its workers
    had loaded the app, and connections waited seconds for an answer (one
    process on SQLite: it never listened early)."""
    gate = tmp_path / "gate"
    gate.mkdir()
    seen: list[str] = []
    done = threading.Event()

    def while_held() -> None:
        try:
            while not done.is_set():
                held = sorted(gate.glob("held-*"))
                if held:
                    port = int(held[0].read_text())
                    with socket.socket() as probe:
                        try:
                            probe.connect(("127.0.0.1", port))
                            seen.append("accepted")
                        except ConnectionRefusedError:
                            seen.append("refused")
                    return
                time.sleep(0.02)
        finally:
            (gate / "open").touch()

    watcher = threading.Thread(target=while_held, daemon=True)
    watcher.start()
    env = {"PYTHONPATH": str(ROOT / "tests" / "startgate"), "QA_START_GATE": str(gate)}
    try:
        with run_server(extra_env=env, workers=2) as server:
            watcher.join()
            assert seen == ["refused"]
            assert httpx.get(f"{server.url}/health").json() == {"status": "ok"}
            assert server.log().count("serving on ") == 1
    finally:
        done.set()
