"""The benchmarks' ``--pooler``: the same load directly and through PgBouncer.

Issue 25 asks for the KV, lock and timer figures through a transaction
pooler side by side with PostgreSQL directly, in one run. ``bouncer()``
starts a PgBouncer of our own in transaction pooling (``.ci/pgbouncer``, the
one CI's pooler leg uses) in front of ``DATABASE_URL``'s server, and
``pooled_server()`` starts ``manage.py serve`` on a scratch database through
it, with ``QUEENADMIN_DB_POOLER=transaction`` and, unless told otherwise,
``DATABASE_LISTEN_URL`` at the database directly (as the README's production
screen sets it up).

Import this module before ``tests.conftest``: it points
``QUEENADMIN_TEST_DIRECT_URL`` at PostgreSQL itself, so that the scratch
databases are made and dropped directly, never through the pooler.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"


def direct_url() -> str:
    return os.environ.get("DATABASE_URL", "") or DEFAULT_URL


def prepare() -> None:
    """Databases are made and dropped directly (tests/conftest.py reads this at import)."""
    if "tests.conftest" in sys.modules:
        raise RuntimeError("import bench/pooler.py before tests.conftest")
    os.environ.setdefault("DATABASE_URL", DEFAULT_URL)
    os.environ["QUEENADMIN_TEST_DIRECT_URL"] = os.environ["DATABASE_URL"]


@dataclass(frozen=True)
class Bouncer:
    #: ``postgresql://postgres@127.0.0.1:PORT``, without a database.
    base: str
    pid: int
    log_path: Path


@contextlib.contextmanager
def bouncer() -> Iterator[Bouncer]:
    """A PgBouncer in transaction pooling in front of 127.0.0.1:5432, stopped at the end."""
    folder = Path(tempfile.mkdtemp(prefix="qa-bench-bouncer-"))
    script = str(ROOT / ".ci" / "pgbouncer")
    port = subprocess.run([script, "start", str(folder)], check=True, capture_output=True, text=True).stdout.strip()
    try:
        pid = int((folder / "pgbouncer.pid").read_text())
        yield Bouncer(f"postgresql://postgres@127.0.0.1:{port}", pid, folder / "pgbouncer.log")
    finally:
        subprocess.run([script, "stop", str(folder)], check=False)
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def pooled_server(
    through: Bouncer, workers: int = 1, extra_env: dict[str, str] | None = None, *, listen: bool = True
) -> Iterator[Any]:
    """``run_server`` on a copy of the session's template, through ``through``.

    ``listen``: ``DATABASE_LISTEN_URL`` at the database directly (pops and
    timers woken by NOTIFY); without it, they poll every
    ``QUEENADMIN_DB_POOLER_POLL_SECONDS``.
    """
    from tests import conftest

    template = conftest._live_template()
    name = f"qa_bench_{os.getpid()}_{secrets.token_hex(3)}"
    conftest._admin_psql(f"CREATE DATABASE {name} TEMPLATE {template.database}")
    env = {"DATABASE_URL": f"{through.base}/{name}", "QUEENADMIN_DB_POOLER": "transaction"}
    if listen:
        env["DATABASE_LISTEN_URL"] = f"{direct_url().rsplit('/', 1)[0]}/{name}"
    env.update(extra_env or {})
    try:
        with conftest.run_server(extra_env=env, workers=workers) as live:
            yield live
    finally:
        conftest._drop_database(name)
