"""The statistics sampler loop: one sampler per deployment.

Every worker of every ``serve`` replica runs a ``SamplerLoop``; only the
holder of the lock ``queenadmin.sampler`` (one permit, our own lock,
dogfooded as the timer loop does) samples, and each step carries the
lease's guard, so a loop whose lease was lost or taken over writes
nothing. A step runs once per tick of ``SAMPLER_INTERVAL_SECONDS``,
aligned to multiples of it, so a new leader resumes on the same grid.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.db import close_old_connections, connection

from queenadmin.conf import settings
from queenadmin.domain import clock
from queenadmin.domain.queues.history import SampleStep, latest_sample_at, stats_step
from queenadmin.errors import PreconditionFailed

logger = logging.getLogger(__name__)

#: The lock whose one permit makes a loop the sampler.
SAMPLER_LOCK = "queenadmin.sampler"
#: The lease of ``SAMPLER_LOCK`` that makes one replica the sampler, in
#: seconds. Internal, not a setting (docs/settings.md, "Internal constants").
SAMPLER_LEASE_SECONDS = 30.0
#: At most this share of the interval goes to counting every KV key: a
#: count that took longer waits that many more ticks before the next.
KEYS_SHARE = 0.1


def ticks_after_count(seconds: float, interval: int) -> int:
    """Ticks without a KV key count after one that took ``seconds``: none
    while it fits in ``KEYS_SHARE`` of the interval, then one per share."""
    return int(seconds / (KEYS_SHARE * interval))


def _owner() -> str:
    return f"sampler:{socket.gethostname()[:64]}:{os.getpid()}:{threading.get_ident()}"


def _interval() -> int:
    """Seconds between ticks (whole, at least 1)."""
    return max(1, int(settings.SAMPLER_INTERVAL_SECONDS))


class SamplerLoop:
    """Sample every tick while holding the permit of ``queenadmin.sampler``.

    ``on_step(tick, step)`` is called after each committed step. ``owner``
    names the lock holder (default: host, process and thread).
    ``every_tick()`` runs once per tick in every loop, sampler or not (the
    process sampler rides here: no thread or connection of its own); what
    it raises is logged and does not stop the loop.
    """

    def __init__(
        self,
        *,
        on_step: Callable[[datetime, SampleStep], Any] | None = None,
        owner: str | None = None,
        every_tick: Callable[[], Any] | None = None,
    ) -> None:
        from queenadmin.domain import locks

        self.lease_seconds = float(SAMPLER_LEASE_SECONDS)
        self.lock = locks.Lock(SAMPLER_LOCK, ttl=self.lease_seconds, limit=1, owner=owner or _owner())
        self._lease = locks.LoopLease(self.lock)
        self.on_step = on_step
        self.every_tick = every_tick
        self.last_tick: datetime | None = None
        self._own_tick: datetime | None = None
        #: Ticks to let pass before the next KV key count.
        self._keys_wait = 0

    def _hold(self) -> bool:
        held = self._lease.hold()
        if held == "granted":
            # A former sampler may have sampled this tick already.
            self.last_tick = latest_sample_at()
        return held is not None

    def step(self) -> SampleStep | None:
        """Sample the current tick if this loop is the sampler and has not yet.

        None when it does not hold the permit (or lost it: nothing was
        written) or already sampled this tick.
        """
        if not self._hold():
            return None
        now = clock.now()
        tick = clock.align(now, _interval())
        if tick == self.last_tick:
            return None
        try:
            result = stats_step(now=now, guard=self.lock.guard(), count_keys=self._keys_wait <= 0)
        except PreconditionFailed:
            logger.warning("sampler lost its lease; it wrote nothing and will try again")
            self._lease.give_up()
            return None
        self.last_tick = tick
        if result.keys_seconds is None:
            self._keys_wait -= 1
        else:
            self._keys_wait = ticks_after_count(result.keys_seconds, _interval())
        if self.on_step is not None:
            self.on_step(tick, result)
        return result

    def _wait(self) -> float:
        interval = _interval()
        now = clock.now()
        until_tick = (clock.align(now, interval) - now).total_seconds() + interval
        if not self.lock.held:
            return min(until_tick, self.lease_seconds / 3)
        return max(0.05, min(until_tick, self._lease.renew_due_in()))

    def _every_tick(self) -> None:
        if self.every_tick is None:
            return
        tick = clock.align(clock.now(), _interval())
        if tick == self._own_tick:
            return
        self._own_tick = tick
        try:
            self.every_tick()
        except Exception:
            logger.exception("per-tick step of the sampler loop failed")
            connection.close()

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                close_old_connections()
                self.step()
                self._every_tick()
                wait = self._wait()
            except Exception:
                logger.exception("sampler step failed")
                connection.close()
                wait = 1.0
            stop.wait(wait)
        with contextlib.suppress(Exception):
            self.lock.release()
        connection.close()
