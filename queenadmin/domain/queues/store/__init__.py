"""Where queue rows live: one interface, one class per database.

Every SQL statement of the queue domain is here: ``base`` holds the
interface and the statements both databases share, ``postgres`` and
``sqlite`` the rest. ``store()`` answers the implementation for the
default connection; the modules of ``domain/queues`` call its typed
methods and hold no SQL and no vendor test.
"""

from __future__ import annotations

from queenadmin.domain.db import is_postgres
from queenadmin.domain.queues.store.base import CHANNEL, Append, Store
from queenadmin.domain.queues.store.postgres import PostgresStore
from queenadmin.domain.queues.store.sqlite import SqliteStore

__all__ = ["CHANNEL", "Append", "PostgresStore", "SqliteStore", "Store", "store"]

_POSTGRES = PostgresStore()
_SQLITE = SqliteStore()


def store() -> Store:
    # ``is_postgres`` asks the connection once per process: a push calls
    # this several times and must not pay the connection proxy each time.
    return _POSTGRES if is_postgres() else _SQLITE
