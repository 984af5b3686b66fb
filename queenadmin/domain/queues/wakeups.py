"""Wake-ups for long-poll pops: a push wakes the waiters of its queue.

Waiting pops are coroutines on the server's event loop; none holds a
thread. A writer (push, or an ack that hands messages back) calls
``notify_on_commit``; after commit every waiter of those queues re-tries
its claim:

- on this replica through ``loop.call_soon_threadsafe`` (the writer runs in
  a WSGI thread of the same process);
- on PostgreSQL also through ``NOTIFY queenadmin_queues, '<queue>'`` sent in
  the writing transaction (PostgreSQL delivers it at commit, and drops it on
  rollback). Each serving process LISTENs on one async psycopg connection,
  so replicas sharing the database wake each other.

A lost notification costs at most the re-check interval: waiters re-try on
their own every ``POP_RECHECK_SECONDS`` and when a lease they saw expires.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from typing import Any

from django.db import connection, transaction

from queenadmin.domain.db import is_postgres

log = logging.getLogger(__name__)

CHANNEL = "queenadmin_queues"
#: The key of waiters that take any queue (the namespace/task pop).
ANY = "*"


class Hub:
    """Per-process registry of waiting pops, keyed by queue name.

    Each key has a generation: a counter that every wake-up of the key
    raises. A pop reads it before it claims and waits "for a generation
    after this one", so a push landing between the claim and the wait is
    not missed.
    """

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.generations: dict[str, int] = {}
        self.events: dict[str, asyncio.Event] = {}
        self.listener: asyncio.Task[None] | None = None
        #: Settings of the database to LISTEN on (PostgreSQL only).
        self.listen_params: dict[str, Any] | None = None

    def bind(self) -> None:
        """Attach to the running loop; start the LISTEN task on PostgreSQL."""
        loop = asyncio.get_running_loop()
        if self.loop is not loop:
            self.loop = loop
            self.events = {}
            self.listener = None
        if self.listen_params is None and is_postgres():
            settings = connection.settings_dict
            params = {
                "dbname": settings["NAME"],
                "user": settings.get("USER"),
                "password": settings.get("PASSWORD"),
                "host": settings.get("HOST"),
                "port": settings.get("PORT"),
            }
            self.listen_params = {k: v for k, v in params.items() if v}
        if self.listen_params and (self.listener is None or self.listener.done()):
            self.listener = loop.create_task(self._listen(self.listen_params))

    def generation(self, key: str) -> int:
        """The current generation of ``key``; pass it to ``wait``."""
        return self.generations.get(key, 0)

    async def wait(self, key: str, generation: int, timeout_seconds: float) -> bool:
        """Wait until ``key`` is woken past ``generation``, or time runs out.

        Returns True when woken (at once if that already happened).
        """
        if self.generations.get(key, 0) != generation:
            return True
        event = self.events.get(key)
        if event is None:
            event = self.events[key] = asyncio.Event()
        try:
            await asyncio.wait_for(event.wait(), max(0.0, timeout_seconds))
        except TimeoutError:
            return False
        return True

    def wake(self, names: Iterable[str]) -> None:
        """Wake the waiters of ``names`` (and the any-queue waiters). Loop only."""
        for key in (*names, ANY):
            self.generations[key] = self.generations.get(key, 0) + 1
            event = self.events.pop(key, None)
            if event is not None:
                event.set()

    def wake_all(self) -> None:
        self.wake(list(self.events))

    def wake_threadsafe(self, names: list[str]) -> None:
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self.wake, names)

    async def _listen(self, params: dict[str, Any]) -> None:
        import psycopg

        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(**params, autocommit=True)
                async with conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    # Anything pushed while nobody listened: let waiters look.
                    self.wake_all()
                    async for note in conn.notifies():
                        self.wake([note.payload])
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("LISTEN %s failed; retrying in 1 s", CHANNEL, exc_info=True)
                await asyncio.sleep(1.0)


hub = Hub()


def notify_on_commit(names: list[str]) -> None:
    """Wake the pops waiting on queues ``names`` once this transaction commits.

    Must run inside the writing transaction.
    """
    assert connection.in_atomic_block
    if not names:
        return
    if is_postgres():
        with connection.cursor() as cur:
            cur.execute(f"SELECT pg_notify('{CHANNEL}', q) FROM unnest(%s::text[]) AS q", [names])
    transaction.on_commit(lambda: hub.wake_threadsafe(names))
