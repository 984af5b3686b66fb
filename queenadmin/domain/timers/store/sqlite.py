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

from queenadmin.domain import db
from queenadmin.domain.timers.store.base import CHUNK, TABLE, Key, NewRow, Store, where_keys


class SqliteStore(Store):
    # Whole seconds on both sides: exact, where julianday's days are floats.
    bucket_sql = "(CAST(strftime('%%s', deliver_at) AS INTEGER) - CAST(strftime('%%s', %s) AS INTEGER)) / %s"

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
