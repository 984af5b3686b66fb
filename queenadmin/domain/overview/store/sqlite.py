"""Overview counts on SQLite: date arithmetic in Julian days, no estimates."""

from __future__ import annotations

from typing import ClassVar

from queenadmin.domain.overview.store.base import Store


class SqliteStore(Store):
    _BUCKET: ClassVar[str] = "CAST((julianday(deliver_at) - julianday(%s)) * 86400.0 / %s AS INTEGER)"
