"""An acknowledged KV write survives the server's sudden death.

A live ``serve`` under concurrent lone puts (which PostgreSQL's store
commits in groups, ``domain/kv/group.py``) is killed with SIGKILL: every
put that was answered with a version must then be in the database at that
version or a later one. An answer given before its commit would be lost
with the killed server's open transaction. The keys' history, written in
the same statements, agrees with what is stored.
"""

from __future__ import annotations

import contextlib
import random
import signal
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg

from tests.conftest import IS_POSTGRES, SQLITE_FILE, run_server

CLIENTS = 16
KEYS_PER_CLIENT = 4


def _client(url: str, token: str, n: int, stop: threading.Event, acked: dict[str, int], odd: list[Any]) -> None:
    rng = random.Random(n)
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=f"{url}/api/v1", headers=headers, timeout=10) as client:
        while not stop.is_set():
            key = f"c{n}-{rng.randrange(KEYS_PER_CLIENT)}"
            op = {"op": "put", "ns": "kill", "key": key, "value": {"n": n}, "forever": True}
            try:
                answer = client.post("/kv", json={"operations": [op]})
            except httpx.HTTPError:
                return  # the server is gone: this put was never acknowledged
            if answer.status_code != 200:
                return
            result = answer.json()["results"][0]
            # One client per key, so its answers rise: keep the last.
            if not result["applied"] or result["version"] <= acked.get(key, 0):
                odd.append(result)
            acked[key] = result["version"]


def _rows(env: dict[str, str], sql: str) -> list[Any]:
    if IS_POSTGRES:
        with psycopg.connect(env["DATABASE_URL"]) as conn:
            return conn.execute(sql).fetchall()
    path = Path(env["QUEENADMIN_DATA_DIR"]) / SQLITE_FILE
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return conn.execute(sql).fetchall()


def _stored(env: dict[str, str]) -> dict[str, int]:
    rows = _rows(env, "SELECT key, version FROM queenadmin_kventry WHERE namespace = 'kill'")
    return {key: int(version) for key, version in rows}


def _kept(env: dict[str, str]) -> dict[str, set[int]]:
    """Each key's versions in its history (issue 41)."""
    kept: dict[str, set[int]] = {}
    for key, version in _rows(env, "SELECT key, version FROM queenadmin_kvversion WHERE namespace = 'kill'"):
        kept.setdefault(key, set()).add(int(version))
    return kept


def test_kill_9_under_concurrent_puts_loses_no_acknowledged_write():
    """SIGKILL mid-load: each acknowledged put is stored at its version or later."""
    with run_server() as server:
        stop = threading.Event()
        acked: list[dict[str, Any]] = [{} for _ in range(CLIENTS)]
        odd: list[Any] = []
        clients = [
            threading.Thread(target=_client, args=(server.url, server.token, n, stop, acked[n], odd))
            for n in range(CLIENTS)
        ]
        for thread in clients:
            thread.start()
        # Enough puts answered that the load is on, then death at a moment
        # no write chose.
        deadline = time.monotonic() + 60
        while sum(len(a) for a in acked) < CLIENTS * KEYS_PER_CLIENT // 2:
            assert time.monotonic() < deadline, server.log()
            time.sleep(0.01)
        time.sleep(random.uniform(0.3, 0.8))
        server.process.send_signal(signal.SIGKILL)
        server.process.wait()
        stop.set()
        for thread in clients:
            thread.join(timeout=30)
        answered = {key: version for a in acked for key, version in a.items()}
        stored = _stored(server.env)
        kept = _kept(server.env)
    assert odd == []
    assert len(answered) >= CLIENTS * KEYS_PER_CLIENT // 2
    lost = {key: (version, stored.get(key)) for key, version in answered.items() if stored.get(key, 0) < version}
    assert lost == {}
    # History and state agree: each key's newest kept version is its stored
    # one, and every acknowledged version is kept (written in its statement).
    assert {key: max(versions) for key, versions in kept.items()} == stored
    assert {key: version for key, version in answered.items() if version not in kept.get(key, set())} == {}
