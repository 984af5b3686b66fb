"""Where the overview's counts are read: one interface, one class per database.

``base`` holds the interface and the statements both databases share,
``postgres`` and ``sqlite`` what differs. ``store()`` answers the
implementation for the default connection.
"""

from __future__ import annotations

from collections.abc import Callable

from queenadmin.domain.overview.store.base import Store
from queenadmin.domain.overview.store.postgres import PostgresStore
from queenadmin.domain.overview.store.sqlite import SqliteStore
from queenadmin.plumbing import db

__all__ = ["PostgresStore", "SqliteStore", "Store", "store"]

store: Callable[[], Store] = db.by_vendor(postgres=PostgresStore(), sqlite=SqliteStore())
