"""Timer rows on PostgreSQL: row locks, a set-based upsert, LISTEN/NOTIFY.

Claims lock the rows they read (``FOR UPDATE``; a fire step skips rows
another step holds), so a cancel or move waiting on a row a step holds
runs after the fire commits and finds the timer gone. A write that makes a
timer due soon sends ``NOTIFY`` in its transaction (delivered at commit,
dropped on rollback); each firing loop listens on a connection of its own.
"""

from __future__ import annotations

import select
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import psycopg
from django.db import connection

from queenadmin.domain.timers.store.base import (
    DUE_COLUMNS,
    TABLE,
    WAKE_CHANNEL,
    Due,
    Key,
    NewRow,
    Store,
    WakeListener,
)
from queenadmin.plumbing import db

_GONE_COLUMNS = ", ".join(f"t.{c.strip()}" for c in DUE_COLUMNS.split(","))
_NULLS = ", ".join(["NULL"] * len(DUE_COLUMNS.split(",")))
#: Claim, size and delete the due rows, and read the earliest one left, in
#: one statement. Every part sees the rows as they were before the DELETE:
#: the earliest left is read past the ids taken.
_TAKE_DUE = (
    f"WITH picked AS (SELECT id, fire_at, length(payload_json) AS n FROM {TABLE}"
    " WHERE fire_at <= %s ORDER BY fire_at, id LIMIT %s FOR UPDATE SKIP LOCKED),"
    " sized AS (SELECT id, row_number() OVER w AS k, sum(n) OVER w AS total FROM picked"
    " WINDOW w AS (ORDER BY fire_at, id)),"
    " taken AS (SELECT id FROM sized WHERE k = 1 OR total <= %s),"
    f" gone AS (DELETE FROM {TABLE} t USING taken WHERE t.id = taken.id RETURNING {_GONE_COLUMNS}, t.fire_at)"
    f" SELECT {DUE_COLUMNS}, fire_at, false FROM gone"
    f" UNION ALL SELECT {_NULLS}, (SELECT fire_at FROM {TABLE} WHERE id NOT IN (SELECT id FROM taken)"
    " ORDER BY fire_at, id LIMIT 1), true"
)


class PostgresWakeListener(WakeListener):
    def __init__(self, params: dict[str, Any]) -> None:
        self._conn = psycopg.connect(**params, autocommit=True)
        try:
            self._conn.execute(f"LISTEN {WAKE_CHANNEL}")
        except BaseException:
            self._conn.close()
            raise

    def wait(self, seconds: float, interrupt: int) -> bool:
        # One select on the connection's socket and ``interrupt``: no polling
        # while idle (slices of psycopg's ``notifies(timeout=)`` cost a few
        # ms of CPU a second), and a stop is seen at once.
        if self._received():
            return True
        ready, _, _ = select.select([self._conn.fileno(), interrupt], [], [], max(0.0, seconds))
        return interrupt in ready or (bool(ready) and self._received())

    def _received(self) -> bool:
        """Whether a notification is in (reads what the socket has, no wait)."""
        return any(True for _note in self._conn.notifies(timeout=0, stop_after=1))

    def close(self) -> None:
        self._conn.close()


class PostgresStore(Store):
    claim_due_lock = " FOR UPDATE SKIP LOCKED"
    claim_key_lock = " FOR UPDATE"
    bucket_sql = "FLOOR(EXTRACT(EPOCH FROM (deliver_at - %s)) / %s)::bigint"

    def upsert(self, rows: Sequence[NewRow], now: datetime) -> set[Key]:
        """One statement with server-bound arrays, whatever the row count."""
        assert connection.in_atomic_block
        if not rows:
            return set()
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

    def take_due(self, now: datetime, limit: int, max_bytes: int) -> tuple[list[Due], datetime | None]:
        """One statement (``_TAKE_DUE``); rows another step holds are skipped."""
        assert connection.in_atomic_block
        with connection.cursor() as cur:
            cur.execute(_TAKE_DUE, [db.to_db_time(now), limit, max_bytes])
            records = cur.fetchall()
        taken = sorted((r for r in records if not r[-1]), key=lambda r: (r[-2], r[0]))
        upcoming = next((r[-2] for r in records if r[-1]), None)
        return [Due(*r[:-2]) for r in taken], db.from_db_time(upcoming)

    def notify_wake(self) -> None:
        assert connection.in_atomic_block
        with connection.cursor() as cur:
            cur.execute(f"NOTIFY {WAKE_CHANNEL}")

    def listen_wake(self) -> WakeListener | None:
        # None behind a transaction pooler without DATABASE_LISTEN_URL: the
        # loop's sleep is then cut to the poll interval (wake.wait_local).
        params = db.listen_params()
        return None if params is None else PostgresWakeListener(params)
