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
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from django.db import connection

from queenadmin.domain.queues.store.postgres import append_from_sql
from queenadmin.domain.timers.store.base import (
    DUE_COLUMNS,
    TABLE,
    WAKE_CHANNEL,
    Due,
    Key,
    Moved,
    NewRow,
    Resume,
    Store,
    WakeListener,
)
from queenadmin.plumbing import db

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: Before every timer: the start of the index.
_NEVER = "-infinity"
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

#: Take the due rows as ``_TAKE_DUE`` does and append them to the log in
#: the same statement (``append_from_sql``): nothing of a batch travels to
#: the client and back, and no row is planned in Python. The earliest left
#: is read only when the batch was not full (a full one steps again at
#: once). Where the log's set-based append does not apply, the taken rows
#: come back for the push path. ``(after_at, after_id)`` starts the scan
#: past the rows the previous full batch took: the index keeps a deleted
#: row's entry until a vacuum, and a step from the start of the index
#: steps over every timer fired since (measured with autovacuum off, 300,000
#: timers fired: one such scan read 7,430 pages, 60-130 ms; 10,000 more
#: fired in batches of 256 cost PostgreSQL 430-1,030 us a timer, resumed
#: 45-55).
_MOVE_DUE = (
    f"WITH picked AS (SELECT id, fire_at, length(payload_json) AS n FROM {TABLE}"
    " WHERE fire_at <= %(now)s AND (fire_at, id) > (%(after_at)s, %(after_id)s)"
    " ORDER BY fire_at, id LIMIT %(limit)s FOR UPDATE SKIP LOCKED),"
    " sized AS (SELECT id, row_number() OVER w AS k, sum(n) OVER w AS total FROM picked"
    " WINDOW w AS (ORDER BY fire_at, id)),"
    " taken AS MATERIALIZED (SELECT id FROM sized WHERE k = 1 OR total <= %(max_bytes)s),"
    # ``= ANY(ARRAY(...))``: probes of the primary key, where a join with
    # ``taken`` was planned as a hash join over the whole table.
    f" gone AS (DELETE FROM {TABLE} AS t WHERE t.id = ANY(ARRAY(SELECT id FROM taken))"
    f" RETURNING {_GONE_COLUMNS}, t.fire_at),"
    " src AS MATERIALIZED (SELECT gone.*, row_number() OVER (ORDER BY fire_at, id) AS seq FROM gone)"
    + append_from_sql("src")
    + f" SELECT {DUE_COLUMNS}, fire_at, NULL::bigint, NULL::bigint, NULL::text[], NULL::text[], NULL::timestamptz,"
    " NULL::bigint[] FROM gone WHERE NOT (SELECT applied FROM log_append)"
    f" UNION ALL SELECT {_NULLS}, NULL, (SELECT count(*) FROM taken), (SELECT appended FROM log_append),"
    " (SELECT queues FROM log_append), (SELECT array_agg(DISTINCT queue) FROM gone),"
    f" (SELECT fire_at FROM {TABLE} WHERE (SELECT count(*) FROM taken) < %(limit)s"
    " AND id NOT IN (SELECT id FROM taken) ORDER BY fire_at, id LIMIT 1),"
    " (SELECT ARRAY[extract(epoch FROM fire_at) * 1000000, id]::bigint[] FROM gone ORDER BY fire_at DESC, id DESC LIMIT 1)"
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

    def move_due(self, now: datetime, limit: int, max_bytes: int, after: Resume | None = None) -> Moved:
        """One statement (``_MOVE_DUE``); rows another step holds are skipped."""
        assert connection.in_atomic_block
        after_at, after_id = (-1, 0) if after is None else after
        params = {
            "now": db.to_db_time(now),
            "limit": limit,
            "max_bytes": max_bytes,
            # Whole microseconds since the epoch: exact both ways.
            "after_at": db.to_db_time(_EPOCH + timedelta(microseconds=after_at)) if after_at >= 0 else _NEVER,
            "after_id": after_id,
        }
        with connection.cursor() as cur:
            cur.execute(_MOVE_DUE, params)
            records = cur.fetchall()
        (*_, taken, appended, queues, due_queues, upcoming, last) = next(r for r in records if r[0] is None)
        rows = sorted((r for r in records if r[0] is not None), key=lambda r: (r[9], r[0]))
        return Moved(
            taken=int(taken),
            appended=int(appended),
            queues=list(queues or ()),
            due_queues=sorted(due_queues or ()),
            left=[Due(*r[:-7]) for r in rows],
            upcoming=db.from_db_time(upcoming),
            known_next=int(taken) < limit,
            last=None if last is None else (int(last[0]), int(last[1])),
        )

    def notify_wake(self) -> None:
        assert connection.in_atomic_block
        with connection.cursor() as cur:
            cur.execute(f"NOTIFY {WAKE_CHANNEL}")

    def listen_wake(self) -> WakeListener | None:
        # None behind a transaction pooler without DATABASE_LISTEN_URL: the
        # loop's sleep is then cut to the poll interval (wake.wait_local).
        params = db.listen_params()
        return None if params is None else PostgresWakeListener(params)
