"""Where process samples live: one interface, one class per database."""

from __future__ import annotations

from collections.abc import Callable

from queenadmin.domain.procmetrics.store.base import SampleRow, Store
from queenadmin.domain.procmetrics.store.postgres import PostgresStore
from queenadmin.domain.procmetrics.store.sqlite import SqliteStore
from queenadmin.plumbing import db

__all__ = ["PostgresStore", "SampleRow", "SqliteStore", "Store", "store"]

store: Callable[[], Store] = db.by_vendor(postgres=PostgresStore(), sqlite=SqliteStore())
