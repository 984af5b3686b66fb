"""Timer speed (issue 8): a burst of timers due at one instant, and a steady stream.

Run on demand (not part of CI)::

    .venv/bin/python bench/timers.py --db both

For each database (``--db postgres``: a scratch database on ``DATABASE_URL``'s
server, default 127.0.0.1:5432; ``--db sqlite``: serve with no
``DATABASE_URL``, SQLite in its data dir) it starts the real
``manage.py serve`` with ``tests.conftest.run_server`` (its timer loop
included), makes an API token, and measures over HTTP:

- ``burst``: ``--count`` timers scheduled through ``POST /api/v1/timers``
  (256 ops a call, ``--clients`` connections), each call's ``delayMs``
  computed from one common target so they all come due at the same instant
  (``deliverAt`` = server now + ``delayMs``). From that instant (the
  earliest ``deliverAt`` returned) it polls ``GET /api/v1/timers/{q}?mode=count``
  every 50 ms until 0: fires/s = count / (time of the first 0 - instant).
  The fire deletes the timer in the transaction that appends its message,
  so 0 pending means every message is in the log; the queue's total from
  ``GET /api/v1/resources/queues/{q}`` is checked against ``--count``.
- ``push``, the baseline, side by side on the same server: the same number
  of messages through ``POST /api/v1/push``, 256 a call, same clients, same
  payloads, a transactionId each. fires/s over push msgs/s is the ratio.
- ``steady``: ``--rate`` timers/s for ``--seconds``, due evenly spaced
  ``--delay-ms`` after they are scheduled (one call every 100 ms with the
  timers due in the matching 100 ms); ``--consumers`` connections long-poll
  ``GET /api/v1/pop/queue/{q}?wait=true&batch=100&autoAck=true`` and stamp
  each message's arrival. Lateness = arrival - the ``deliverAt`` its schedule
  answer gave (matched by ``messageId`` = the popped ``id``); it splits into
  ``fire`` (the message's ``createdAt``, the fire step's clock, minus
  ``deliverAt``) and ``pop`` (arrival - ``createdAt``).
- ``push->pop``, the steady baseline: plain pushes at the same rate and the
  same consumers; latency = arrival - the moment the push call was sent.

``--pooler`` (issue 25) runs PostgreSQL directly and, in the same run, two
more rows through a PgBouncer in transaction pooling (bench/pooler.py):
``pgbouncer`` with ``DATABASE_LISTEN_URL`` at the database directly (pops
and the timer loop woken by NOTIFY), and ``pgbouncer-poll`` without it (they
poll every ``QUEENADMIN_DB_POOLER_POLL_SECONDS``).

It also reports the CPU used by the serve process tree and by the scratch
database's PostgreSQL backends during the burst and the steady phase, and
the 1-minute load average at the start of each phase (the box is shared).
Every phase is bounded in time; the scratch database and the server are
removed at the end, also on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import kv  # bench/kv.py, for its server CPU meter: bench/ is sys.path[0] when a script here runs

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
BATCH = 256
PAD = "x" * 60
#: A schedule call sent less than this before the target is a failed run:
#: its timers would start firing before the rest are scheduled.
MIN_LEAD_S = 1.0


def payload(n: int) -> dict[str, Any]:
    return {"n": n, "pad": PAD}


def b64(n: int) -> str:
    return base64.b64encode(json.dumps(payload(n)).encode()).decode()


def epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


# --------------------------------------------------------------------------
# HTTP


class Client:
    """One keep-alive connection."""

    def __init__(self, url: str, token: str, timeout: float = 120) -> None:
        parts = urlsplit(url)
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        self.conn.request(method, path, body=data, headers=self.headers)
        response = self.conn.getresponse()
        raw = response.read()
        return response.status, (json.loads(raw) if raw else None)

    def close(self) -> None:
        self.conn.close()


def run_parallel(count: int, work: Callable[[int], None]) -> None:
    errors: list[BaseException] = []

    def wrapped(i: int) -> None:
        try:
            work(i)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=wrapped, args=(i,), daemon=True) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def configure(client: Client, queue: str) -> None:
    status, body = client.call("POST", "/api/v1/configure", {"queue": queue})
    assert status == 200, (status, body)


def pending(client: Client, queue: str) -> int:
    status, body = client.call("GET", f"/api/v1/timers/{quote(queue, safe='')}?mode=count")
    assert status == 200, (status, body)
    return int(body["count"])


def queue_total(client: Client, queue: str) -> int:
    status, body = client.call("GET", f"/api/v1/resources/queues/{quote(queue, safe='')}")
    assert status == 200, (status, body)
    return int(body["totals"]["total"])


def schedule_ops(queue: str, first: int, n: int) -> list[dict[str, Any]]:
    return [
        {"op": "schedule", "queue": queue, "timerKey": f"t{i}", "txn": str(uuid.uuid4()), "payload": b64(i)}
        for i in range(first, first + n)
    ]


def schedule(client: Client, ops: list[dict[str, Any]], delays_ms: list[int]) -> list[dict[str, Any]]:
    for op, delay in zip(ops, delays_ms, strict=True):
        op["delayMs"] = delay
    status, body = client.call("POST", "/api/v1/timers", {"operations": ops})
    assert status == 200, (status, str(body)[:300])
    results: list[dict[str, Any]] = body["results"]
    assert all(r["status"] == "scheduled" for r in results), results[:1]
    return results


def push_items(queue: str, first: int, n: int) -> list[dict[str, Any]]:
    return [
        {"queue": queue, "partition": "Default", "payload": payload(i), "transactionId": str(uuid.uuid4())}
        for i in range(first, first + n)
    ]


def push(client: Client, items: list[dict[str, Any]]) -> None:
    status, body = client.call("POST", "/api/v1/push", {"items": items})
    assert status == 201, (status, str(body)[:300])
    assert all(r["status"] == "queued" for r in body), body[:1]


# --------------------------------------------------------------------------
# CPU of the server tree and of the scratch database's backends


def _stat(pid: str) -> tuple[int, float]:
    """(parent pid, CPU seconds) of one process: bench/kv.py's reader."""
    ticks: tuple[int, float] = kv._proc_ticks(pid)
    return ticks


class CpuMeter:
    """CPU seconds per process of the serve tree and of our PostgreSQL backends."""

    def __init__(self, server_pid: int, db_name: str | None, label: str) -> None:
        self.server_pid = server_pid
        self.label = label
        self.db_name = db_name.encode() if db_name else None

    def snapshot(self) -> tuple[dict[int, float], dict[int, float]]:
        parents: dict[int, int] = {}
        cpu: dict[int, float] = {}
        pg: dict[int, float] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            ppid, seconds = _stat(entry)
            parents[int(entry)], cpu[int(entry)] = ppid, seconds
            if self.db_name is None:
                continue
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if cmdline.startswith(b"postgres: ") and self.db_name in cmdline:
                pg[int(entry)] = seconds
        server = {}
        for pid, seconds in cpu.items():
            walk = pid
            while walk > 1 and walk != self.server_pid:
                walk = parents.get(walk, -1)
            if walk == self.server_pid:
                server[pid] = seconds
        return server, pg

    @staticmethod
    def grown(before: dict[int, float], after: dict[int, float]) -> float:
        return sum(max(0.0, s - before.get(pid, 0.0)) for pid, s in after.items())


#: ``--py-spy DIR``: record the serve process during each measured phase.
PROFILE_DIR: Path | None = None


@contextlib.contextmanager
def profiled(pid: int, name: str) -> Iterator[None]:
    """``py-spy record`` of ``pid`` (all threads, raw collapsed stacks) while inside."""
    if PROFILE_DIR is None:
        yield
        return
    spy = shutil.which("py-spy", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    if spy is None:
        sys.exit("--py-spy needs py-spy on PATH (pip install py-spy)")
    out = PROFILE_DIR / f"{name}.txt"
    process = subprocess.Popen(
        [spy, "record", "-p", str(pid), "-r", "200", "-f", "raw", "--threads", "--idle", "-o", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield
    finally:
        process.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def metered(meter: CpuMeter, into: dict[str, float], name: str = "") -> Iterator[None]:
    before = meter.snapshot()
    started = time.monotonic()
    into["load"] = os.getloadavg()[0]
    with profiled(meter.server_pid, name) if name else contextlib.nullcontext():
        yield
    after = meter.snapshot()
    into["load_end"] = os.getloadavg()[0]
    into["wall"] = time.monotonic() - started
    into["srv_cpu"] = CpuMeter.grown(before[0], after[0])
    into["pg_cpu"] = CpuMeter.grown(before[1], after[1])


# --------------------------------------------------------------------------
# (a) burst: --count timers due at one instant


@dataclass
class Burst:
    count: int
    schedule_per_s: float = 0.0
    lead_s: float = 0.0
    spread_ms: float = 0.0
    first_fire_s: float = float("nan")
    fire_s: float = float("nan")
    fires_per_s: float = 0.0
    mid_fires_per_s: float = 0.0
    in_log: int = 0
    error: str = ""
    cpu: dict[str, float] = field(default_factory=dict)


def burst(url: str, token: str, meter: CpuMeter, count: int, clients: int, lead_s: float, timeout: float) -> Burst:
    queue = f"burst-{uuid.uuid4().hex[:6]}"
    out = Burst(count, lead_s=lead_s)
    batches = [(first, min(BATCH, count - first)) for first in range(0, count, BATCH)]
    bodies = [schedule_ops(queue, first, n) for first, n in batches]
    target = time.time() + lead_s
    deliver: list[float] = []
    lock = threading.Lock()
    too_late = threading.Event()

    def work(i: int) -> None:
        client = Client(url, token)
        for ops in bodies[i::clients]:
            delay_ms = round((target - time.time()) * 1000)
            if delay_ms < MIN_LEAD_S * 1000:
                too_late.set()
                return
            results = schedule(client, ops, [delay_ms] * len(ops))
            stamps = [epoch(r["deliverAt"]) for r in results]
            with lock:
                deliver.extend(stamps)
        client.close()

    started = time.perf_counter()
    run_parallel(clients, work)
    out.schedule_per_s = len(deliver) / (time.perf_counter() - started)
    poll = Client(url, token)
    if too_late.is_set():
        out.error = f"scheduling {count} took longer than the lead of {lead_s:.0f} s (raise --lead)"
        # Let what was scheduled fire, so the next phase starts clean.
        end = time.monotonic() + timeout
        while pending(poll, queue) and time.monotonic() < end:
            time.sleep(0.5)
        return out
    instant = min(deliver)
    out.spread_ms = (max(deliver) - instant) * 1000
    time.sleep(max(0.0, instant - time.time() - 0.3))
    samples: list[tuple[float, int]] = []
    with metered(meter, out.cpu, f"{meter.label}-burst"):
        deadline = time.time() + timeout
        while time.time() < deadline:
            left = pending(poll, queue)
            samples.append((time.time(), left))
            if left == 0:
                break
            time.sleep(0.05)
    if samples[-1][1] != 0:
        out.error = f"{samples[-1][1]} timers still pending after {timeout:.0f} s"
        return out
    out.fire_s = samples[-1][0] - instant
    out.fires_per_s = count / out.fire_s
    started_at = next((t for t, left in samples if left < count), samples[-1][0])
    out.first_fire_s = started_at - instant
    # The rate between 10% and 90% fired: the loop's pace without its start.
    lo = next(s for s in samples if s[1] <= count * 0.9)
    hi = next(s for s in samples if s[1] <= count * 0.1)
    if hi[0] > lo[0]:
        out.mid_fires_per_s = (lo[1] - hi[1]) / (hi[0] - lo[0])
    out.in_log = queue_total(poll, queue)
    if out.in_log != count:
        out.error = f"{out.in_log} messages in the log, expected {count}"
    poll.close()
    return out


def push_baseline(url: str, token: str, meter: CpuMeter, count: int, clients: int) -> tuple[float, dict[str, float]]:
    queue = f"push-{uuid.uuid4().hex[:6]}"
    bodies = [push_items(queue, first, min(BATCH, count - first)) for first in range(0, count, BATCH)]

    def work(i: int) -> None:
        client = Client(url, token)
        for items in bodies[i::clients]:
            push(client, items)
        client.close()

    cpu: dict[str, float] = {}
    with metered(meter, cpu, f"{meter.label}-push"):
        run_parallel(clients, work)
    total = queue_total(Client(url, token), queue)
    assert total == count, (total, count)
    return count / cpu["wall"], cpu


# --------------------------------------------------------------------------
# (b) steady: --rate timers/s, lateness to poppable


@dataclass
class Steady:
    sent: int = 0
    received: int = 0
    late_ms: list[float] = field(default_factory=list)
    fire_ms: list[float] = field(default_factory=list)
    pop_ms: list[float] = field(default_factory=list)
    error: str = ""
    cpu: dict[str, float] = field(default_factory=dict)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Consumers:
    """``n`` long-polling consumers stamping each message's arrival by id."""

    def __init__(self, url: str, token: str, queue: str, n: int) -> None:
        self.arrived: dict[str, tuple[float, str]] = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        path = f"/api/v1/pop/queue/{quote(queue, safe='')}?wait=true&batch=100&autoAck=true&timeout=1000"
        self.threads = [threading.Thread(target=self._run, args=(url, token, path), daemon=True) for _ in range(n)]
        for t in self.threads:
            t.start()

    def _run(self, url: str, token: str, path: str) -> None:
        try:
            client = Client(url, token, timeout=30)
            while not self.stop.is_set():
                status, body = client.call("GET", path)
                now = time.time()
                if status == 204:
                    continue
                assert status == 200, (status, body)
                with self.lock:
                    for m in body["messages"]:
                        self.arrived[m["id"]] = (now, m["createdAt"])
            client.close()
        except BaseException as exc:
            self.errors.append(exc)

    def count(self) -> int:
        with self.lock:
            return len(self.arrived)

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=10)


def paced(rate: float, seconds: float, lead_s: float, send: Callable[[list[int], list[float]], None]) -> int:
    """Call ``send(numbers, due_epochs)`` every 100 ms with the timers due
    ``lead_s`` later in the matching 100 ms, evenly spaced at ``rate``/s."""
    total = int(rate * seconds)
    start = time.time()
    tick = 0.1
    sent = 0
    k = 0
    while sent < total:
        wake_at = start + k * tick
        time.sleep(max(0.0, wake_at - time.time()))
        upto = min(total, round((k + 1) * tick * rate))
        numbers = list(range(sent, upto))
        if numbers:
            send(numbers, [start + lead_s + n / rate for n in numbers])
        sent = upto
        k += 1
    return sent


def steady_timers(
    url: str, token: str, meter: CpuMeter, rate: float, seconds: float, delay_ms: int, consumers: int
) -> Steady:
    queue = f"steady-{uuid.uuid4().hex[:6]}"
    out = Steady()
    client = Client(url, token)
    configure(client, queue)
    promised: dict[str, float] = {}
    pool = Consumers(url, token, queue, consumers)

    def send(numbers: list[int], due: list[float]) -> None:
        ops = schedule_ops(queue, numbers[0], len(numbers))
        now = time.time()
        delays = [max(0, round((d - now) * 1000)) for d in due]
        for r in schedule(client, ops, delays):
            promised[r["messageId"]] = epoch(r["deliverAt"])

    try:
        with metered(meter, out.cpu, f"{meter.label}-steady"):
            out.sent = paced(rate, seconds, delay_ms / 1000, send)
            deadline = time.time() + delay_ms / 1000 + 30
            while pool.count() < out.sent and time.time() < deadline and not pool.errors:
                time.sleep(0.05)
    finally:
        pool.close()
    if pool.errors:
        raise pool.errors[0]
    out.received = pool.count()
    for message_id, (arrived, created) in pool.arrived.items():
        deliver_at = promised.get(message_id)
        if deliver_at is None:
            continue
        out.late_ms.append((arrived - deliver_at) * 1000)
        out.fire_ms.append((epoch(created) - deliver_at) * 1000)
        out.pop_ms.append((arrived - epoch(created)) * 1000)
    if out.received != out.sent:
        out.error = f"{out.sent - out.received} of {out.sent} timers not popped within {delay_ms / 1000 + 30:.0f} s"
    early = [x for x in out.fire_ms if x < 0]
    if early:
        out.error += f" {len(early)} fired early (by up to {-min(early):.1f} ms)"
    return out


def steady_pushes(url: str, token: str, meter: CpuMeter, rate: float, seconds: float, consumers: int) -> Steady:
    queue = f"steadypush-{uuid.uuid4().hex[:6]}"
    out = Steady()
    client = Client(url, token)
    configure(client, queue)
    sent_at: dict[str, float] = {}
    pool = Consumers(url, token, queue, consumers)

    def send(numbers: list[int], due: list[float]) -> None:
        items = push_items(queue, numbers[0], len(numbers))
        now = time.time()
        status, body = client.call("POST", "/api/v1/push", {"items": items})
        assert status == 201, (status, body)
        for r in body:
            sent_at[r["message_id"]] = now

    try:
        with metered(meter, out.cpu, f"{meter.label}-steadypush"):
            out.sent = paced(rate, seconds, 0.0, send)
            deadline = time.time() + 30
            while pool.count() < out.sent and time.time() < deadline and not pool.errors:
                time.sleep(0.05)
    finally:
        pool.close()
    if pool.errors:
        raise pool.errors[0]
    out.received = pool.count()
    out.late_ms = [(arrived - sent_at[m]) * 1000 for m, (arrived, _) in pool.arrived.items() if m in sent_at]
    if out.received != out.sent:
        out.error = f"{out.sent - out.received} of {out.sent} pushes not popped within 30 s"
    return out


# --------------------------------------------------------------------------
# Running it all on one database


@dataclass
class Result:
    db: str
    burst: Burst
    push_per_s: float
    push_cpu: dict[str, float]
    steady: Steady | None
    steady_push: Steady | None


#: ``--pooler``: the PgBouncer the ``pgbouncer`` rows run through.
BOUNCER: Any = None
POOLED = ("pgbouncer", "pgbouncer-poll")


@contextlib.contextmanager
def server_on(db: str, workers: int, extra_env: dict[str, str]) -> Iterator[Any]:
    from tests import conftest

    saved = os.environ.get("DATABASE_URL")
    if db in POOLED:
        import pooler

        conftest.IS_POSTGRES = True
        with pooler.pooled_server(BOUNCER, workers, extra_env, listen=db == "pgbouncer") as live:
            yield live
        return
    if db == "postgres":
        base = saved if saved and saved.startswith("postgres") else DEFAULT_URL
        os.environ["DATABASE_URL"] = base
        conftest.IS_POSTGRES = True
    else:
        os.environ.pop("DATABASE_URL", None)
        conftest.IS_POSTGRES = False
    try:
        with conftest.run_server(extra_env=extra_env, workers=workers) as live:
            yield live
    finally:
        # The migrated template (and its token) is this database's: with
        # --db both the next one makes its own (the SQLite run was given the
        # PostgreSQL template's token and answered 401).
        conftest.drop_live_template()
        if saved is None:
            os.environ.pop("DATABASE_URL", None)
        else:
            os.environ["DATABASE_URL"] = saved


def auto_lead(url: str, token: str, count: int, clients: int) -> float:
    """Seconds between the first schedule call and the common due instant:
    twice what ``count`` schedules take at the rate a warm-up measured."""
    queue = f"warm-{uuid.uuid4().hex[:6]}"
    n = min(count, 8 * BATCH)
    bodies = [schedule_ops(queue, first, min(BATCH, n - first)) for first in range(0, n, BATCH)]

    def work(i: int) -> None:
        client = Client(url, token)
        for ops in bodies[i::clients]:
            schedule(client, ops, [500] * len(ops))
        client.close()

    started = time.perf_counter()
    run_parallel(clients, work)
    rate = n / (time.perf_counter() - started)
    client = Client(url, token)
    end = time.monotonic() + 120
    while pending(client, queue) and time.monotonic() < end:
        time.sleep(0.2)
    client.close()
    return max(5.0, 2 * count / rate + 3)


def run_db(db: str, args: argparse.Namespace) -> Result:
    extra_env = dict(item.split("=", 1) for item in args.env)
    with server_on(db, args.workers, extra_env) as live:
        url, token = live.url, live.token
        db_name = live.env["DATABASE_URL"].rsplit("/", 1)[1] if db != "sqlite" else None
        meter = CpuMeter(live.process.pid, db_name, db)
        # Warm both paths (and the pop path) before measuring anything.
        client = Client(url, token)
        push(client, push_items(f"warm-{uuid.uuid4().hex[:6]}", 0, BATCH))
        client.close()
        lead = args.lead or auto_lead(url, token, args.count, args.clients)
        print(f"[{db}] burst: scheduling {args.count:,} timers due in {lead:.1f} s", flush=True)
        b = burst(url, token, meter, args.count, args.clients, lead, args.timeout)
        print(
            f"[{db}] burst: scheduled {b.schedule_per_s:,.0f}/s, fired {args.count:,} in {b.fire_s:.2f} s"
            f" = {b.fires_per_s:,.0f} fires/s (10-90%: {b.mid_fires_per_s:,.0f}/s), first fire +{b.first_fire_s:.2f} s,"
            f" deliverAt spread {b.spread_ms:.0f} ms"
            f" {b.error}",
            flush=True,
        )
        push_per_s, push_cpu = push_baseline(url, token, meter, args.count, args.clients)
        print(f"[{db}] push baseline: {push_per_s:,.0f} msgs/s", flush=True)
        steady = steady_push = None
        if args.seconds > 0:
            print(f"[{db}] steady: {args.rate:g} timers/s for {args.seconds:g} s", flush=True)
            steady = steady_timers(url, token, meter, args.rate, args.seconds, args.delay_ms, args.consumers)
            print(
                f"[{db}] steady: {steady.received}/{steady.sent} popped, lateness p50"
                f" {percentile(steady.late_ms, 0.5):.1f} ms p99 {percentile(steady.late_ms, 0.99):.1f} ms {steady.error}",
                flush=True,
            )
            steady_push = steady_pushes(url, token, meter, args.rate, args.seconds, args.consumers)
            print(
                f"[{db}] push->pop: p50 {percentile(steady_push.late_ms, 0.5):.1f} ms"
                f" p99 {percentile(steady_push.late_ms, 0.99):.1f} ms {steady_push.error}",
                flush=True,
            )
    return Result(db, b, push_per_s, push_cpu, steady, steady_push)


# --------------------------------------------------------------------------
# Report


def cores(cpu: dict[str, float], key: str) -> str:
    if not cpu.get("wall"):
        return "-"
    return f"{cpu[key] / cpu['wall']:.2f}"


def load(cpu: dict[str, float]) -> str:
    """The 1-minute load average at the start and at the end of a phase."""
    if "load_end" not in cpu:
        return "-"
    return f"{cpu['load']:.1f}-{cpu['load_end']:.1f}"


def per_msg(cpu: dict[str, float], count: int) -> str:
    """Microseconds of CPU per message: serve tree + PostgreSQL backends."""
    if not cpu.get("wall"):
        return "-"
    return f"{cpu['srv_cpu'] / count * 1e6:,.0f} + {cpu['pg_cpu'] / count * 1e6:,.0f}"


def report(results: list[Result], args: argparse.Namespace, started: datetime) -> None:
    print(
        f"\n{started:%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs, serve --workers {args.workers},"
        f" {args.clients} clients, batches of {BATCH}; steady {args.rate:g}/s for {args.seconds:g} s,"
        f" due {args.delay_ms} ms after scheduling, {args.consumers} consumers\n"
    )
    print("| db | timers | schedule/s | fire time s | fires/s (10-90%) | push msgs/s | fires / push |"
          " first fire s | CPU µs/fire srv + pg | CPU µs/push srv + pg | load | goal |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        b = r.burst
        ratio = f"{b.fires_per_s / r.push_per_s:.0%}" if r.push_per_s else "-"
        goal = "≥ 5,000 fires/s" if r.db == "postgres" else "-"
        print(
            f"| {r.db} | {b.count:,} | {b.schedule_per_s:,.0f} | {b.fire_s:.2f} | {b.fires_per_s:,.0f}"
            f" ({b.mid_fires_per_s:,.0f}) | {r.push_per_s:,.0f} | {ratio} | {b.first_fire_s:.2f} |"
            f" {per_msg(b.cpu, b.count)} | {per_msg(r.push_cpu, b.count)} |"
            f" {load(b.cpu)} | {goal} |"
        )
    if any(r.steady for r in results):
        print()
        print("| db | what | n | p50 ms | p90 ms | p99 ms | max ms | fire p50 / p99 ms | pop p50 / p99 ms |"
              " srv + pg cores | load |")  # fmt: skip
        print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        for name, s in (("timer lateness", r.steady), ("push->pop", r.steady_push)):
            if s is None:
                continue
            split = (
                f"{percentile(s.fire_ms, 0.5):.1f} / {percentile(s.fire_ms, 0.99):.1f} |"
                f" {percentile(s.pop_ms, 0.5):.1f} / {percentile(s.pop_ms, 0.99):.1f}"
                if s.fire_ms
                else "- | -"
            )
            print(
                f"| {r.db} | {name} | {s.received:,}/{s.sent:,} | {percentile(s.late_ms, 0.5):.1f} |"
                f" {percentile(s.late_ms, 0.9):.1f} | {percentile(s.late_ms, 0.99):.1f} |"
                f" {max(s.late_ms, default=float('nan')):.1f} | {split} |"
                f" {cores(s.cpu, 'srv_cpu')} + {cores(s.cpu, 'pg_cpu')} | {load(s.cpu)} |"
            )
    errors = [f"{r.db}: {e}" for r in results for e in (r.burst.error, *(s.error for s in (r.steady, r.steady_push) if s)) if e]  # fmt: skip
    for line in errors:
        print(f"PROBLEM {line}")
    print("\nGoals (issue 8): >= 5,000 fires/s on PostgreSQL; timer lateness p99 <= 100 ms.")
    if any(r.db in POOLED for r in results):
        print("Goal (issue 25): timer lateness p99 <= 100 ms at 200/s through PgBouncer.")


def _on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # run the finally blocks: stop serve, drop the database


def main() -> int:
    signal.signal(signal.SIGTERM, _on_sigterm)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", choices=("postgres", "sqlite", "both"), default="both")
    parser.add_argument("--count", type=int, default=100_000, help="timers in the burst, and pushes in its baseline")
    parser.add_argument("--rate", type=float, default=200.0, help="steady timers per second")
    parser.add_argument("--seconds", type=float, default=60.0, help="steady phase length (0 skips it)")
    parser.add_argument("--delay-ms", type=int, default=2000, help="steady timers are due this long after scheduling")
    parser.add_argument("--workers", type=int, default=1, help="serve --workers (each runs a timer loop)")
    parser.add_argument("--clients", type=int, default=2, help="connections scheduling / pushing the burst")
    parser.add_argument("--consumers", type=int, default=2, help="long-polling consumers in the steady phase")
    parser.add_argument("--lead", type=float, default=0.0, help="burst: seconds until the instant (0: measured)")
    parser.add_argument("--timeout", type=float, default=600.0, help="burst: give up firing after this many s")
    parser.add_argument(
        "--pooler",
        action="store_true",
        help="PostgreSQL directly, then through PgBouncer with and without DATABASE_LISTEN_URL, in one run",
    )
    parser.add_argument(
        "--py-spy", type=Path, default=None, metavar="DIR", help="profile serve into DIR/<db>-<phase>.txt"
    )
    parser.add_argument(
        "--env", action="append", default=[], metavar="NAME=VALUE", help="extra server environment (repeatable)"
    )
    args = parser.parse_args()
    global PROFILE_DIR
    if args.py_spy is not None:
        args.py_spy.mkdir(parents=True, exist_ok=True)
        PROFILE_DIR = args.py_spy
    started = datetime.now(UTC)
    dbs = ["postgres", "sqlite"] if args.db == "both" else [args.db]
    with contextlib.ExitStack() as stack:
        if args.pooler:
            if args.db == "sqlite":
                print("bench/timers.py --pooler runs on PostgreSQL", file=sys.stderr)
                return 2
            import pooler

            pooler.prepare()
            global BOUNCER
            BOUNCER = stack.enter_context(pooler.bouncer())
            dbs = [db for db in dbs if db != "sqlite"] + list(POOLED)
        stack.callback(_drop_template)
        results = [run_db(db, args) for db in dbs]
    report(results, args, started)
    return 0


def _drop_template() -> None:
    """The migrated database the servers' databases were copied from
    (pytest drops it at the end of a session; a benchmark has none)."""
    if "tests.conftest" in sys.modules:
        sys.modules["tests.conftest"].drop_live_template()


if __name__ == "__main__":
    sys.exit(main())
