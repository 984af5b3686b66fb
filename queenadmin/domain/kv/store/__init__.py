"""Where KV rows live: one small interface, one class per database.

``store()`` answers the implementation for the default connection. Every
method runs inside whatever transaction the caller holds (or autocommit),
and none decides anything: the rules are in ``planner``.
"""

from __future__ import annotations

from collections.abc import Callable

from queenadmin.domain.kv.store.base import TABLE, Store
from queenadmin.domain.kv.store.postgres import PostgresStore
from queenadmin.domain.kv.store.sqlite import SqliteStore
from queenadmin.plumbing import db

__all__ = ["TABLE", "PostgresStore", "SqliteStore", "Store", "store"]

store: Callable[[], Store] = db.by_vendor(postgres=PostgresStore(), sqlite=SqliteStore())
