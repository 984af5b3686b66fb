"""Where stream state lives: one small interface, one class per database.

``store()`` answers the implementation for the default connection. The
rules (what a cycle applies, in which order) are in ``streams.ops``.
"""

from __future__ import annotations

from collections.abc import Callable

from queenadmin.domain.streams.store.base import StateFilter, StateRow, Store
from queenadmin.domain.streams.store.postgres import PostgresStore
from queenadmin.domain.streams.store.sqlite import SqliteStore
from queenadmin.plumbing import db

__all__ = ["PostgresStore", "SqliteStore", "StateFilter", "StateRow", "Store", "store"]

store: Callable[[], Store] = db.by_vendor(postgres=PostgresStore(), sqlite=SqliteStore())
