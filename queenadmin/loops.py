"""Background loops of a serving process: the reaper and the timer loop.

Each runs in a daemon thread with its own database connection, started by
the ASGI lifespan so every worker process of ``serve`` has them. They are
safe to run in several processes at once: the reaper skips locked rows.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from django.db import close_old_connections, connection

from queenadmin.conf import settings

log = logging.getLogger(__name__)

_stop = threading.Event()
_threads: list[threading.Thread] = []


def reap_once() -> int:
    from queenadmin.domain import kv

    total = 0
    while True:
        removed = kv.kv_reap_expired()
        total += removed
        if removed < settings.REAPER_BATCH_SIZE:
            return total


def _loop(name: str, interval: Callable[[], float], step: Callable[[], Any]) -> None:
    while not _stop.is_set():
        try:
            close_old_connections()
            step()
            # Pooled: give the connection back while the loop sleeps.
            close_old_connections()
        except Exception:
            log.exception("%s loop step failed", name)
            connection.close()
        _stop.wait(interval())
    connection.close()


#: name -> (seconds between steps, step). Other concepts add theirs.
LOOPS: dict[str, tuple[Callable[[], float], Callable[[], Any]]] = {
    "reaper": (lambda: settings.REAPER_INTERVAL_SECONDS, reap_once),
}


def _timer_loop() -> None:
    from queenadmin.domain.timers import TimerLoop

    TimerLoop().run(_stop)


def start() -> None:
    _stop.clear()
    for name, (interval, step) in LOOPS.items():
        thread = threading.Thread(target=_loop, args=(name, interval, step), name=f"queenadmin-{name}", daemon=True)
        thread.start()
        _threads.append(thread)
    if settings.TIMER_LOOP_IN_SERVE:
        thread = threading.Thread(target=_timer_loop, name="queenadmin-timers", daemon=True)
        thread.start()
        _threads.append(thread)


def stop() -> None:
    from queenadmin.domain.timers import wake

    _stop.set()
    wake.wake_local()
    for thread in _threads:
        thread.join(timeout=5)
    _threads.clear()


async def lifespan(scope: dict[str, Any], receive: Any, send: Any) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            start()
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            stop()
            await send({"type": "lifespan.shutdown.complete"})
            return
