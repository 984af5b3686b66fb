"""Overview counts on PostgreSQL: date arithmetic, and the planner's estimate."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import connection

from queenadmin.domain.overview.store.base import Store


class PostgresStore(Store):
    _BUCKET: ClassVar[str] = "FLOOR(EXTRACT(EPOCH FROM (deliver_at - %s)) / %s)::int"

    def table_count(self, table: str, cap: int) -> tuple[int, int | None]:
        # The estimate rides along in the same statement, so the page's
        # query count does not change when the cap is passed.
        sql = (
            f"SELECT (SELECT COUNT(*) FROM (SELECT 1 FROM {table} LIMIT {cap + 1}) b),"
            " (SELECT reltuples::bigint FROM pg_class WHERE oid = %s::regclass)"
        )
        with connection.cursor() as cur:
            cur.execute(sql, [table])
            row: tuple[Any, ...] = cur.fetchone() or (0, None)
        estimate = int(row[1]) if row[1] is not None and row[1] >= 0 else None
        return int(row[0]), estimate
