"""The attention list's facts on PostgreSQL: the shared SQL, its ticks kept whole."""

from __future__ import annotations

from typing import ClassVar

from queenadmin.domain.attention.store.base import Store


class PostgresStore(Store):
    _MATERIALIZED: ClassVar[str] = "MATERIALIZED"
