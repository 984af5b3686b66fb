"""Waking the firing loops when a timer comes due sooner than they would look.

A loop sleeps until its next due timer (at most ``TIMER_IDLE_SECONDS``). A
write that makes a timer due before that calls ``on_commit``; after commit:

- loops of this process wake at once (a condition variable);
- where the database has a notification channel (PostgreSQL), every loop
  of every replica wakes through the store's ``notify_wake``, sent in the
  writing transaction (delivered at commit, dropped on rollback). Each loop
  listens on a connection of its own (``listen_wake``). Behind a
  transaction pooler without ``DATABASE_LISTEN_URL`` there is no such
  connection: a loop then sleeps at most ``db.wake_poll_seconds()`` before it
  looks again.
"""

from __future__ import annotations

import contextlib
import os
import threading
from datetime import datetime, timedelta

from django.db import connection, transaction

from queenadmin.conf import settings
from queenadmin.domain.timers.store import store
from queenadmin.plumbing import db

_cond = threading.Condition()
_generation = 0
#: Written by ``wake_local``: a loop that sleeps in ``select`` on its
#: listener's socket watches the read end too (``local_fd``).
_pipe_r, _pipe_w = os.pipe()
os.set_blocking(_pipe_r, False)
os.set_blocking(_pipe_w, False)


def generation() -> int:
    return _generation


def wake_local() -> None:
    global _generation
    with _cond:
        _generation += 1
        _cond.notify_all()
    # Full: a wake is already pending, which is all this says.
    with contextlib.suppress(BlockingIOError):
        os.write(_pipe_w, b"w")


def local_fd() -> int:
    """A file descriptor that turns readable on ``wake_local``."""
    return _pipe_r


def drain_local() -> None:
    """Read ``local_fd`` empty (after waking on it)."""
    with contextlib.suppress(BlockingIOError):
        while os.read(_pipe_r, 4096):
            pass


def wait_local(seen: int, timeout: float) -> None:
    """Sleep up to ``timeout`` seconds unless woken after ``seen`` was read.

    Behind a transaction pooler with nothing to listen on, at most the poll
    interval: the caller then looks at the database again.
    """
    poll = db.wake_poll_seconds()
    if poll is not None:
        timeout = min(timeout, poll)
    with _cond:
        if _generation == seen:
            _cond.wait(max(0.0, timeout))


def on_commit(due: datetime, now: datetime) -> None:
    """Wake the loops after commit if ``due`` is within their longest sleep.

    Must run inside the writing transaction.
    """
    assert connection.in_atomic_block
    if due - now > timedelta(seconds=settings.TIMER_IDLE_SECONDS):
        return
    store().notify_wake()
    transaction.on_commit(wake_local)
