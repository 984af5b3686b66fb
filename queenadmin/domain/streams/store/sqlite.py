"""Stream state on SQLite."""

from __future__ import annotations

from uuid import UUID

from django.db import connection

from queenadmin.domain.streams.store.base import Store


class SqliteStore(Store):
    def lock_partition(self, query_id: UUID, partition_id: int) -> None:
        # An IMMEDIATE transaction already holds the database's one write
        # lock from BEGIN, so cycles take turns without a lock of their own.
        assert connection.in_atomic_block
