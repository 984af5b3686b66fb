"""The SQL of the ``Timer`` table, for both databases.

Every function runs inside the caller's transaction. On PostgreSQL the
upsert is one set-based statement with server-bound arrays; on SQLite the
write transaction is exclusive from BEGIN, so a read then a write is safe.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection

from queenadmin.domain import db

TABLE = "queenadmin_timer"
_CHUNK = 200


@dataclass(frozen=True, slots=True)
class NewRow:
    queue: str
    timer_key: str
    partition: str
    deliver_at: datetime
    txn: str
    message_id: str
    payload: bytes
    payload_json: str
    encrypted: bool
    producer_sub: str | None


def upsert(rows: Sequence[NewRow], now: datetime) -> set[tuple[str, str]]:
    """Write ``rows`` (new timers, or replacing pending ones); the keys that existed.

    A replaced timer keeps ``created_at``; attempts and the last error start
    again (a reschedule is a new timer under an old name).
    """
    assert connection.in_atomic_block
    if not rows:
        return set()
    if db.is_postgres():
        cols: list[list[Any]] = [
            [r.queue for r in rows],
            [r.timer_key for r in rows],
            [r.partition for r in rows],
            [r.deliver_at for r in rows],
            [r.txn for r in rows],
            [r.message_id for r in rows],
            [r.payload for r in rows],
            [r.payload_json for r in rows],
            [r.encrypted for r in rows],
            [r.producer_sub for r in rows],
        ]
        with db.server_cursor() as cur:
            cur.execute(
                f"INSERT INTO {TABLE} (queue, timer_key, partition, deliver_at, fire_at, txn, message_id,"
                " payload, payload_json, encrypted, producer_sub, attempts, last_error, created_at, updated_at)"
                " SELECT u.q, u.k, u.p, u.d, u.d, u.t, u.m, u.b, u.j, u.e, u.s, 0, NULL, %s, %s"
                " FROM unnest(%s::text[], %s::text[], %s::text[], %s::timestamptz[], %s::text[], %s::text[],"
                " %s::bytea[], %s::text[], %s::bool[], %s::text[]) AS u(q, k, p, d, t, m, b, j, e, s)"
                " ON CONFLICT (queue, timer_key) DO UPDATE SET partition = excluded.partition,"
                " deliver_at = excluded.deliver_at, fire_at = excluded.fire_at, txn = excluded.txn,"
                " message_id = excluded.message_id, payload = excluded.payload,"
                " payload_json = excluded.payload_json, encrypted = excluded.encrypted,"
                " producer_sub = excluded.producer_sub, attempts = 0, last_error = NULL,"
                " updated_at = excluded.updated_at"
                # xmax is 0 on a row this statement inserted (the documented
                # way to tell an upsert's insert from its update).
                " RETURNING queue, timer_key, NOT (xmax = 0)",
                [now, now, *cols],
            )
            return {(q, k) for q, k, existed in cur.fetchall() if existed}
    existed: set[tuple[str, str]] = set()
    with connection.cursor() as cur:
        for start in range(0, len(rows), _CHUNK):
            chunk = rows[start : start + _CHUNK]
            where = " OR ".join(["(queue = %s AND timer_key = %s)"] * len(chunk))
            cur.execute(
                f"SELECT queue, timer_key FROM {TABLE} WHERE {where}",
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


def delete_keys(keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """Delete the timers of ``keys``; the txn of each one that was there."""
    assert connection.in_atomic_block
    removed: dict[tuple[str, str], str] = {}
    with connection.cursor() as cur:
        for start in range(0, len(keys), _CHUNK):
            chunk = keys[start : start + _CHUNK]
            where = " OR ".join(["(queue = %s AND timer_key = %s)"] * len(chunk))
            cur.execute(
                f"DELETE FROM {TABLE} WHERE {where} RETURNING queue, timer_key, txn",
                [v for key in chunk for v in key],
            )
            removed.update({(q, k): t for q, k, t in cur.fetchall()})
    return removed


@dataclass(frozen=True, slots=True)
class Due:
    id: int
    queue: str
    timer_key: str
    partition: str
    txn: str
    message_id: str
    payload_json: str
    attempts: int


def claim_due(now: datetime, limit: int, max_bytes: int) -> list[Due]:
    """The timers due at ``now``, earliest first, locked for this transaction.

    On PostgreSQL rows another loop holds are skipped (SKIP LOCKED), so
    loops split the work; a cancel or move waiting on a row this step holds
    runs after the fire commits, and finds the timer gone. The batch stops
    at ``max_bytes`` of payload (at least one timer always goes).
    """
    assert connection.in_atomic_block
    lock = " FOR UPDATE SKIP LOCKED" if db.is_postgres() else ""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT id, queue, timer_key, partition, txn, message_id, payload_json, attempts"
            f" FROM {TABLE} WHERE fire_at <= %s ORDER BY fire_at, id LIMIT %s{lock}",
            [db.to_db_time(now), limit],
        )
        records = cur.fetchall()
    due: list[Due] = []
    size = 0
    for record in records:
        size += len(record[6])
        if due and size > max_bytes:
            break
        due.append(Due(*record))
    return due


def delete_ids(ids: Sequence[int]) -> None:
    assert connection.in_atomic_block
    with connection.cursor() as cur:
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            cur.execute(f"DELETE FROM {TABLE} WHERE id IN ({', '.join(['%s'] * len(chunk))})", list(chunk))


def next_fire_at() -> datetime | None:
    with connection.cursor() as cur:
        cur.execute(f"SELECT fire_at FROM {TABLE} ORDER BY fire_at, id LIMIT 1")
        record = cur.fetchone()
    return None if record is None else db.from_db_time(record[0])


def claim_key(queue: str, timer_key: str) -> Due | None:
    """One pending timer, locked for this transaction (it waits for a step
    that holds it, then finds it gone)."""
    assert connection.in_atomic_block
    lock = " FOR UPDATE" if db.is_postgres() else ""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT id, queue, timer_key, partition, txn, message_id, payload_json, attempts"
            f" FROM {TABLE} WHERE queue = %s AND timer_key = %s{lock}",
            [queue, timer_key],
        )
        record = cur.fetchone()
    return None if record is None else Due(*record)


def back_off(timer_id: int, *, attempts: int, error: str, fire_at: datetime, now: datetime) -> None:
    """Record a failed fire: try again at ``fire_at`` (the row stays cancellable)."""
    assert connection.in_atomic_block
    with connection.cursor() as cur:
        cur.execute(
            f"UPDATE {TABLE} SET attempts = %s, last_error = %s, fire_at = %s, updated_at = %s WHERE id = %s",
            [attempts, error[:2000], db.to_db_time(fire_at), db.to_db_time(now), timer_id],
        )
