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

from queenadmin.domain.queues.store import CHANNEL as QUEUES_CHANNEL
from queenadmin.domain.timers.store.base import (
    DUE_COLUMNS,
    TABLE,
    WAKE_CHANNEL,
    Due,
    Key,
    Moved,
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


#: A queue's ``dedupWindowSeconds`` as ``QueueRef.dedup_window_seconds``
#: reads it (absent: 3600), or NULL when it is stored as anything but a
#: JSON integer (the statement then leaves the step to the general path).
_WINDOW = (
    "CASE WHEN NOT (q.options ? 'dedupWindowSeconds') THEN 3600"
    " WHEN jsonb_typeof(q.options -> 'dedupWindowSeconds') = 'number'"
    " AND (q.options ->> 'dedupWindowSeconds') ~ '^-?[0-9]{1,9}$'"
    " THEN (q.options ->> 'dedupWindowSeconds')::bigint END"
)

#: What ``_FIRE`` claims: the due timers, rows another step holds skipped.
_PICK_DUE = " WHERE fire_at <= %(now)s ORDER BY fire_at, id LIMIT %(limit)s FOR UPDATE SKIP LOCKED"
#: What ``_FIRE_AGAIN`` claims: the timers the run before claimed (and holds).
_PICK_AGAIN = " WHERE id = ANY(%(again)s::bigint[]) ORDER BY fire_at, id FOR UPDATE"

#: A step's whole fire in one statement: the due timers are claimed, sized,
#: deleted and appended to their partitions' logs inside PostgreSQL, so no
#: payload travels to the server and back and no Python runs per timer.
#:
#: The locks come in the order of a fire by the general path: the timer rows
#: (``SKIP LOCKED``: another step's are left to it), then as the queue
#: store's ``_LOCATE`` takes them, the queue rows (``FOR KEY SHARE``, by id;
#: the InitPlans of ``l`` read all of ``q`` before any partition is locked)
#: and the partitions (``FOR NO KEY UPDATE``, by id). When a (queue,
#: partition) pair is missing, a queue is capped (``maxSize``) or its
#: ``dedupWindowSeconds`` is not a plain integer, nothing is locked beyond
#: the timer rows and nothing is written: ``complete`` is false and the
#: caller takes the general path (which creates what is missing).
#:
#: The dedup read (a message of the timer's partition and txn inside the
#: queue's window, or an earlier timer of this batch with the same ones)
#: shares the statement's snapshot, taken before the partition locks. So
#: the statement writes only when no partition it locked has moved since
#: that snapshot (its ``next_offset`` read then, ``c.seen``, is the one it
#: locked): otherwise a push that committed while this step waited for the
#: lock could hold the same txn. ``fresh`` is false then, nothing is written,
#: and the caller runs ``_FIRE_AGAIN`` on the timers this run claimed (their
#: ids come back), in a snapshot taken after the locks it now holds. Writing, it does what a push does (``write_messages``):
#: the messages at the partitions' next offsets in due order, each
#: partition's ``next_offset``, ``retained_bytes`` and ``last_push_at``, and
#: a ``NOTIFY`` per queue that got messages, for waiting pops.
#:
#: Rows: one per queue that had timers taken (name, appended, duplicates),
#: then one with ``complete``, ``fresh``, the number taken and, when fewer
#: than the limit were (the loop will sleep), the earliest fire time left.
_FIRE = (
    f"WITH picked AS (SELECT id, fire_at, length(payload_json) AS n, queue, partition FROM {TABLE}"
    f"{_PICK_DUE}),"
    " sized AS (SELECT id, queue, partition, row_number() OVER w AS k, sum(n) OVER w AS total FROM picked"
    " WINDOW w AS (ORDER BY fire_at, id)),"
    " taken AS MATERIALIZED (SELECT id, queue, partition FROM sized WHERE k = 1 OR total <= %(max_bytes)s),"
    " w AS MATERIALIZED (SELECT DISTINCT queue AS qn, partition AS pn FROM taken),"
    " q AS MATERIALIZED (SELECT id, name, options FROM queenadmin_queue"
    " WHERE name IN (SELECT qn FROM w) ORDER BY id FOR KEY SHARE),"
    f" c AS MATERIALIZED (SELECT p.id, w.qn, w.pn, p.next_offset AS seen, {_WINDOW} AS win"
    " FROM w JOIN q ON q.name = w.qn JOIN queenadmin_partition AS p ON p.queue_id = q.id AND p.name = w.pn),"
    " l AS MATERIALIZED (SELECT id, next_offset FROM queenadmin_partition"
    " WHERE id IN (SELECT id FROM c) AND (SELECT count(*) FROM c) = (SELECT count(*) FROM w)"
    " AND NOT EXISTS (SELECT FROM q WHERE coalesce(q.options -> 'maxSize', 'null') NOT IN ('0', 'null'))"
    " AND NOT EXISTS (SELECT FROM c WHERE c.win IS NULL)"
    " ORDER BY id FOR NO KEY UPDATE),"
    " go AS MATERIALIZED (SELECT (SELECT count(*) FROM l) = (SELECT count(*) FROM w) AS complete,"
    " NOT EXISTS (SELECT FROM c JOIN l USING (id) WHERE l.next_offset <> c.seen) AS fresh),"
    # = ANY(ARRAY(...)), not a join with ``taken``: a join of a few hundred
    # estimated rows was planned as a sequential scan of the whole table.
    f" gone AS (DELETE FROM {TABLE} AS t WHERE t.id = ANY(ARRAY(SELECT id FROM taken))"
    " AND (SELECT complete AND fresh FROM go)"
    " RETURNING t.id, t.fire_at, t.queue, t.partition, t.txn, t.message_id, t.payload_json, t.producer_sub),"
    " g AS MATERIALIZED (SELECT gone.*, c.id AS pid, c.win,"
    " row_number() OVER (PARTITION BY c.id, gone.txn ORDER BY gone.fire_at, gone.id) AS nth"
    " FROM gone JOIN c ON c.qn = gone.queue AND c.pn = gone.partition),"
    # LIMIT 1 keeps each probe a subquery (never pulled up into a join, the
    # queue store's RECENT explains why) and a lookup of the (partition,
    # transactionId) index that stops at the first message.
    " d AS MATERIALIZED (SELECT g.*, g.win > 0 AND (g.nth > 1 OR EXISTS (SELECT FROM (SELECT FROM queenadmin_message AS m"
    " WHERE m.partition_id = g.pid AND m.transaction_id = g.txn"
    " AND m.created_at > %(now)s - make_interval(secs => g.win) LIMIT 1) AS s)) AS dup FROM g),"
    " f AS MATERIALIZED (SELECT d.*, row_number() OVER (PARTITION BY d.pid ORDER BY d.fire_at, d.id) - 1 AS k"
    " FROM d WHERE NOT d.dup),"
    " i AS (INSERT INTO queenadmin_message"
    " (partition_id, msg_offset, transaction_id, message_id, payload, trace_id, producer_sub, created_at)"
    " SELECT f.pid, l.next_offset + f.k, f.txn, f.message_id, f.payload_json, NULL, f.producer_sub, %(now)s"
    " FROM f JOIN l ON l.id = f.pid),"
    " u AS (UPDATE queenadmin_partition AS p SET next_offset = p.next_offset + s.n,"
    " retained_bytes = p.retained_bytes + s.b, last_push_at = %(now)s"
    " FROM (SELECT pid, count(*) AS n, sum(octet_length(payload_json)) AS b FROM f GROUP BY pid) AS s"
    " WHERE p.id = s.pid)"
    " SELECT queue, count(*) FILTER (WHERE NOT dup), count(*) FILTER (WHERE dup), NULL::boolean, NULL::boolean,"
    " NULL::bigint, NULL::bigint[], NULL::timestamptz FROM d GROUP BY queue"
    " UNION ALL SELECT NULL, NULL, NULL, go.complete, go.fresh, (SELECT count(*) FROM taken),"
    " CASE WHEN go.complete AND NOT go.fresh THEN ARRAY(SELECT id FROM taken) END,"
    " CASE WHEN go.complete AND go.fresh AND (SELECT count(*) FROM taken) < %(limit)s"
    f" THEN (SELECT fire_at FROM {TABLE} WHERE id NOT IN (SELECT id FROM taken) ORDER BY fire_at, id LIMIT 1) END"
    f" FROM go WHERE (SELECT count(pg_notify('{QUEUES_CHANNEL}', x.queue)) FROM (SELECT DISTINCT queue FROM f) AS x) >= 0"
)
#: ``_FIRE`` on the timers a stale run claimed, not on what is due by then:
#: the same rows, so the same partitions, whose locks the step now holds.
_FIRE_AGAIN = _FIRE.replace(_PICK_DUE, _PICK_AGAIN, 1)


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

    def fire_due(self, now: datetime, limit: int, max_bytes: int) -> Moved | None:
        """``_FIRE``, and ``_FIRE_AGAIN`` when what it locked had moved; None:
        the general path (``take_due`` and a push) must fire this step."""
        assert connection.in_atomic_block
        params: dict[str, Any] = {"now": db.to_db_time(now), "limit": limit, "max_bytes": max_bytes}
        for statement in (_FIRE, _FIRE_AGAIN):
            with connection.cursor() as cur:
                cur.execute(statement, params)
                records = cur.fetchall()
            *queues, (_, _, _, complete, fresh, taken, again, upcoming) = records
            if not complete:
                return None
            params["again"] = list(again or [])
            if fresh:
                return Moved(
                    taken=int(taken),
                    appended={q: int(n) for q, n, _dups, *_ in queues},
                    duplicates=sum(int(dups) for _q, _n, dups, *_ in queues),
                    upcoming=db.from_db_time(upcoming),
                )
        return None

    def notify_wake(self) -> None:
        assert connection.in_atomic_block
        with connection.cursor() as cur:
            cur.execute(f"NOTIFY {WAKE_CHANNEL}")

    def listen_wake(self) -> WakeListener | None:
        # None behind a transaction pooler without DATABASE_LISTEN_URL: the
        # loop's sleep is then cut to the poll interval (wake.wait_local).
        params = db.listen_params()
        return None if params is None else PostgresWakeListener(params)
