"""Private servers for the tests that load, restart or stop them (issue 25).

The PostgreSQL on 127.0.0.1:5432 and the Redis on 6379 are shared with
other test runs, so a test that restarts PostgreSQL, stops Redis or sets
``max_connections`` starts its own: ``PrivatePostgres`` (``initdb`` and
``pg_ctl`` in a temp directory, on a free port), ``PrivateBouncer``
(``.ci/pgbouncer`` in front of it) and ``PrivateRedis``. ``Replicas``
starts several ``manage.py serve`` on one database, all at once.

Each is a context manager that stops what it started, also when the test
fails. ``bench/replicas.py`` uses them too.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psycopg

from tests.conftest import ROOT, free_port

#: Where Debian puts each PostgreSQL version's server binaries.
PG_BINARIES = Path("/usr/lib/postgresql")


def _missing(what: str, hint: str) -> RuntimeError:
    return RuntimeError(
        f"{what} is not installed here ({hint}); the tests of tests/pooler that start their own need it"
    )


def pg_bindir() -> Path:
    """The newest installed PostgreSQL's bin directory (``initdb``, ``pg_ctl``)."""
    found = sorted(
        (p.parent for p in PG_BINARIES.glob("*/bin/initdb")),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    if not found:
        raise _missing(f"PostgreSQL's server ({PG_BINARIES}/<version>/bin/initdb)", "apt-get install postgresql")
    return found[-1]


def _as_postgres() -> list[str]:
    """initdb and pg_ctl refuse root: run them as ``postgres`` then."""
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


def _hand_to_postgres(path: Path) -> None:
    if os.geteuid() == 0:
        shutil.chown(path, "postgres")


@dataclass
class PrivatePostgres:
    """A PostgreSQL cluster of this test's own, trust auth on 127.0.0.1."""

    root: Path
    port: int
    bindir: Path
    #: Settings written to postgresql.conf (a restart keeps them).
    settings: dict[str, str] = field(default_factory=dict)

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log_path(self) -> Path:
        return self.root / "postgres.log"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def _pg_ctl(self, *args: str) -> None:
        subprocess.run(
            [*_as_postgres(), str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.log_path), "-w", *args],
            check=True,
            capture_output=True,
            timeout=60,
        )

    def init(self) -> None:
        subprocess.run(
            [
                *_as_postgres(),
                str(self.bindir / "initdb"),
                "-D",
                str(self.data),
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--no-sync",
                "--no-instructions",
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        conf = {
            "port": str(self.port),
            "listen_addresses": "'127.0.0.1'",
            # The socket beside the data, not in the shared /var/run/postgresql.
            "unix_socket_directories": f"'{self.root}'",
            **self.settings,
        }
        with (self.data / "postgresql.conf").open("a") as out:
            out.write("\n# tests/pooler/cluster.py\n")
            out.writelines(f"{name} = {value}\n" for name, value in conf.items())

    def start(self) -> None:
        self._pg_ctl("start")

    def restart(self) -> None:
        """A fast (clean) shutdown and a start; returns once it accepts connections."""
        self._pg_ctl("-m", "fast", "restart")

    def stop(self) -> None:
        with contextlib.suppress(subprocess.SubprocessError):
            self._pg_ctl("-m", "immediate", "stop")

    def execute(self, sql: str, database: str = "postgres") -> list[tuple[object, ...]]:
        with psycopg.connect(self.url(database), autocommit=True) as conn:
            cur = conn.execute(sql)  # type: ignore[arg-type]
            return cur.fetchall() if cur.description else []


@contextlib.contextmanager
def private_postgres(*, max_connections: int = 100, durable: bool = False) -> Iterator[PrivatePostgres]:
    """A fresh cluster on a free port. ``durable=False`` turns fsync off:
    nothing here survives a crash of the machine, and nothing needs to (a
    fast restart is a clean shutdown, which writes everything out)."""
    root = Path(tempfile.mkdtemp(prefix="qa-pg-"))
    _hand_to_postgres(root)
    settings = {"max_connections": str(max_connections), "shared_buffers": "'64MB'"}
    if not durable:
        settings.update({"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"})
    pg = PrivatePostgres(root, free_port(), pg_bindir(), settings)
    try:
        pg.init()
        pg.start()
        yield pg
    finally:
        pg.stop()
        shutil.rmtree(root, ignore_errors=True)


@dataclass
class PrivateBouncer:
    """``.ci/pgbouncer`` (transaction pooling, ``default_pool_size`` 20) in front of a ``PrivatePostgres``."""

    root: Path
    port: int

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def show(self, what: str) -> list[dict[str, object]]:
        """``SHOW <what>`` on PgBouncer's admin console, as dicts."""
        with psycopg.connect(self.url("pgbouncer"), autocommit=True, prepare_threshold=None) as conn:
            cur = conn.execute(f"SHOW {what}", prepare=False)  # type: ignore[arg-type]
            names = [c.name for c in cur.description or []]
            return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


@contextlib.contextmanager
def private_bouncer(pg: PrivatePostgres) -> Iterator[PrivateBouncer]:
    script = ROOT / ".ci" / "pgbouncer"
    if not (shutil.which("pgbouncer") or Path("/usr/sbin/pgbouncer").exists()):
        raise _missing("pgbouncer", ".ci/install-system installs it")
    root = Path(tempfile.mkdtemp(prefix="qa-bouncer-"))
    env = {**os.environ, "PGBOUNCER_UPSTREAM_PORT": str(pg.port)}
    try:
        started = subprocess.run(
            [str(script), "start", str(root), str(free_port())], env=env, capture_output=True, text=True, timeout=30
        )
        if started.returncode != 0:
            raise RuntimeError(f".ci/pgbouncer start failed: {started.stderr}")
        yield PrivateBouncer(root, int(started.stdout.strip().splitlines()[-1]))
    finally:
        subprocess.run([str(script), "stop", str(root)], capture_output=True, timeout=30)
        shutil.rmtree(root, ignore_errors=True)


@dataclass
class PrivateRedis:
    """A ``redis-server`` without persistence on a free port; stop and start it at will."""

    root: Path
    port: int
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise _missing("redis-server", "apt-get install redis-server")
        log = (self.root / "redis.log").open("ab")
        self.process = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.root),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + 10
        while not self.answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("redis-server did not start:\n" + (self.root / "redis.log").read_text())
            time.sleep(0.02)

    def answers(self) -> bool:
        import redis

        client = redis.Redis(host="127.0.0.1", port=self.port, socket_connect_timeout=0.5, socket_timeout=0.5)
        try:
            return bool(client.ping())
        except (redis.RedisError, OSError):
            return False
        finally:
            client.close()

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None


@contextlib.contextmanager
def private_redis() -> Iterator[PrivateRedis]:
    root = Path(tempfile.mkdtemp(prefix="qa-redis-"))
    server = PrivateRedis(root, free_port())
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


#: The one DJANGO_SECRET_KEY every replica of a test shares.
SECRET_KEY = "pooler-tests-shared-secret-key"


def _base_env() -> dict[str, str]:
    """This process's environment without what points a server elsewhere."""
    dropped = ("DATABASE_", "QUEENADMIN_", "REDIS_URL", "PYTEST", "DJANGO_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
    env["DJANGO_SECRET_KEY"] = SECRET_KEY
    return env


def migrated_database(pg: PrivatePostgres, name: str = "queen", *, then: str = "") -> str:
    """Create and migrate ``name`` on ``pg`` directly, run the Python code
    ``then`` there (in the same process: one Django start less); return an
    admin-scope API token."""
    pg.execute(f"CREATE DATABASE {name}")
    code = (
        "import django; django.setup()\n"
        "from django.core.management import call_command\n"
        "call_command('migrate', interactive=False, verbosity=0)\n"
        f"{then}\n"
        "from queenadmin.domain import tokens\n"
        "from queenadmin.models import TokenScope\n"
        "print(tokens.token_create(by=tokens.HOST, name='pooler-tests', scope=TokenScope.ADMIN))\n"
    )
    env = {**_base_env(), "DATABASE_URL": pg.url(name), "DJANGO_SETTINGS_MODULE": "queenadmin.settings"}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"migrate failed:\n{done.stderr}")
    return done.stdout.strip().splitlines()[-1]


def pooled_env(
    pg: PrivatePostgres, bouncer: PrivateBouncer, database: str = "queen", *, listen: bool = True
) -> dict[str, str]:
    """A replica's settings behind ``bouncer`` in transaction pooling, with
    ``DATABASE_LISTEN_URL`` straight at ``pg`` unless ``listen=False``."""
    env = {"DATABASE_URL": bouncer.url(database), "QUEENADMIN_DB_POOLER": "transaction"}
    if listen:
        env["DATABASE_LISTEN_URL"] = pg.url(database)
    return env


@dataclass
class Replica:
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@contextlib.contextmanager
def replicas(count: int, env: dict[str, str], *, workers: int = 2) -> Iterator[list[Replica]]:
    """``count`` ``manage.py serve --workers N --no-migrate`` on one
    (migrated) database, started together; returns once all answer ``/health``."""
    root = Path(tempfile.mkdtemp(prefix="qa-replicas-"))
    started: list[Replica] = []
    try:
        for n in range(count):
            folder = root / f"replica-{n}"
            folder.mkdir()
            port = free_port()
            log_path = folder / "serve.log"
            with log_path.open("wb") as log:
                process = subprocess.Popen(
                    [
                        sys.executable,
                        "manage.py",
                        "serve",
                        "--no-migrate",
                        "--port",
                        str(port),
                        "--workers",
                        str(workers),
                    ],
                    cwd=ROOT,
                    env={**_base_env(), "QUEENADMIN_DATA_DIR": str(folder), **env},
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            started.append(Replica(f"http://127.0.0.1:{port}", process, log_path))
        deadline = time.monotonic() + 90
        waiting = list(started)
        while waiting:
            for replica in list(waiting):
                if replica.process.poll() is not None:
                    raise RuntimeError("serve exited:\n" + replica.log())
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{replica.url}/health", timeout=1).status_code == 200:
                        waiting.remove(replica)
            if time.monotonic() > deadline:
                raise RuntimeError("serve did not answer /health:\n" + waiting[0].log())
            time.sleep(0.1)
        yield started
    finally:
        for replica in started:
            replica.process.terminate()
        for replica in started:
            try:
                replica.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                replica.process.kill()
                replica.process.wait()
        shutil.rmtree(root, ignore_errors=True)
