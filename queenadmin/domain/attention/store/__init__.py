"""Where the attention list's facts are read: one interface, one class per database.

``base`` holds the interface and the statement both databases share,
``postgres`` and ``sqlite`` the date arithmetic that differs. ``store()``
answers the implementation for the default connection.
"""

from __future__ import annotations

from collections.abc import Callable

from queenadmin.domain.attention.store.base import FactsRow, Store, ThresholdRow
from queenadmin.domain.attention.store.postgres import PostgresStore
from queenadmin.domain.attention.store.sqlite import SqliteStore
from queenadmin.plumbing import db

__all__ = ["FactsRow", "PostgresStore", "SqliteStore", "Store", "ThresholdRow", "store"]

store: Callable[[], Store] = db.by_vendor(postgres=PostgresStore(), sqlite=SqliteStore())
