"""Process samples on SQLite: the shared statements as they are."""

from __future__ import annotations

from queenadmin.domain.procmetrics.store.base import Store


class SqliteStore(Store):
    pass
