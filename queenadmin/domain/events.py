"""Change events for live dashboards, published after commit and coalesced.

``broadcast_on_commit`` is the only way domain code tells the outside world
that something changed. A rolled-back write never reaches a dashboard
(Zulip's ``send_event_on_commit`` rule). Publishing is coalesced per group:
a hot write path marks a group dirty and a single background thread sends
at most one message per group every ``FLUSH_INTERVAL`` seconds, so a
thousand writes a second cost the channel layer a handful of messages and
the writer a dictionary update.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

from django.db import transaction

log = logging.getLogger(__name__)

LOCKS_GROUP = "locks"
TIMERS_GROUP = "timers"
KV_GROUP = "kv"
QUEUES_GROUP = "queues"
AUDIT_GROUP = "audit"

#: Seconds between flushes of coalesced events.
FLUSH_INTERVAL = 0.2


class _Publisher:
    def __init__(self) -> None:
        self._pending: dict[str, dict[str, Any]] = {}
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        #: Hooks called synchronously with (group, message); tests use them.
        self.listeners: list[Any] = []
        #: True while a batch is being sent (``drain`` waits for it).
        self._sending = False
        #: True from a failed send to the next one that goes out: the outage
        #: is logged once, not at every flush of every group.
        self._failing = False

    def mark(self, group: str, message: dict[str, Any]) -> None:
        for listener in list(self.listeners):
            listener(group, message)
        with self._cond:
            # With something pending the thread is awake already, or was woken
            # when it became pending: no notify per write.
            idle = not self._pending
            merged = self._pending.setdefault(group, {"type": message["type"], "count": 0})
            merged["count"] += 1
            for key, value in message.items():
                if key in ("type", "count"):
                    continue
                if isinstance(value, list):
                    # Lists (namespaces, queues) name what changed: keep them all.
                    known = merged.setdefault(key, [])
                    known.extend(v for v in value if v not in known)
                else:
                    merged.setdefault(key, value)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="queenadmin-events", daemon=True)
                self._thread.start()
            if idle:
                # All: ``drain`` may be waiting on the condition too, and must
                # not take the thread's wake-up.
                self._cond.notify_all()

    def _run(self) -> None:
        from channels.layers import get_channel_layer

        # One event loop for the thread's life: ``async_to_sync`` made a
        # thread and a loop per message (2-3% of the GIL under writes), and
        # the Redis layer a connection per loop.
        loop = asyncio.new_event_loop()
        while True:
            with self._cond:
                while not self._pending:
                    self._cond.wait()
                batch, self._pending = self._pending, {}
                self._sending = True
            layer = get_channel_layer()
            if layer is not None:
                for group, message in batch.items():
                    try:
                        loop.run_until_complete(layer.group_send(group, message))
                    except Exception as exc:
                        self._failed(group, exc)
                    else:
                        self._sent()
            with self._cond:
                self._sending = False
                self._cond.notify_all()
            threading.Event().wait(FLUSH_INTERVAL)

    def _failed(self, group: str, exc: Exception) -> None:
        if self._failing:
            return
        self._failing = True
        log.warning(
            "could not publish to group %s (%s: %s); dashboards miss changes until the channel layer answers",
            group,
            type(exc).__name__,
            exc,
            exc_info=log.isEnabledFor(logging.DEBUG),
        )

    def _sent(self) -> None:
        if self._failing:
            self._failing = False
            log.warning("publishing to dashboards again")

    def drain(self, timeout_seconds: float) -> None:
        """Wait until every marked event went out, at most ``timeout_seconds``.

        A stopping worker calls it after its loops stop, so their last
        events (a released lock) go out before the interpreter exits,
        instead of failing in the publisher thread during its shutdown.
        """
        deadline = time.monotonic() + timeout_seconds
        with self._cond:
            while self._pending or self._sending:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._cond.wait(min(left, 0.05))


publisher = _Publisher()


def broadcast_on_commit(group: str, message: dict[str, Any]) -> None:
    """Publish ``message`` to ``group`` once the current transaction commits.

    Outside a transaction it publishes at once. ``message["type"]`` names the
    consumer handler (``"kv.changed"`` -> ``kv_changed``).
    """
    transaction.on_commit(lambda: publisher.mark(group, message))


def broadcast_committed(group: str, message: dict[str, Any]) -> None:
    """Publish ``message`` to ``group`` for a write already committed.

    For a caller that knows its write committed (an autocommit statement
    returned): ``broadcast_on_commit`` would look the connection up only
    to run the publish at once, 3-7% of a lone KV put's server CPU
    (bench/README.md, "Where the time goes").
    """
    publisher.mark(group, message)
