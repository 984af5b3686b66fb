"""Process samples on PostgreSQL: the shared statements as they are."""

from __future__ import annotations

from queenadmin.domain.procmetrics.store.base import Store


class PostgresStore(Store):
    pass
