"""Queue rows on SQLite: one writer at a time, so no row locks.

A write transaction is exclusive from ``BEGIN IMMEDIATE`` (settings.py):
where PostgreSQL locks queue and partition rows, this store only reads
them, and the writers' compare-and-set updates keep them correct all the
same. Lists of values go as ``IN (...)`` in chunks well below SQLite's
host parameter limit.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any, ClassVar

from django.db import connection
from django.db.models import BigIntegerField, F, Func, TextField

from queenadmin.domain.queues.store.base import (
    LocatedRow,
    MessageRow,
    RecentRow,
    Store,
    chunks,
    error_signature_of,
    options_of,
)
from queenadmin.plumbing.db import from_db_time, to_db_time

#: SQLite's host parameter limit is 32766; stay far below it.
CHUNK = 500


def _marks(values: Sequence[object]) -> str:
    return ",".join("%s" for _ in values)


class ErrorSignature(Func):
    """``error_signature_of``, run by SQLite as a function of this connection."""

    function = "qa_error_signature"
    output_field = TextField()

    def as_sql(self, compiler: Any, connection: Any, **extra: Any) -> tuple[str, Sequence[Any]]:  # type: ignore[override]
        connection.ensure_connection()
        # SQLite refuses to replace a function while a statement runs: then
        # this connection has it already.
        with contextlib.suppress(sqlite3.OperationalError):
            connection.connection.create_function(self.function, 1, error_signature_of, deterministic=True)
        return super().as_sql(compiler, connection, **extra)


class UnixMicros(Func):
    """A timestamp as microseconds since the epoch. Django stores one as
    ``YYYY-MM-DD HH:MM:SS[.ffffff]`` in UTC: whole seconds from
    ``strftime('%s')`` of the text up to the seconds (SQLite would round a
    fraction to milliseconds, ``59.999999`` up to the next second), the
    fraction's six digits (or none) read as they are."""

    template = (
        "(CAST(strftime('%%%%s', substr(%(expressions)s, 1, 19)) AS INTEGER) * 1000000"
        " + CAST(substr(%(expressions)s, 21, 6) AS INTEGER))"
    )
    output_field = BigIntegerField()


class SqliteStore(Store):
    _PAYLOAD_BYTES: ClassVar[str] = "length(CAST(payload AS BLOB))"
    _BYTE_ORDER: ClassVar[str] = "BINARY"

    def lock_queue_ids(self, ids: Sequence[int], *, exclusive: bool = False) -> set[int]:
        if not ids:
            return set()
        with connection.cursor() as cur:
            cur.execute(f"SELECT id FROM queenadmin_queue WHERE id IN ({_marks(ids)})", list(ids))
            return {int(row[0]) for row in cur.fetchall()}

    def locate(self, pairs: Sequence[tuple[str, str]]) -> list[LocatedRow] | None:
        qnames = sorted({q for q, _ in pairs})
        pnames = sorted({p for _, p in pairs})
        if len(qnames) + len(pnames) > CHUNK:
            return None
        with connection.cursor() as cur:
            cur.execute(
                "SELECT q.name, q.id, q.options, p.name, p.id, p.next_offset FROM queenadmin_queue AS q"
                " JOIN queenadmin_partition AS p ON p.queue_id = q.id"
                f" WHERE q.name IN ({_marks(qnames)}) AND p.name IN ({_marks(pnames)})",
                [*qnames, *pnames],
            )
            rows = cur.fetchall()
        return [(qn, qid, options_of(o), pn, pid, nxt) for qn, qid, o, pn, pid, nxt in rows]

    def lock_partitions(self, ids: Sequence[int]) -> dict[int, int]:
        with connection.cursor() as cur:
            cur.execute(f"SELECT id, next_offset FROM queenadmin_partition WHERE id IN ({_marks(ids)})", list(ids))
            return dict(cur.fetchall())

    def recent_messages(self, pairs: Sequence[tuple[int, str]], since: datetime) -> list[RecentRow]:
        if not pairs:
            return []
        pids = sorted({p for p, _ in pairs})
        txns = sorted({t for _, t in pairs})
        rows: list[RecentRow] = []
        with connection.cursor() as cur:
            for chunk in chunks(txns, CHUNK):
                cur.execute(
                    "SELECT partition_id, transaction_id, message_id, msg_offset, created_at FROM queenadmin_message"
                    f" WHERE partition_id IN ({_marks(pids)}) AND transaction_id IN ({_marks(chunk)}) AND created_at > %s",
                    [*pids, *chunk, to_db_time(since)],
                )
                rows.extend((p, t, m, o, from_db_time(c)) for p, t, m, o, c in cur.fetchall())
        return rows

    def write_messages(
        self, rows: Sequence[MessageRow], partitions: dict[int, tuple[int, int]], now: datetime, queues: Sequence[str]
    ) -> None:
        # Nothing to notify: no other process listens (``notify``).
        with connection.cursor() as cur:
            cur.executemany(
                "UPDATE queenadmin_partition"
                " SET next_offset = %s, retained_bytes = retained_bytes + %s, last_push_at = %s WHERE id = %s",
                [(n, b, to_db_time(now), p) for p, (n, b) in partitions.items()],
            )
            cur.executemany(
                "INSERT INTO queenadmin_message"
                " (partition_id, msg_offset, transaction_id, message_id, payload, trace_id, producer_sub, created_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                [(*r, to_db_time(now)) for r in rows],
            )

    def error_signature(self, column: str) -> Func:
        return ErrorSignature(F(column))

    def unix_micros(self, column: str) -> Func:
        return UnixMicros(F(column))
