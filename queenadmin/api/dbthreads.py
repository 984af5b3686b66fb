"""Run synchronous database work from async views on a few fixed threads.

Why not ``sync_to_async``: under Django's ASGI handler its thread-sensitive
mode gives every request a thread of its own, so every long-poll pop would
open (and leave behind) a database connection. These threads keep one
persistent connection each (``CONN_MAX_AGE`` applies as usual) or, with
the connection pool, take one per job; a waiting pop holds none of them
while it waits. The domain functions called
here open their own ``transaction.atomic``; nothing async does.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from django.db import close_old_connections

from queenadmin.conf import settings
from queenadmin.server.wsgi_bridge import ThreadHop

T = TypeVar("T")

_threads: ThreadHop | None = None
_lock = threading.Lock()


def _pool() -> ThreadHop:
    # ThreadHop, not a ThreadPoolExecutor: one asyncio future settled by one
    # call_soon_threadsafe, where run_in_executor chains two futures.
    global _threads
    if _threads is None:
        with _lock:
            if _threads is None:
                _threads = ThreadHop(settings.POP_DB_THREADS, "queenadmin-db", skip_cancelled=True)
    return _threads


def _call(fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> T:
    close_old_connections()
    try:
        return fn(*args, **kwargs)
    finally:
        # With a connection pool (CONN_MAX_AGE=0) this hands the connection
        # back between jobs; a persistent connection stays.
        close_old_connections()


async def run(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Await ``fn(*args, **kwargs)`` run on a database thread."""
    return await _pool().run(_call, fn, args, kwargs)
