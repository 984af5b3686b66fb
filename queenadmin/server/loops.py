"""Background loops of a serving process: the reaper, message retention,
idle implicit ephemeral queues, the timer loop and the statistics sampler,
whose thread also samples its own process every tick (CPU, memory, requests).

Each runs in a daemon thread with its own database connection, started by
the ASGI lifespan so every worker process of ``serve`` has them. They are
safe to run in several processes at once: the reaper and the retention
sweep skip locked rows. A loop whose interval is 0 is not started.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from django.db import close_old_connections, connection

from queenadmin import metrics
from queenadmin.conf import settings
from queenadmin.plumbing import db

log = logging.getLogger(__name__)

_stop = threading.Event()
_threads: list[threading.Thread] = []


def reap_once() -> int:
    from queenadmin.domain import kv

    total = 0
    while True:
        removed = kv.kv_reap_expired()
        total += removed
        if removed < kv.REAPER_BATCH_SIZE:
            return total


def retention_once() -> int:
    from queenadmin.domain import kv, queues
    from queenadmin.domain.queues import operator as queue_operator

    deleted = queues.queue_retention_sweep().deleted
    # Keys' history rides on the same loop; one process trims at a time.
    trimmed = kv.kv_history_trim()
    # So do the records of replayed dead letters (DLQ_REPLAY_KEEP_SECONDS).
    replays = queue_operator.queue_dlq_replays_trim()
    return deleted + trimmed.old + trimmed.extra + replays


def process_sample_once() -> int:
    from queenadmin.domain import clock, procmetrics
    from queenadmin.metrics import process

    try:
        now = clock.now()
        pruned = procmetrics.procmetrics_record(now=now, row=process.read_self(now=now))
    except Exception:
        metrics.loop_step("process-sampler", ok=False, at=time.time())
        raise
    metrics.loop_step("process-sampler", ok=True, at=time.time())
    return pruned


def ephemeral_idle_once() -> int:
    from queenadmin.domain import ephemeral

    return len(ephemeral.eph_collect_idle())


def _loop(name: str, interval: Callable[[], float], step: Callable[[], Any]) -> None:
    while not _stop.is_set():
        try:
            close_old_connections()
            step()
            metrics.loop_step(name, ok=True, at=time.time())
            # Pooled: give the connection back while the loop sleeps.
            close_old_connections()
        except Exception as exc:
            # A pooler this process was not told about fails every step:
            # db logs one line a minute naming the setting, not a traceback
            # per step.
            if not db.pooler_session_error(exc):
                log.exception("%s loop step failed", name)
            metrics.loop_step(name, ok=False, at=time.time())
            connection.close()
        _stop.wait(interval())
    connection.close()


#: name -> (seconds between steps, step). Other concepts add theirs.
LOOPS: dict[str, tuple[Callable[[], float], Callable[[], Any]]] = {
    "reaper": (lambda: settings.REAPER_INTERVAL_SECONDS, reap_once),
    "retention": (lambda: settings.RETENTION_INTERVAL_SECONDS, retention_once),
    "ephemeral-idle": (lambda: settings.EPHEMERAL_IDLE_CHECK_SECONDS, ephemeral_idle_once),
}


def _timer_loop() -> None:
    from queenadmin.domain.timers import TimerLoop

    TimerLoop(on_step=lambda _: metrics.loop_step("timers", ok=True, at=time.time())).run(_stop)


def _sampler_loop() -> None:
    from queenadmin.domain.queues.sampler import SamplerLoop

    # Each worker's loop also samples its own process once a tick.
    SamplerLoop(every_tick=process_sample_once).run(_stop)


def start() -> None:
    _stop.clear()
    for name, (interval, step) in LOOPS.items():
        if interval() <= 0:
            continue
        thread = threading.Thread(target=_loop, args=(name, interval, step), name=f"queenadmin-{name}", daemon=True)
        thread.start()
        _threads.append(thread)
    if settings.TIMER_LOOP_IN_SERVE:
        thread = threading.Thread(target=_timer_loop, name="queenadmin-timers", daemon=True)
        thread.start()
        _threads.append(thread)
    if settings.SAMPLER_IN_SERVE:
        thread = threading.Thread(target=_sampler_loop, name="queenadmin-sampler", daemon=True)
        thread.start()
        _threads.append(thread)


def stop() -> None:
    from queenadmin.domain import events
    from queenadmin.domain.timers import wake

    _stop.set()
    wake.wake_local()
    for thread in _threads:
        thread.join(timeout=5)
    _threads.clear()
    events.publisher.drain(1.0)


def _close_pops_on_stop_signals() -> None:
    """On SIGINT/SIGTERM, answer every waiting long-poll pop at once.

    uvicorn's handlers (installed before the lifespan starts) stop taking
    connections, then wait for the open ones; a waiting pop would hold its
    connection for the rest of its timeout (up to 30 s). Chained in front
    of them, this closes the pop hub first, so the pops answer 204 and the
    server stops in well under a second.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    from queenadmin.domain.queues import wakeups

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        previous = signal.getsignal(sig)

        def handler(signum: int, frame: Any, previous: Any = previous) -> None:
            loop.call_soon_threadsafe(wakeups.hub.close)
            if callable(previous):
                previous(signum, frame)

        signal.signal(sig, handler)


def settle_gc() -> None:
    """Freeze what start-up made and collect young objects less often: the
    collector then stops re-walking Django's, ninja's and our long-lived
    objects during requests (bench/README.md, "Where the time goes").
    No ``gc.collect()`` first: its pause made workers late to answer the
    supervisor's readiness ping on a loaded machine."""
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)


async def lifespan(scope: dict[str, Any], receive: Any, send: Any) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            _close_pops_on_stop_signals()
            metrics.worker_started()
            start()
            settle_gc()
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            stop()
            metrics.worker_exited(os.getpid())
            await send({"type": "lifespan.shutdown.complete"})
            return
