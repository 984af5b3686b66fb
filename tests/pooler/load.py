"""A mixed load on replicas over HTTP, and the check of what it left (issue 25).

``Load`` runs actors (coroutines, one HTTP call at a time each) against a
set of replicas, each call to the next replica in turn, so a lock taken
through one is released through another and a push on one is popped from
another:

- KV writers: ``put`` of a key of their own (kept: the key and its value)
  and ``incr`` of one shared counter (kept: how many were acknowledged);
- lock holders: ``acquire`` a lock (limit 1), read a KV counter, write it
  back plus one in a transaction guarded by the lock's fencing token,
  ``release``; each lease's interval is kept, as seen by its holder (from
  the acquire's answer to the sending of the release: inside the time the
  server held it for them, so two that overlap prove two holders at once);
- semaphore holders: the same with ``limit``, holding 50 to 150 ms, so
  that its permits are mostly all taken;
- pushers: one message each call with a transaction id of its own;
- transaction writers: a push and a KV put in one ``/transaction``;
- timer schedulers: timers due 0.1 to 1.5 s later;
- poppers: long-poll pops of the three queues, acked at once.

``Load.run`` writes for a while, then keeps the poppers going until every
acknowledged push, transaction and timer has been delivered (or a
deadline), then reads back every acknowledged KV write. The ``Outcome``
holds every answer's status and time, what was acknowledged and delivered,
and the checks of each invariant.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import random
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit

import psycopg

NS = "soak"
PUSH_QUEUE = "soak-push"
TXN_QUEUE = "soak-txn"
TIMER_QUEUE = "soak-timer"
PARTITIONS = 4
#: A lease's lifetime: far longer than any hold, so none expires under a holder.
LEASE_SECONDS = 30


@dataclass(frozen=True)
class Shape:
    """How many actors of each kind (0 leaves a kind out)."""

    kv_writers: int = 4
    lock_names: int = 2
    holders_per_lock: int = 3
    semaphore_holders: int = 5
    semaphore_limit: int = 3
    pushers: int = 4
    txn_writers: int = 3
    timer_schedulers: int = 2
    poppers: int = 3


#: The soak test's size under ``QA_SCALE=full`` (and bench/replicas.py's).
FULL_SHAPE = Shape(
    kv_writers=8, holders_per_lock=4, semaphore_holders=6, pushers=8, txn_writers=6, timer_schedulers=3, poppers=6
)


@dataclass(frozen=True)
class Call:
    started: float
    ended: float
    kind: str
    #: 0: no answer (a transport error or a timeout).
    status: int


@dataclass(frozen=True)
class Lease:
    name: str
    owner: str
    slot: int
    token: int
    #: Monotonic seconds: the acquire's answer received, the release about to be sent.
    held_from: float
    held_to: float
    released: bool
    #: Lock holders: whether the guarded transaction committed (None: not tried).
    committed: bool | None = None


@dataclass
class Outcome:
    calls: list[Call] = field(default_factory=list)
    leases: list[Lease] = field(default_factory=list)
    #: KV key -> the value acknowledged.
    kv_acked: dict[str, int] = field(default_factory=dict)
    incr_acked: int = 0
    #: incr calls without an answer or with a 5xx: may or may not have applied.
    incr_unknown: int = 0
    #: Acknowledged pushes and timers: transactionId -> the message id answered.
    pushed: dict[str, str] = field(default_factory=dict)
    timers: dict[str, str] = field(default_factory=dict)
    #: Committed transactions' ids (their push's transactionId and KV key).
    txn_acked: set[str] = field(default_factory=set)
    #: Lock name -> guarded transactions committed, and those without a known outcome.
    guarded_committed: Counter[str] = field(default_factory=Counter)
    guarded_unknown: Counter[str] = field(default_factory=Counter)
    #: queue -> transactionId -> message ids delivered (a list: repeats are kept).
    delivered: dict[str, dict[str, list[str]]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(list)))
    ack_refused: int = 0
    lock_refusals: int = 0
    #: Seconds the writers ran (for rates).
    write_seconds: float = 0.0

    # -- what is read back after the load -------------------------------
    kv_missing: list[str] = field(default_factory=list)
    kv_wrong: list[tuple[str, int, object]] = field(default_factory=list)
    counter_value: int | None = None
    lock_counters: dict[str, int] = field(default_factory=dict)
    txn_kv_missing: list[str] = field(default_factory=list)

    def statuses(self) -> Counter[int]:
        return Counter(c.status for c in self.calls)

    def by_kind(self) -> dict[str, Counter[int]]:
        kinds: dict[str, Counter[int]] = defaultdict(Counter)
        for c in self.calls:
            kinds[c.kind][c.status] += 1
        return dict(kinds)

    def answered_per_second(self) -> float:
        """Calls answered below 300 per second of writing, without empty pops."""
        useful = [c for c in self.calls if 200 <= c.status < 300 and not (c.kind == "pop" and c.status == 204)]
        return len(useful) / self.write_seconds if self.write_seconds else 0.0

    def acked_writes(self) -> int:
        leases = len(self.leases)
        return (
            len(self.kv_acked)
            + self.incr_acked
            + len(self.pushed)
            + len(self.txn_acked)
            + len(self.timers)
            + sum(self.guarded_committed.values())
            + 2 * leases
        )

    def undelivered(self) -> dict[str, list[str]]:
        """Acknowledged pushes, transactions and timers not delivered (yet)."""
        wanted = {PUSH_QUEUE: self.pushed.keys(), TXN_QUEUE: self.txn_acked, TIMER_QUEUE: self.timers.keys()}
        return {queue: sorted(set(txns) - self.delivered[queue].keys()) for queue, txns in wanted.items()}

    def redelivered(self) -> list[tuple[str, str]]:
        """(queue, message id) delivered more than once."""
        seen: Counter[tuple[str, str]] = Counter()
        for queue, by_txn in self.delivered.items():
            for ids in by_txn.values():
                seen.update((queue, i) for i in ids)
        return sorted(key for key, n in seen.items() if n > 1)

    def timers_not_once(self) -> list[tuple[str, list[str], str]]:
        """Acknowledged timers not delivered exactly once as the message promised:
        (timer key, message ids delivered, message id promised)."""
        by_txn = self.delivered[TIMER_QUEUE]
        return [
            (key, by_txn.get(key, []), promised)
            for key, promised in self.timers.items()
            if by_txn.get(key, []) != [promised]
        ]

    def overlapping_leases(self) -> list[tuple[Lease, Lease]]:
        """Two leases of one lock slot held at once (by their holders' own clocks)."""
        overlaps = []
        slots: dict[tuple[str, int], list[Lease]] = defaultdict(list)
        for lease in self.leases:
            slots[(lease.name, lease.slot)].append(lease)
        for held in slots.values():
            held.sort(key=lambda lease: lease.held_from)
            overlaps.extend((a, b) for a, b in itertools.pairwise(held) if b.held_from < a.held_to)
        return overlaps

    def tokens_not_rising(self) -> list[tuple[Lease, Lease]]:
        """Consecutive leases of one lock slot whose fencing token did not rise."""
        slots: dict[tuple[str, int], list[Lease]] = defaultdict(list)
        for lease in self.leases:
            slots[(lease.name, lease.slot)].append(lease)
        bad = []
        for held in slots.values():
            held.sort(key=lambda lease: lease.held_from)
            bad.extend((a, b) for a, b in itertools.pairwise(held) if b.token <= a.token)
        return bad

    def most_held_at_once(self, name: str) -> int:
        """The most leases of ``name`` held at one moment (a sweep over their intervals)."""
        edges = sorted(
            [(lease.held_from, 1) for lease in self.leases if lease.name == name]
            + [(lease.held_to, -1) for lease in self.leases if lease.name == name],
            # An end before a start at the same instant.
            key=lambda edge: (edge[0], edge[1]),
        )
        most = now = 0
        for _, step in edges:
            now += step
            most = max(most, now)
        return most

    def summary(self) -> dict[str, Any]:
        return {
            "seconds": round(self.write_seconds, 1),
            "calls_per_second": round(self.answered_per_second(), 1),
            "acked_writes": self.acked_writes(),
            "acked_writes_per_second": round(self.acked_writes() / self.write_seconds, 1) if self.write_seconds else 0,
            "statuses": dict(sorted(self.statuses().items())),
            "leases": len(self.leases),
            "lock_refusals": self.lock_refusals,
        }


def _payload(value: object) -> str:
    return base64.b64encode(json.dumps(value).encode()).decode()


@dataclass(frozen=True)
class Answer:
    status_code: int
    content: bytes

    def json(self) -> Any:
        return json.loads(self.content)


class Http:
    """One kept-alive HTTP/1.1 connection on asyncio streams.

    Not httpx: on this load it cost the generator about a millisecond of CPU
    a call (a failed ``import sniffio`` per request, httpcore's pool
    bookkeeping), CPU the servers it measures then lacked on a 2-core box.
    Every API answer has a Content-Length (server/wsgi_bridge.py); a chunked
    one is read too.
    """

    def __init__(self, url: str, headers: dict[str, str], timeout_seconds: float) -> None:
        parsed = urlsplit(url)
        self.host = parsed.hostname or "127.0.0.1"
        self.port = parsed.port or 80
        self.head = "".join(f"{name}: {value}\r\n" for name, value in {"Host": parsed.netloc, **headers}.items())
        self.timeout_seconds = timeout_seconds
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, path: str, body: Any = None, params: dict[str, Any] | None = None) -> Answer:
        try:
            return await asyncio.wait_for(self._request(method, path, body, params), self.timeout_seconds)
        except BaseException:
            self.close()
            raise

    async def _request(self, method: str, path: str, body: Any, params: dict[str, Any] | None) -> Answer:
        if self.reader is not None and self.reader.at_eof():
            # The server closed the kept-alive connection while it was idle
            # (uvicorn's keep-alive timeout): open a new one, as HTTP
            # clients do before they reuse a pooled connection.
            self.close()
        if self.writer is None or self.reader is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        if params:
            path = f"{path}?{urlencode(params)}"
        content = b"" if body is None else json.dumps(body).encode()
        head = f"{method} {path} HTTP/1.1\r\n{self.head}"
        if body is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(content)}\r\n"
        self.writer.write(f"{head}\r\n".encode() + content)
        status_line = await self.reader.readuntil(b"\r\n")
        status = int(status_line.split()[1])
        headers: dict[str, str] = {}
        while (line := await self.reader.readuntil(b"\r\n")) != b"\r\n":
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        if "content-length" in headers:
            content = await self.reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            content = b""
            while size := int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16):
                content += await self.reader.readexactly(size)
                await self.reader.readexactly(2)
            await self.reader.readuntil(b"\r\n")
        else:
            content = b""
        if headers.get("connection", "").lower() == "close":
            self.close()
        return Answer(status, content)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


class Session:
    """One actor's connections: one of its own per replica, each call to the
    next replica in turn."""

    def __init__(self, load: Load, urls: list[str]) -> None:
        self.out = load.out
        self.clients = [Http(url, load.headers, load.timeout_seconds) for url in urls]
        self.turn = itertools.count(random.randrange(len(urls)))

    async def aclose(self) -> None:
        for client in self.clients:
            client.close()

    async def call(self, kind: str, method: str, path: str, body: Any = None, **params: Any) -> Answer | None:
        client = self.clients[next(self.turn) % len(self.clients)]
        started = time.monotonic()
        try:
            answer = await client.request(method, path, body, params)
        except (OSError, TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            self.out.calls.append(Call(started, time.monotonic(), kind, 0))
            return None
        self.out.calls.append(Call(started, time.monotonic(), kind, answer.status_code))
        return answer

    async def kv(self, kind: str, *ops: dict[str, Any]) -> list[dict[str, Any]] | None:
        answer = await self.call(kind, "POST", "/api/v1/kv", {"operations": list(ops)})
        if answer is None or answer.status_code != 200:
            return None
        return answer.json()["results"]  # type: ignore[no-any-return]

    async def lock_op(self, kind: str, op: dict[str, Any]) -> dict[str, Any] | None:
        answer = await self.call(kind, "POST", "/api/v1/locks", {"operations": [op]})
        if answer is None or answer.status_code != 200:
            return None
        return answer.json()["results"][0]  # type: ignore[no-any-return]

    async def transaction(self, kind: str, body: dict[str, Any]) -> bool | None:
        """True committed, False rolled back, None unknown (no answer or not 200)."""
        answer = await self.call(kind, "POST", "/api/v1/transaction", {"operations": [], "requiredLeases": [], **body})
        if answer is None or answer.status_code != 200:
            return None
        return bool(answer.json().get("success"))


class Load:
    def __init__(self, urls: list[str], token: str, shape: Shape, *, timeout_seconds: float = 30.0) -> None:
        self.urls = urls
        self.headers = {"Authorization": f"Bearer {token}"}
        self.timeout_seconds = timeout_seconds
        self.shape = shape
        self.out = Outcome()
        self.writing = True
        self.popping = True
        self.semaphore = "soak-semaphore"
        self.locks = [f"soak-lock-{n}" for n in range(shape.lock_names)]

    async def _actor(self, body: Any, *args: Any) -> None:
        session = Session(self, self.urls)
        try:
            await body(session, *args)
        finally:
            await session.aclose()

    # -- actors ------------------------------------------------------------

    async def kv_writer(self, s: Session, me: int) -> None:
        for n in itertools.count(1):
            if not self.writing:
                return
            key = f"w{me}-{n}"
            got = await s.kv("kv.put", {"op": "put", "ns": NS, "key": key, "value": n, "forever": True})
            if got is not None and got[0]["applied"]:
                self.out.kv_acked[key] = n
            got = await s.kv("kv.incr", {"op": "incr", "ns": NS, "key": "counter", "delta": 1, "forever": True})
            if got is None:
                self.out.incr_unknown += 1
            elif got[0]["applied"]:
                self.out.incr_acked += 1

    async def lock_holder(self, s: Session, name: str, me: int) -> None:
        owner = f"{name}/holder-{me}"
        counter = f"lock/{name}"
        while self.writing:
            acquire = {"op": "acquire", "name": name, "ttlSeconds": LEASE_SECONDS, "owner": owner}
            got = await s.lock_op("lock.acquire", acquire)
            if got is None or not got["acquired"]:
                self.out.lock_refusals += int(got is not None)
                await asyncio.sleep(random.uniform(0.002, 0.01))
                continue
            held_from = time.monotonic()
            committed = None
            read = await s.kv("kv.get", {"op": "get", "ns": NS, "key": counter})
            if read is not None:
                value = read[0]["value"] if read[0]["found"] else 0
                put = {"op": "put", "ns": NS, "key": counter, "value": value + 1, "forever": True}
                committed = await s.transaction("txn.guarded", {"kv": [got["guard"], put]})
                if committed:
                    self.out.guarded_committed[name] += 1
                elif committed is None:
                    self.out.guarded_unknown[name] += 1
            held_to = time.monotonic()
            done = await s.lock_op("lock.release", {"op": "release", "name": name, "token": got["token"]})
            released = done is not None and bool(done["released"])
            self.out.leases.append(
                Lease(name, owner, got["slot"], got["token"], held_from, held_to, released, committed)
            )

    async def semaphore_holder(self, s: Session, me: int) -> None:
        owner = f"sem/holder-{me}"
        limit = self.shape.semaphore_limit
        while self.writing:
            acquire = {
                "op": "acquire",
                "name": self.semaphore,
                "ttlSeconds": LEASE_SECONDS,
                "owner": owner,
                "limit": limit,
            }
            got = await s.lock_op("semaphore.acquire", acquire)
            if got is None or not got["acquired"]:
                self.out.lock_refusals += int(got is not None)
                await asyncio.sleep(random.uniform(0.002, 0.01))
                continue
            held_from = time.monotonic()
            # Long enough that the permits are mostly all taken: a limit not
            # kept then shows as one holder too many at once.
            await asyncio.sleep(random.uniform(0.05, 0.15))
            held_to = time.monotonic()
            release = {"op": "release", "name": self.semaphore, "token": got["token"], "slot": got["slot"]}
            done = await s.lock_op("semaphore.release", release)
            released = done is not None and bool(done["released"])
            self.out.leases.append(
                Lease(self.semaphore, owner, got["slot"], got["token"], held_from, held_to, released)
            )

    async def pusher(self, s: Session, me: int) -> None:
        for n in itertools.count(1):
            if not self.writing:
                return
            txn = f"p{me}-{n}"
            item = {"queue": PUSH_QUEUE, "partition": f"p{n % PARTITIONS}", "payload": {"n": n}, "transactionId": txn}
            answer = await s.call("push", "POST", "/api/v1/push", {"items": [item]})
            if answer is not None and answer.status_code == 201:
                (result,) = answer.json()
                if result["status"] == "queued":
                    self.out.pushed[txn] = result["message_id"]

    async def txn_writer(self, s: Session, me: int) -> None:
        for n in itertools.count(1):
            if not self.writing:
                return
            txn = f"x{me}-{n}"
            push = {"type": "push", "items": [{"queue": TXN_QUEUE, "payload": {"txn": txn}, "transactionId": txn}]}
            put = {"op": "put", "ns": NS, "key": f"tx/{txn}", "value": txn, "forever": True}
            if await s.transaction("txn", {"operations": [push], "kv": [put]}):
                self.out.txn_acked.add(txn)

    async def timer_scheduler(self, s: Session, me: int) -> None:
        for n in itertools.count(1):
            if not self.writing:
                return
            key = f"t{me}-{n}"
            op = {
                "op": "schedule",
                "queue": TIMER_QUEUE,
                "timerKey": key,
                "txn": key,
                "delayMs": random.randint(100, 1500),
                "payload": _payload({"timer": key}),
            }
            answer = await s.call("timer", "POST", "/api/v1/timers", {"operations": [op]})
            if answer is not None and answer.status_code == 200:
                (result,) = answer.json()["results"]
                if result["ok"] and result["status"] == "scheduled":
                    self.out.timers[key] = result["messageId"]
            await asyncio.sleep(0.02)

    async def popper(self, s: Session, me: int) -> None:
        shape = self.shape
        kinds = ((PUSH_QUEUE, shape.pushers), (TXN_QUEUE, shape.txn_writers), (TIMER_QUEUE, shape.timer_schedulers))
        queues = [queue for queue, actors in kinds if actors]
        for n in itertools.count(me):
            if not self.popping or not queues:
                return
            queue = queues[n % len(queues)]
            answer = await s.call("pop", "GET", f"/api/v1/pop/queue/{queue}", batch=20, wait="true", timeout=500)
            if answer is None or answer.status_code != 200:
                continue
            messages = answer.json()["messages"]
            for message in messages:
                self.out.delivered[queue][message["transactionId"]].append(message["id"])
            acks = [
                {
                    "transactionId": m["transactionId"],
                    "partitionId": m["partitionId"],
                    "status": "completed",
                    "leaseId": m["leaseId"],
                }
                for m in messages
            ]
            acked = await s.call("ack", "POST", "/api/v1/ack/batch", {"acknowledgments": acks, "consumerGroup": None})
            if acked is None or acked.status_code != 200:
                self.out.ack_refused += len(acks)
            else:
                self.out.ack_refused += sum(1 for a in acked.json() if not a["success"])

    # -- running -----------------------------------------------------------

    def _writers(self) -> list[Any]:
        s = self.shape
        return [
            *(self._actor(self.kv_writer, n) for n in range(s.kv_writers)),
            *(self._actor(self.lock_holder, name, n) for name in self.locks for n in range(s.holders_per_lock)),
            *(self._actor(self.semaphore_holder, n) for n in range(s.semaphore_holders)),
            *(self._actor(self.pusher, n) for n in range(s.pushers)),
            *(self._actor(self.txn_writer, n) for n in range(s.txn_writers)),
            *(self._actor(self.timer_scheduler, n) for n in range(s.timer_schedulers)),
        ]

    def _poppers(self, count: int) -> list[asyncio.Future[None]]:
        return [asyncio.ensure_future(self._actor(self.popper, n)) for n in range(count)]

    async def run(self, seconds: float, *, drain_seconds: float = 30.0) -> Outcome:
        """Write for ``seconds`` (popping meanwhile), then drain, then read back."""
        poppers = self._poppers(self.shape.poppers)
        began = time.monotonic()
        writers = asyncio.gather(*self._writers())
        await asyncio.sleep(seconds)
        self.writing = False
        await writers
        self.out.write_seconds = time.monotonic() - began
        await self.drain(drain_seconds, poppers)
        await self.verify()
        return self.out

    async def drain(self, seconds: float, poppers: list[asyncio.Future[None]]) -> None:
        """Pop until every acknowledged push, transaction and timer is delivered, or ``seconds``."""
        if not poppers and any(self.out.undelivered().values()):
            poppers = self._poppers(2)
        deadline = time.monotonic() + seconds
        while any(self.out.undelivered().values()) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        self.popping = False
        await asyncio.gather(*poppers)

    async def verify(self) -> None:
        """Read back every acknowledged KV write (and the counters)."""
        session = Session(self, self.urls)
        try:
            await self._verify(session)
        finally:
            await session.aclose()

    async def _verify(self, s: Session) -> None:
        keys = sorted(self.out.kv_acked)
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            got = await s.kv("verify", {"op": "getMany", "ns": NS, "keys": chunk})
            assert got is not None, "the read-back of the acknowledged KV writes failed"
            rows = {row["key"]: row["value"] for row in got[0]["rows"]}
            for key in chunk:
                if key not in rows:
                    self.out.kv_missing.append(key)
                elif rows[key] != self.out.kv_acked[key]:
                    self.out.kv_wrong.append((key, self.out.kv_acked[key], rows[key]))
        txn_keys = sorted(f"tx/{txn}" for txn in self.out.txn_acked)
        for start in range(0, len(txn_keys), 500):
            got = await s.kv("verify", {"op": "getMany", "ns": NS, "keys": txn_keys[start : start + 500]})
            assert got is not None, "the read-back of the transactions' KV writes failed"
            self.out.txn_kv_missing.extend(got[0]["missing"])
        counters = [{"op": "get", "ns": NS, "key": "counter"}] + [
            {"op": "get", "ns": NS, "key": f"lock/{name}"} for name in self.locks
        ]
        got = await s.kv("verify", *counters)
        assert got is not None, "the read-back of the counters failed"
        self.out.counter_value = got[0]["value"] if got[0]["found"] else 0
        for name, row in zip(self.locks, got[1:], strict=True):
            self.out.lock_counters[name] = row["value"] if row["found"] else 0


class ConnectionSampler:
    """Samples PostgreSQL's connections (``pg_stat_activity``, client
    backends and all) and PgBouncer's waiting clients every ``every`` seconds
    in a thread, reconnecting when PostgreSQL restarts."""

    def __init__(self, pg_url: str, bouncer_admin_url: str | None = None, every: float = 0.2) -> None:
        self.pg_url = pg_url
        self.bouncer_admin_url = bouncer_admin_url
        self.every = every
        self.peak_clients = 0
        self.peak_all = 0
        self.peak_waiting = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pg-connections", daemon=True)

    def __enter__(self) -> ConnectionSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        conn: psycopg.Connection[Any] | None = None
        bouncer: psycopg.Connection[Any] | None = None
        while not self._stop.wait(self.every):
            try:
                if conn is None or conn.closed:
                    conn = psycopg.connect(self.pg_url, autocommit=True, connect_timeout=2)
                row = conn.execute(
                    "SELECT count(*) FILTER (WHERE backend_type = 'client backend'), count(*) FROM pg_stat_activity"
                ).fetchone()
                assert row is not None
                self.peak_clients = max(self.peak_clients, int(row[0]))
                self.peak_all = max(self.peak_all, int(row[1]))
                self.samples += 1
            except psycopg.Error:
                conn = None
            if self.bouncer_admin_url is None:
                continue
            try:
                if bouncer is None or bouncer.closed:
                    bouncer = psycopg.connect(
                        self.bouncer_admin_url, autocommit=True, prepare_threshold=None, connect_timeout=2
                    )
                cur = bouncer.execute("SHOW POOLS", prepare=False)
                names = [c.name for c in cur.description or []]
                waiting = sum(int(r[names.index("cl_waiting")]) for r in cur.fetchall())
                self.peak_waiting = max(self.peak_waiting, waiting)
            except psycopg.Error:
                bouncer = None
        for c in (conn, bouncer):
            if c is not None:
                c.close()
