"""A call on a thread of its own, for tests that make one caller wait on another."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from django.db import connections


def in_thread(fn: Callable[..., Any], *args: Any) -> tuple[threading.Thread, list[Any]]:
    """Start ``fn(*args)`` on a new thread; the list gets its answer, or the
    exception it raised, when it ends. The thread's database connections
    are closed then (each thread has its own)."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(fn(*args))
        except BaseException as exc:
            out.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out
