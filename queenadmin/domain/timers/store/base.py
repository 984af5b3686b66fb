"""The timer store interface, its rows, and the SQL both databases share."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import F, QuerySet

from queenadmin.domain.kv.store.base import prefix_range, prefix_upper_bound
from queenadmin.domain.timers.ops import TimerFilter
from queenadmin.models import Timer
from queenadmin.plumbing import db

TABLE = "queenadmin_timer"
#: The PostgreSQL channel a timer write notifies and the firing loops
#: listen on.
WAKE_CHANNEL = "queenadmin_timers"
#: SQLite's host parameter limit is 32766; stay far below it.
CHUNK = 200

Key = tuple[str, str]

#: The columns of a ``Due``, in its field order.
DUE_COLUMNS = "id, queue, timer_key, partition, txn, message_id, payload_json, attempts, producer_sub"
#: The columns of a ``Held``, in its field order.
HELD_COLUMNS = DUE_COLUMNS + ", deliver_at, payload, encrypted"


@dataclass(frozen=True, slots=True)
class NewRow:
    """A timer to schedule (or to replace the pending one of its key)."""

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


@dataclass(frozen=True, slots=True)
class Due:
    """What firing a timer needs of its row."""

    id: int
    queue: str
    timer_key: str
    partition: str
    txn: str
    message_id: str
    payload_json: str
    attempts: int
    #: Who scheduled it: the fire's ``producerSub``.
    producer_sub: str | None


@dataclass(frozen=True, slots=True)
class Held(Due):
    """A pending timer whose row the caller's transaction holds, read whole."""

    deliver_at: datetime
    payload: bytes
    encrypted: bool


#: Where a step's scan of due timers may start: past the (fire time in
#: microseconds since the epoch, id) of the last timer the previous full
#: batch took.
Resume = tuple[int, int]


@dataclass(frozen=True, slots=True)
class Moved:
    """What ``move_due`` did with the due timers it took."""

    #: Timers taken: gone for this transaction's later statements.
    taken: int
    #: Messages the store appended to the log for them; the rest of the
    #: taken it appended were duplicates of the log (or of each other).
    appended: int
    #: The queues it appended to, sorted.
    queues: list[str]
    #: The queues of every timer taken, sorted.
    due_queues: list[str]
    #: Taken timers it did not append, earliest first: the caller pushes them.
    left: list[Due]
    #: The fire time of the earliest timer left, if ``known_next``.
    upcoming: datetime | None
    known_next: bool
    #: The last timer taken, for the next step's ``after`` (None: none
    #: taken, or the database has no use for it).
    last: Resume | None = None


class WakeListener:
    """A connection of its own that hears timer writes of every process."""

    def wait(self, seconds: float, interrupt: int) -> bool:
        """Sleep up to ``seconds``, or until a wake comes or the file
        descriptor ``interrupt`` turns readable; True when either happened.
        It may return False early (something else arrived): the caller
        waits again for what is left."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class Endpoints:
    """The ends of what a filter selects."""

    first_due: datetime | None
    last_due: datetime | None
    #: The highest id among them (a bulk action stops there); 0 unless asked.
    last_id: int


@dataclass(frozen=True, slots=True)
class Picked:
    """A timer a bulk action holds: what it needs to act and to report."""

    id: int
    queue: str
    deliver_at: datetime


def selected(selection: TimerFilter) -> QuerySet[Timer]:
    """The pending timers ``selection`` names, as a queryset (no order).

    The key prefix is a byte-order range, so with a queue it reads the
    ``(queue, timer_key)`` index; the due range reads ``deliver_at``'s.
    """
    rows = Timer.objects.all()
    if selection.queue:
        rows = rows.filter(queue=selection.queue)
    if selection.key_prefix:
        rows = rows.filter(prefix_range("timer_key", selection.key_prefix))
    if selection.due_from is not None:
        rows = rows.filter(deliver_at__gte=selection.due_from)
    if selection.due_to is not None:
        rows = rows.filter(deliver_at__lt=selection.due_to)
    return rows


def where_sql(selection: TimerFilter) -> tuple[str, list[Any]]:
    """``selected(selection)`` as a WHERE clause and its parameters."""
    clauses, params = ["1 = 1"], []
    if selection.queue:
        clauses.append("queue = %s")
        params.append(selection.queue)
    if selection.key_prefix:
        clauses.append("timer_key >= %s")
        params.append(selection.key_prefix)
        upper = prefix_upper_bound(selection.key_prefix)
        if upper is not None:
            clauses.append("timer_key < %s")
            params.append(upper)
    if selection.due_from is not None:
        clauses.append("deliver_at >= %s")
        params.append(db.to_db_time(selection.due_from))
    if selection.due_to is not None:
        clauses.append("deliver_at < %s")
        params.append(db.to_db_time(selection.due_to))
    return " AND ".join(clauses), params


def where_keys(count: int) -> str:
    return " OR ".join(["(queue = %s AND timer_key = %s)"] * count)


def held_of(record: Sequence[Any]) -> Held:
    """A ``Held`` from a row of ``HELD_COLUMNS``."""
    return Held(
        id=int(record[0]),
        queue=record[1],
        timer_key=record[2],
        partition=record[3],
        txn=record[4],
        message_id=record[5],
        payload_json=record[6],
        attempts=int(record[7]),
        producer_sub=record[8],
        deliver_at=db.from_db_time(record[9]),
        payload=bytes(record[10]),
        encrypted=bool(record[11]),
    )


class Store:
    """What the timers domain needs of a database. Subclasses fill in the rest.

    Every write runs inside the caller's transaction (it asserts one).
    """

    #: Appended to the due-timers claim: how it locks the rows it reads.
    claim_due_lock = ""
    #: Appended to the one-key claim.
    claim_key_lock = ""
    #: The 0-based bucket of ``deliver_at`` from the first parameter (a
    #: whole second), in buckets of the second parameter's whole seconds.
    bucket_sql = ""

    def endpoints(self, selection: TimerFilter, *, with_last_id: bool = False) -> Endpoints:
        """The first and last due time ``selection`` selects (None when it
        selects nothing) and, asked for, its highest id (else 0).

        One statement: each figure is one end of an index.
        """
        where, params = where_sql(selection)
        last_id = f"(SELECT MAX(id) FROM {TABLE} WHERE {where})" if with_last_id else "0"
        sql = (
            f"SELECT (SELECT deliver_at FROM {TABLE} WHERE {where} ORDER BY deliver_at LIMIT 1),"
            f" (SELECT deliver_at FROM {TABLE} WHERE {where} ORDER BY deliver_at DESC LIMIT 1), {last_id}"
        )
        with connection.cursor() as cur:
            cur.execute(sql, params * (3 if with_last_id else 2))
            first, last, top = cur.fetchone()
        return Endpoints(db.from_db_time(first), db.from_db_time(last), int(top or 0))

    def range_counts(
        self, selection: TimerFilter, bounds: Sequence[datetime], cursor: tuple[datetime, int] | None = None
    ) -> tuple[list[int], int]:
        """How many timers of ``selection`` fall due in each ``[bounds[i],
        bounds[i + 1])``, and how many sort at or before ``cursor``
        (``(deliver_at, id)``; 0 without one).

        One statement of range counts, each an index range: no sort and no
        expression per row, so 100,000 timers count in a few milliseconds.
        """
        where, params = where_sql(selection)
        parts: list[str] = []
        args: list[Any] = []
        for low, high in itertools.pairwise(bounds):
            parts.append(f"(SELECT COUNT(*) FROM {TABLE} WHERE {where} AND deliver_at >= %s AND deliver_at < %s)")
            args += [*params, db.to_db_time(low), db.to_db_time(high)]
        if cursor is not None:
            parts.append(
                f"(SELECT COUNT(*) FROM {TABLE} WHERE {where} AND deliver_at <= %s"
                " AND NOT (deliver_at = %s AND id > %s))"
            )
            stamp = db.to_db_time(cursor[0])
            args += [*params, stamp, stamp, cursor[1]]
        with connection.cursor() as cur:
            cur.execute("SELECT " + ", ".join(parts), args)
            found = [int(n) for n in cur.fetchone()]
        if cursor is None:
            return found, 0
        return found[:-1], found[-1]

    def grouped_counts(
        self,
        selection: TimerFilter,
        *,
        start: datetime,
        bucket: timedelta,
        count: int,
        cursor: tuple[datetime, int] | None = None,
    ) -> tuple[list[int], int]:
        """As ``range_counts`` for the ``count`` buckets of ``bucket`` from
        ``start`` (a whole second), in one pass over the rows selected,
        grouped in the database.

        For a filter an index other than ``deliver_at``'s narrows (a queue,
        a key prefix): range counts would read that index once per bucket.
        """
        where, params = where_sql(selection)
        stamp = db.to_db_time(start)
        before, before_params = "0", []
        if cursor is not None:
            before = "SUM(CASE WHEN deliver_at < %s OR (deliver_at = %s AND id <= %s) THEN 1 ELSE 0 END)"
            at = db.to_db_time(cursor[0])
            before_params = [at, at, cursor[1]]
        sql = (
            f"SELECT {self.bucket_sql} AS b, COUNT(*), {before} FROM {TABLE}"
            f" WHERE {where} AND deliver_at >= %s AND deliver_at < %s GROUP BY 1"
        )
        seconds = int(bucket.total_seconds())
        args = [stamp, seconds, *before_params, *params, stamp, db.to_db_time(start + bucket * count)]
        counts = [0] * count
        ahead = 0
        with connection.cursor() as cur:
            cur.execute(sql, args)
            for index, n, m in cur.fetchall():
                counts[min(max(int(index), 0), count - 1)] += int(n)
                ahead += int(m or 0)
        return counts, ahead

    def pick(self, selection: TimerFilter, *, after_id: int, upto_id: int, limit: int) -> list[Picked]:
        """Up to ``limit`` timers of ``selection`` with ids in ``(after_id, upto_id]``,
        by id, locked for this transaction (by id: one order for every bulk
        action, so two never deadlock).

        On PostgreSQL a row a fire step holds is waited for, and left out
        once it fired; on SQLite the writer is alone from BEGIN.
        """
        assert connection.in_atomic_block
        rows = (
            selected(selection)
            .filter(id__gt=after_id, id__lte=upto_id)
            .order_by("id")
            .select_for_update()
            .values_list("id", "queue", "deliver_at")[:limit]
        )
        return [Picked(int(i), q, d) for i, q, d in rows]

    def delete_picked(self, ids: Sequence[int]) -> int:
        """Delete the timers of ``ids`` (held by this transaction); how many went."""
        assert connection.in_atomic_block
        deleted, _ = Timer.objects.filter(pk__in=list(ids)).delete()
        return deleted

    def shift_picked(self, ids: Sequence[int], *, by: timedelta, latest: datetime, now: datetime) -> int:
        """Move the timers of ``ids`` by ``by`` (their fire time with them,
        so a back-off ends), unless that takes one past ``latest``; how
        many moved."""
        assert connection.in_atomic_block
        return Timer.objects.filter(pk__in=list(ids), deliver_at__lte=latest - by).update(
            deliver_at=F("deliver_at") + by, fire_at=F("deliver_at") + by, updated_at=now
        )

    def upsert(self, rows: Sequence[NewRow], now: datetime) -> set[Key]:
        """Write ``rows`` (new timers, or replacing pending ones); the keys that existed.

        A replaced timer keeps ``created_at``; attempts and the last error
        start again (a reschedule is a new timer under an old name).
        """
        raise NotImplementedError

    def delete_keys(self, keys: Sequence[Key]) -> dict[Key, str]:
        """Delete the timers of ``keys``; the txn of each one that was there."""
        assert connection.in_atomic_block
        removed: dict[Key, str] = {}
        with connection.cursor() as cur:
            for start in range(0, len(keys), CHUNK):
                chunk = keys[start : start + CHUNK]
                cur.execute(
                    f"DELETE FROM {TABLE} WHERE {where_keys(len(chunk))} RETURNING queue, timer_key, txn",
                    [v for key in chunk for v in key],
                )
                removed.update({(q, k): t for q, k, t in cur.fetchall()})
        return removed

    def claim_due(self, now: datetime, limit: int, max_bytes: int) -> list[Due]:
        """The timers due at ``now``, earliest first, locked for this transaction.

        On PostgreSQL rows another loop holds are skipped (SKIP LOCKED), so
        loops split the work; a cancel or move waiting on a row this step
        holds runs after the fire commits, and finds the timer gone. At most
        ``limit`` timers; the batch stops at ``max_bytes`` of payload (at
        least one timer always goes).
        """
        assert connection.in_atomic_block
        with connection.cursor() as cur:
            cur.execute(
                f"SELECT {DUE_COLUMNS} FROM {TABLE} WHERE fire_at <= %s ORDER BY fire_at, id LIMIT %s"
                + self.claim_due_lock,
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

    def take_due(self, now: datetime, limit: int, max_bytes: int) -> tuple[list[Due], datetime | None]:
        """``claim_due`` and ``delete_ids`` of what it claimed, at once, with
        the fire time of the earliest timer left (None when none is).

        The rows are gone for this transaction's later statements and for
        everyone once it commits; a rollback puts them back. The earliest
        left may be one another step holds (due already).
        """
        raise NotImplementedError

    def move_due(self, now: datetime, limit: int, max_bytes: int, after: Resume | None = None) -> Moved:
        """``take_due``, and the messages of what it took appended to the log
        where the database can do it in the same statement.

        ``after`` (a previous full batch's ``last``) lets the scan start past
        the timers that batch took; timers due before it are then left to
        a later step without one. A database whose index forgets deleted
        rows at once may ignore it.

        This one appends nothing (every timer taken is ``left`` for the
        caller's push) and ignores ``after``: SQLite frees a deleted row's
        index entry in the same transaction.
        """
        due, upcoming = self.take_due(now, limit, max_bytes)
        return Moved(
            taken=len(due),
            appended=0,
            queues=[],
            due_queues=sorted({d.queue for d in due}),
            left=due,
            upcoming=upcoming,
            known_next=True,
        )

    def claim_key(self, queue: str, timer_key: str) -> Held | None:
        """One pending timer, its row locked for this transaction; None if none.

        On PostgreSQL it waits for a step that holds the row, then finds it
        gone; on SQLite the writer is alone from BEGIN.
        """
        assert connection.in_atomic_block
        with connection.cursor() as cur:
            cur.execute(
                f"SELECT {HELD_COLUMNS} FROM {TABLE} WHERE queue = %s AND timer_key = %s" + self.claim_key_lock,
                [queue, timer_key],
            )
            record = cur.fetchone()
        return None if record is None else held_of(record)

    def delete_ids(self, ids: Sequence[int]) -> None:
        assert connection.in_atomic_block
        with connection.cursor() as cur:
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                cur.execute(f"DELETE FROM {TABLE} WHERE id IN ({', '.join(['%s'] * len(chunk))})", list(chunk))

    def next_fire_at(self) -> datetime | None:
        """When the earliest pending timer is due to fire; None when none is."""
        with connection.cursor() as cur:
            cur.execute(f"SELECT fire_at FROM {TABLE} ORDER BY fire_at, id LIMIT 1")
            record = cur.fetchone()
        return None if record is None else db.from_db_time(record[0])

    def move(self, timer: Held, *, deliver_at: datetime, now: datetime) -> bool:
        """Give ``timer`` a new due time if its row is still the one read.

        A compare-and-set on id, txn and message id: with the row lock (or
        SQLite's one writer) it always applies; without them a fire in
        between makes it a no-op. True when it applied.
        """
        assert connection.in_atomic_block
        moved = Timer.objects.filter(pk=timer.id, txn=timer.txn, message_id=timer.message_id).update(
            deliver_at=deliver_at, fire_at=deliver_at, updated_at=now
        )
        return moved > 0

    def back_off(self, timer_id: int, *, attempts: int, error: str, fire_at: datetime, now: datetime) -> None:
        """Record a failed fire: try again at ``fire_at`` (the row stays cancellable)."""
        assert connection.in_atomic_block
        with connection.cursor() as cur:
            cur.execute(
                f"UPDATE {TABLE} SET attempts = %s, last_error = %s, fire_at = %s, updated_at = %s WHERE id = %s",
                [attempts, error[:2000], db.to_db_time(fire_at), db.to_db_time(now), timer_id],
            )

    def notify_wake(self) -> None:
        """Wake the firing loops of other processes when this transaction commits.

        Only a database with a notification channel can; the others do
        nothing (their loops look again within ``TIMER_IDLE_SECONDS``).
        """
        assert connection.in_atomic_block

    def listen_wake(self) -> WakeListener | None:
        """A listener for ``notify_wake``, or None when this database has none.

        Raises what the connection raises when it cannot be opened.
        """
        return None
