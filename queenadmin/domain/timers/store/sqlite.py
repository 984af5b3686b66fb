"""Timer rows on SQLite: one writer at a time, no row locks, no wake channel.

A write transaction is exclusive from ``BEGIN IMMEDIATE`` (settings.py), so
a claim needs no lock and the upsert may read which keys exist before it
writes. Firing loops of other processes find new timers within
``TIMER_IDLE_SECONDS``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db import connection

from queenadmin.domain.timers.store.base import CHUNK, DUE_COLUMNS, TABLE, Due, Key, NewRow, Store, where_keys
from queenadmin.plumbing import db

#: Size and delete the due rows in one statement (the writer is alone).
_TAKE_DUE = (
    f"DELETE FROM {TABLE} WHERE id IN (SELECT id FROM (SELECT id, row_number() OVER w AS k,"
    f" sum(length(payload_json)) OVER w AS total FROM (SELECT id, fire_at, payload_json FROM {TABLE}"
    " WHERE fire_at <= %s ORDER BY fire_at, id LIMIT %s) WINDOW w AS (ORDER BY fire_at, id))"
    f" WHERE k = 1 OR total <= %s) RETURNING {DUE_COLUMNS}, fire_at"
)


class SqliteStore(Store):
    # Whole seconds on both sides: exact, where julianday's days are floats.
    bucket_sql = "(CAST(strftime('%%s', deliver_at) AS INTEGER) - CAST(strftime('%%s', %s) AS INTEGER)) / %s"

    def take_due(self, now: datetime, limit: int, max_bytes: int) -> tuple[list[Due], datetime | None]:
        """Two statements: the DELETE (RETURNING in no set order), then the earliest left."""
        assert connection.in_atomic_block
        with connection.cursor() as cur:
            cur.execute(_TAKE_DUE, [db.to_db_time(now), limit, max_bytes])
            records = sorted(cur.fetchall(), key=lambda r: (db.from_db_time(r[-1]), r[0]))
        return [Due(*r[:-1]) for r in records], self.next_fire_at()

    def upsert(self, rows: Sequence[NewRow], now: datetime) -> set[Key]:
        assert connection.in_atomic_block
        if not rows:
            return set()
        existed: set[Key] = set()
        with connection.cursor() as cur:
            for start in range(0, len(rows), CHUNK):
                chunk = rows[start : start + CHUNK]
                cur.execute(
                    f"SELECT queue, timer_key FROM {TABLE} WHERE {where_keys(len(chunk))}",
                    [v for r in chunk for v in (r.queue, r.timer_key)],
                )
                existed.update((q, k) for q, k in cur.fetchall())
            stamp = db.to_db_time(now)
            cur.executemany(
                f"INSERT INTO {TABLE} (queue, timer_key, partition, deliver_at, fire_at, txn, message_id,"
                " payload, payload_json, encrypted, producer_sub, attempts, last_error, created_at, updated_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, 0, NULL, %s, %s)"
                " ON CONFLICT (queue, timer_key) DO UPDATE SET partition = excluded.partition,"
                " deliver_at = excluded.deliver_at, fire_at = excluded.fire_at, txn = excluded.txn,"
                " message_id = excluded.message_id, payload = excluded.payload,"
                " payload_json = excluded.payload_json, encrypted = excluded.encrypted,"
                " producer_sub = excluded.producer_sub, attempts = 0, last_error = NULL,"
                " updated_at = excluded.updated_at",
                [
                    (
                        r.queue,
                        r.timer_key,
                        r.partition,
                        db.to_db_time(r.deliver_at),
                        db.to_db_time(r.deliver_at),
                        r.txn,
                        r.message_id,
                        r.payload,
                        r.payload_json,
                        r.encrypted,
                        r.producer_sub,
                        stamp,
                        stamp,
                    )
                    for r in rows
                ],
            )
        return existed
