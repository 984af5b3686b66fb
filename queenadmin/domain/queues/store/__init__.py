"""Where queue rows live: one interface, one class per database.

Every SQL statement of the queue domain is here: ``base`` holds the
interface and the statements both databases share, ``postgres`` and
``sqlite`` the rest. ``store()`` answers the implementation for the
default connection; the modules of ``domain/queues`` call its typed
methods and hold no SQL and no vendor test.
"""

from __future__ import annotations

from collections.abc import Callable

from queenadmin.domain.queues.store.base import CHANNEL, Append, Store
from queenadmin.domain.queues.store.postgres import PostgresStore
from queenadmin.domain.queues.store.sqlite import SqliteStore
from queenadmin.plumbing import db

__all__ = ["CHANNEL", "Append", "PostgresStore", "SqliteStore", "Store", "store"]

store: Callable[[], Store] = db.by_vendor(postgres=PostgresStore(), sqlite=SqliteStore())
