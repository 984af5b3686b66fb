"""Where timer rows live: one small interface, one class per database.

``store()`` answers the implementation for the default connection. Every
method runs inside whatever transaction the caller holds (the writes and
claims assert one), and none decides anything: the rules are in ``calls``,
``fire`` and ``operator``.
"""

from __future__ import annotations

from collections.abc import Callable

from queenadmin.domain.timers.store.base import (
    TABLE,
    Due,
    Endpoints,
    Held,
    Key,
    Moved,
    NewRow,
    Picked,
    Resume,
    Store,
    WakeListener,
    selected,
)
from queenadmin.domain.timers.store.postgres import PostgresStore
from queenadmin.domain.timers.store.sqlite import SqliteStore
from queenadmin.plumbing import db

__all__ = [
    "TABLE",
    "Due",
    "Endpoints",
    "Held",
    "Key",
    "Moved",
    "NewRow",
    "Picked",
    "PostgresStore",
    "Resume",
    "SqliteStore",
    "Store",
    "WakeListener",
    "selected",
    "store",
]

store: Callable[[], Store] = db.by_vendor(postgres=PostgresStore(), sqlite=SqliteStore())
