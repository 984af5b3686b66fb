"""The overview store interface, and the SQL both databases share.

Every count stops at ``cap + 1`` rows read (the caller tells a capped count
from an exact one by that extra row); nothing here locks or writes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from django.db import connection

from queenadmin.plumbing.db import from_db_time, to_db_time

KV_TABLE = "queenadmin_kventry"
TIMER_TABLE = "queenadmin_timer"


def _count_upto(sql: str, params: list[Any], cap: int) -> int:
    """Rows of ``sql`` up to ``cap + 1``, in one statement."""
    with connection.cursor() as cur:
        cur.execute(f"SELECT COUNT(*) FROM ({sql} LIMIT {cap + 1}) b", params)
        (n,) = cur.fetchone() or (0,)
    return int(n)


class Store:
    """What the overview needs of a database. Subclasses fill in the rest."""

    #: The 0-based bucket of ``deliver_at`` from the first parameter, in
    #: buckets of the second parameter's seconds, as SQL.
    _BUCKET: ClassVar[str] = ""

    def table_count(self, table: str, cap: int) -> tuple[int, int | None]:
        """Rows of ``table`` up to ``cap + 1``, and the planner's estimate of all (or None)."""
        return _count_upto(f"SELECT 1 FROM {table}", [], cap), None

    def live_keys(self, namespace: str, *, now: datetime, cap: int) -> int:
        """Live KV keys of one namespace, up to ``cap + 1``."""
        sql = f"SELECT 1 FROM {KV_TABLE} WHERE namespace = %s AND (expires_at IS NULL OR expires_at > %s)"
        return _count_upto(sql, [namespace, to_db_time(now)], cap)

    def timers_due_before(self, moment: datetime, *, cap: int) -> int:
        """Timers due before ``moment``, up to ``cap + 1``."""
        return _count_upto(f"SELECT 1 FROM {TIMER_TABLE} WHERE deliver_at < %s", [to_db_time(moment)], cap)

    def timer_buckets(
        self, *, start: datetime, end: datetime, bucket_seconds: float, cap: int
    ) -> list[tuple[int, int]]:
        """(bucket from ``start``, timers) of the first ``cap + 1`` timers due in ``[start, end)``.

        One statement reading the ``deliver_at`` index in due order, grouped
        in the database.
        """
        first, last = to_db_time(start), to_db_time(end)
        sql = (
            f"SELECT {self._BUCKET} AS b, COUNT(*) FROM (SELECT deliver_at FROM {TIMER_TABLE}"
            f" WHERE deliver_at >= %s AND deliver_at < %s ORDER BY deliver_at LIMIT {cap + 1}) w"
            f" GROUP BY 1 ORDER BY 1"
        )
        with connection.cursor() as cur:
            cur.execute(sql, [first, bucket_seconds, first, last])
            return [(int(index), int(n)) for index, n in cur.fetchall()]

    def next_timer_due(self) -> datetime | None:
        """When the first pending timer is due (the index's first entry)."""
        with connection.cursor() as cur:
            cur.execute(f"SELECT deliver_at FROM {TIMER_TABLE} ORDER BY deliver_at, id LIMIT 1")
            first = cur.fetchone()
        return None if first is None else from_db_time(first[0])
