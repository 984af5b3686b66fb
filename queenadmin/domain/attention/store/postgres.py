"""The attention list's facts on PostgreSQL: the shared SQL, nothing of its own."""

from __future__ import annotations

from queenadmin.domain.attention.store.base import Store


class PostgresStore(Store):
    pass
