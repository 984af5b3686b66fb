"""Wake-ups for long-poll pops: a push wakes the waiters of its queue.

Waiting pops are coroutines on the server's event loop; none holds a
thread. A writer (push, or an ack that hands messages back) calls
``notify_on_commit``; after commit the first waiter of each lane of those
queues re-tries its claim (see ``Hub`` for the chain that follows):

- on this replica through ``loop.call_soon_threadsafe`` (the writer runs in
  a WSGI thread of the same process);
- on PostgreSQL also through ``NOTIFY queenadmin_queues, '<queue>'`` sent in
  the writing transaction (PostgreSQL delivers it at commit, and drops it on
  rollback). Each serving process LISTENs on one async psycopg connection,
  so replicas sharing the database wake each other. Both statements are the
  queue store's (``store.notify`` and ``store.listen``); on a database
  without them only this process's waiters are woken.

A lost notification costs at most the re-check interval: each queue with
waiters is re-checked every ``POP_RECHECK_SECONDS`` and when a lease a
waiter saw expires. Behind a transaction pooler without
``DATABASE_LISTEN_URL`` nothing listens: the re-check is then the only way
another replica's push reaches a waiter, and it runs every
``db.wake_poll_seconds()`` when that is shorter.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Hashable, Iterable
from typing import Any

from django.db import connection, transaction

from queenadmin.conf import settings
from queenadmin.domain.queues.store import CHANNEL, store
from queenadmin.plumbing import db

log = logging.getLogger(__name__)

__all__ = ["ANY", "CHANNEL", "PRIVATE_KEY_PREFIX", "Hub", "Lane", "hub", "notify_on_commit"]

#: The key of waiters that take any queue (the namespace/task pop).
ANY = "*"
#: Keys that start with this are not durable queues (an ephemeral queue's
#: waiters, ``ephemeral.wake_key``): their wake-ups leave ``ANY`` alone. A
#: durable queue named so (a control character first) would wake the
#: namespace/task pops only at their re-check.
PRIVATE_KEY_PREFIX = "\x1f"


#: Waiters of one key that compete for the same messages: a consumer group
#: and a partition filter (None = any partition).
Lane = Hashable


class Hub:
    """Per-process registry of waiting pops, keyed by queue name.

    Each key has a generation: a counter that every wake-up of the key
    raises. A pop reads it before it claims and waits "for a generation
    after this one", so a push landing between the claim and the wait is
    not missed.

    A wake-up wakes ONE waiter per lane (consumer group and partition
    filter) of the key, first come first served, not every waiter: a waiter
    that then claims messages wakes the next one of its lane (there may be
    more), and one that finds nothing ends the chain. So a push to a queue
    with 2,000 waiting pops costs a few claims, not 2,000 (which queued on
    the database threads and made pops overrun their timeout). A lost wake
    (a client gone mid-chain, a lease expiring, a notification dropped) is
    repaired by one re-check per key every ``POP_RECHECK_SECONDS``, and at
    the earliest lease expiry a waiter saw, not one per waiter.
    """

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.generations: dict[str, int] = {}
        #: Per key and lane, the waiters in arrival order. An OrderedDict, not a
        #: deque: a waiter that times out leaves in O(1) (2,000 waiters timing
        #: out together cost a quadratic deque.remove ~0.5 s of the loop).
        self.lanes: dict[str, dict[Lane, OrderedDict[asyncio.Future[None], None]]] = {}
        self.rechecks: dict[str, asyncio.TimerHandle] = {}
        #: Per key, the claims that found nothing while pops wait on the key:
        #: claim shape -> (generation seen, loop time it stays true until).
        self.empty: dict[str, dict[Hashable, tuple[int, float]]] = {}
        #: Per key, the claims of waiting pops still running: claim shape ->
        #: (the latest generation one of them started at, how many run).
        self.claiming: dict[str, dict[Hashable, tuple[int, int]]] = {}
        self.listener: asyncio.Task[None] | None = None
        #: Settings of the database to LISTEN on (None: not asked yet; an
        #: empty dict: the store has nothing to listen to).
        self.listen_params: dict[str, Any] | None = None
        #: Set by ``close`` when the server stops: no pop waits any more.
        self.closed = False

    def bind(self) -> None:
        """Attach to the running loop; start the LISTEN task where the store has one."""
        loop = asyncio.get_running_loop()
        if self.loop is not loop:
            self.loop = loop
            self.lanes = {}
            self.rechecks = {}
            self.empty = {}
            self.claiming = {}
            self.listener = None
            self.closed = False
        if self.listen_params is None:
            self.listen_params = store().listen_params() or {}
        if self.listen_params and (self.listener is None or self.listener.done()):
            self.listener = loop.create_task(self._listen(self.listen_params))

    def generation(self, key: str) -> int:
        """The current generation of ``key``; pass it to ``wait``."""
        return self.generations.get(key, 0)

    def note_empty(self, key: str, shape: Hashable, generation: int, until: float) -> None:
        """A claim of ``shape`` on ``key`` found nothing at ``generation``.

        Until loop time ``until`` (the earliest lease expiry or delayed
        message the claim saw, capped by the caller) and while no wake-up
        of ``key`` comes, a claim of the same shape finds nothing either.
        Call it just before waiting on ``key``: entries live while the key
        has waiters.
        """
        self.empty.setdefault(key, {})[shape] = (generation, until)

    def known_empty(self, key: str, shape: Hashable) -> bool:
        """True when a claim of ``shape`` on ``key`` would find nothing now.

        A pop that arrives while others of its shape wait, with no wake-up
        since their claims, waits without a claim of its own: 1,000 pops
        arriving on one queue cost one claim, not 1,000.
        """
        noted = self.empty.get(key, {}).get(shape)
        if noted is None or self.loop is None:
            return False
        generation, until = noted
        return generation == self.generations.get(key, 0) and self.loop.time() < until

    def claim_started(self, key: str, shape: Hashable, generation: int) -> None:
        """A waiting pop of ``shape`` claims on ``key``, having read ``generation``.

        Pops of its shape that arrive before it answers wait on it
        (``claim_in_flight``) instead of claiming too: pops arriving together
        on an empty queue cost one claim, not one each (on SQLite claims
        queue one behind the other). Pair with ``claim_ended``.
        """
        _, running = self.claiming.setdefault(key, {}).get(shape, (generation, 0))
        self.claiming[key][shape] = (generation, running + 1)

    def claim_ended(self, key: str, shape: Hashable) -> None:
        shapes = self.claiming.get(key, {})
        generation, running = shapes.get(shape, (0, 1))
        if running > 1:
            shapes[shape] = (generation, running - 1)
            return
        shapes.pop(shape, None)
        if not shapes:
            self.claiming.pop(key, None)

    def claim_in_flight(self, key: str, shape: Hashable) -> bool:
        """True while a claim of ``shape`` on ``key`` runs that started with
        no wake-up of ``key`` since: what it finds, a pop arriving now would
        find too. It then either wakes the next waiter of its lane (it took
        messages, or it failed) or notes the key empty and waits."""
        running = self.claiming.get(key, {}).get(shape)
        return running is not None and running[0] == self.generations.get(key, 0)

    async def wait(
        self, key: str, generation: int, timeout_seconds: float, *, lane: Lane = None, recheck_at: float | None = None
    ) -> bool:
        """Wait in ``lane`` until woken past ``generation``, or time runs out.

        ``recheck_at`` (loop time) asks for the key's re-check no later than
        then (a lease the claim saw expires). Returns True when woken (at
        once if a wake-up already came after ``generation``). Returns False
        at once, and wakes waiting ones with False, once ``close`` ran.
        """
        if self.closed:
            return False
        if self.generations.get(key, 0) != generation:
            return True
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        waiting = self.lanes.setdefault(key, {}).setdefault(lane, OrderedDict())
        waiting[future] = None
        self._plan_recheck(key, recheck_at)
        try:
            await asyncio.wait_for(future, max(0.0, timeout_seconds))
        except TimeoutError:
            return False
        finally:
            self._leave(key, lane, future)
        return not self.closed

    def close(self) -> None:
        """End every wait now and every later one at once: the server stops.

        The pops then answer 204 as on a timeout, so a stopping server
        drains in well under a second instead of holding each connection
        for the rest of its pop's timeout. Loop only.
        """
        self.closed = True
        for lanes in list(self.lanes.values()):
            for waiting in list(lanes.values()):
                for future in list(waiting):
                    if not future.done():
                        future.set_result(None)

    def _leave(self, key: str, lane: Lane, future: asyncio.Future[None]) -> None:
        lanes = self.lanes.get(key)
        if lanes is None:
            return
        waiting = lanes.get(lane)
        if waiting is not None:
            waiting.pop(future, None)
            if not waiting:
                del lanes[lane]
        if not lanes:
            del self.lanes[key]
            self.empty.pop(key, None)
            handle = self.rechecks.pop(key, None)
            if handle is not None:
                handle.cancel()

    def wake_one(self, key: str, lane: Lane) -> None:
        """Wake the first waiter of ``lane`` (the next in a chain). Loop only."""
        waiting = self.lanes.get(key, {}).get(lane)
        while waiting:
            future, _ = waiting.popitem(last=False)
            if not future.done():
                future.set_result(None)
                return

    def _wake_lanes(self, key: str) -> None:
        for lane in list(self.lanes.get(key, {})):
            self.wake_one(key, lane)

    def wake(self, names: Iterable[str]) -> None:
        """Wake one waiter per lane of ``names`` (and of the any-queue pops,
        when a durable queue is among them). Loop only."""
        names = list(names)
        durable = any(not name.startswith(PRIVATE_KEY_PREFIX) for name in names)
        for key in (*names, *((ANY,) if durable else ())):
            self.generations[key] = self.generations.get(key, 0) + 1
            self.empty.pop(key, None)
            self._wake_lanes(key)

    def wake_all(self) -> None:
        self.wake(list(self.lanes))

    def _plan_recheck(self, key: str, at: float | None) -> None:
        loop = self.loop or asyncio.get_running_loop()
        every = settings.POP_RECHECK_SECONDS
        poll = db.wake_poll_seconds()
        if poll is not None:
            every = min(every, poll)
        when = loop.time() + every
        if at is not None:
            when = min(when, at)
        planned = self.rechecks.get(key)
        if planned is not None and planned.when() <= when:
            return
        if planned is not None:
            planned.cancel()
        self.rechecks[key] = loop.call_at(when, self._recheck, key)

    def _recheck(self, key: str) -> None:
        self.rechecks.pop(key, None)
        if key in self.lanes:
            self._wake_lanes(key)
            self._plan_recheck(key, None)

    def wake_threadsafe(self, names: list[str]) -> None:
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self.wake, names)

    async def _listen(self, params: dict[str, Any]) -> None:
        while True:
            try:
                # Once listening, anything pushed while nobody listened: let
                # waiters look.
                await store().listen(params, ready=self.wake_all, woken=lambda name: self.wake([name]))
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("listening on %s failed; retrying in 1 s", CHANNEL, exc_info=True)
                await asyncio.sleep(1.0)


hub = Hub()


def notify_on_commit(names: list[str], *, notified: bool = False) -> None:
    """Wake the pops waiting on queues ``names`` once this transaction commits.

    Must run inside the writing transaction. ``notified``: the caller's own
    statement already ran ``pg_notify`` for ``names`` (push's one-message
    append does, to save a statement); only this process's waiters remain.
    """
    assert connection.in_atomic_block
    if not names:
        return
    if not notified:
        store().notify(names)
    transaction.on_commit(lambda: hub.wake_threadsafe(names))
