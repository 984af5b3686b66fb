"""Counts for the dashboard's overview that belong to no single concept.

Reads only, a fixed number of statements whatever the data holds, and a
bounded amount of work in each: a count stops at a cap and says so
(``Bounded.capped``), because an exact count costs a scan of everything
counted (measured: 40-70 ms for 100,000 timers or KV keys on a loaded
PostgreSQL, most of the overview's 100 ms budget). Past the cap, PostgreSQL
gives the planner's estimate of the table (``Bounded.estimate``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import connection

from queenadmin.domain.db import from_db_time, is_postgres, to_db_time
from queenadmin.domain.kv import LOCKS_NAMESPACE
from queenadmin.domain.search import distinct_values
from queenadmin.models import KVEntry, Timer

#: Keys counted per KV namespace at most.
KV_COUNT_CAP = 1_000
#: Lock permits counted at most.
LOCK_COUNT_CAP = 10_000
#: Pending timers counted at most.
TIMER_COUNT_CAP = 10_000
#: Timers read for the due chart at most (in due order).
TIMER_WINDOW_CAP = 20_000


@dataclass(frozen=True)
class Bounded:
    """A count that stopped at ``cap``: ``capped`` means "at least ``value``"."""

    value: int
    capped: bool
    #: The planner's row estimate of the whole table, when capped (PostgreSQL).
    estimate: int | None = None


def _bounded(sql: str, params: list[Any], cap: int) -> Bounded:
    with connection.cursor() as cur:
        cur.execute(f"SELECT COUNT(*) FROM ({sql} LIMIT {cap + 1}) b", params)
        (n,) = cur.fetchone() or (0,)
    return Bounded(min(int(n), cap), int(n) > cap)


def _bounded_table(table: str, cap: int) -> Bounded:
    """Rows of ``table`` up to ``cap``, with the planner's estimate past it.

    One statement either way (the estimate rides along on PostgreSQL), so
    the page's query count does not change when the cap is passed.
    """
    sql = f"SELECT COUNT(*) FROM (SELECT 1 FROM {table} LIMIT {cap + 1}) b"
    if is_postgres():
        sql = f"SELECT ({sql}), (SELECT reltuples::bigint FROM pg_class WHERE oid = %s::regclass)"
    with connection.cursor() as cur:
        cur.execute(sql, [table] if is_postgres() else [])
        row: tuple[Any, ...] = cur.fetchone() or (0,)
    n = int(row[0])
    estimate = int(row[1]) if len(row) > 1 and row[1] is not None and row[1] >= 0 else None
    return Bounded(min(n, cap), n > cap, estimate if n > cap else None)


@dataclass(frozen=True)
class NamespaceCount:
    namespace: str
    keys: Bounded


def kv_namespace_counts(*, now: datetime) -> list[NamespaceCount]:
    """Live keys per KV namespace but the locks', by name, each up to ``KV_COUNT_CAP``.

    Two statements: the namespaces by a loose index scan, then one bounded
    count per namespace in one ``UNION ALL``.
    """
    table = KVEntry._meta.db_table
    namespaces = [ns for ns in distinct_values(table, "namespace") if ns != LOCKS_NAMESPACE]
    if not namespaces:
        return []
    branch = (
        f"SELECT %s, COUNT(*) FROM (SELECT 1 FROM {table} WHERE namespace = %s"
        f" AND (expires_at IS NULL OR expires_at > %s) LIMIT {KV_COUNT_CAP + 1}) b"
    )
    when = to_db_time(now)
    params: list[Any] = []
    for ns in namespaces:
        params += [ns, ns, when]
    with connection.cursor() as cur:
        cur.execute(" UNION ALL ".join([branch] * len(namespaces)), params)
        counts = {ns: int(n) for ns, n in cur.fetchall()}
    return [NamespaceCount(ns, Bounded(min(counts[ns], KV_COUNT_CAP), counts[ns] > KV_COUNT_CAP)) for ns in namespaces]


def locks_held(*, now: datetime) -> Bounded:
    """Live lock permits, up to ``LOCK_COUNT_CAP``."""
    sql = f"SELECT 1 FROM {KVEntry._meta.db_table} WHERE namespace = %s AND (expires_at IS NULL OR expires_at > %s)"
    return _bounded(sql, [LOCKS_NAMESPACE, to_db_time(now)], LOCK_COUNT_CAP)


@dataclass(frozen=True)
class TimersDue:
    """Pending timers: how many, the next due, and how many fall due per bucket."""

    start: datetime
    bucket: timedelta
    #: Timers due in each bucket from ``start``.
    counts: tuple[int, ...]
    #: The window held more than ``TIMER_WINDOW_CAP`` timers: the buckets
    #: from the one the count stopped in on are lower bounds.
    capped_from: int | None
    #: Timers already due and not yet fired (up to ``TIMER_COUNT_CAP``).
    overdue: Bounded
    pending: Bounded
    next_due: datetime | None


def _bucket_sql(table: str) -> str:
    if is_postgres():
        index = "FLOOR(EXTRACT(EPOCH FROM (deliver_at - %s)) / %s)::int"
    else:
        index = "CAST((julianday(deliver_at) - julianday(%s)) * 86400.0 / %s AS INTEGER)"
    return (
        f"SELECT {index} AS b, COUNT(*) FROM (SELECT deliver_at FROM {table}"
        f" WHERE deliver_at >= %s AND deliver_at < %s ORDER BY deliver_at LIMIT {TIMER_WINDOW_CAP + 1}) w"
        f" GROUP BY 1 ORDER BY 1"
    )


def timers_due(*, now: datetime, bucket: timedelta = timedelta(minutes=1), buckets: int = 60) -> TimersDue:
    """Pending timers per ``bucket`` over the next ``buckets``, bounded.

    Unlike ``timers.timers_due_histogram`` (exact, and a count of every
    timer), every figure here reads a bounded stretch of the ``deliver_at``
    index: the bars read at most ``TIMER_WINDOW_CAP`` timers in due order
    (one statement, grouped in the database), the overdue and the total
    at most ``TIMER_COUNT_CAP`` each, and the next due is the index's first
    entry.
    """
    table = Timer._meta.db_table
    start, end = to_db_time(now), to_db_time(now + bucket * buckets)
    seconds = bucket.total_seconds()
    found: dict[int, int] = {}
    with connection.cursor() as cur:
        cur.execute(_bucket_sql(table), [start, seconds, start, end])
        for index, n in cur.fetchall():
            found[min(max(int(index), 0), buckets - 1)] = found.get(min(max(int(index), 0), buckets - 1), 0) + int(n)
        cur.execute(f"SELECT deliver_at FROM {table} ORDER BY deliver_at, id LIMIT 1")
        first = cur.fetchone()
    counts = [found.get(i, 0) for i in range(buckets)]
    capped_from = None
    if sum(counts) > TIMER_WINDOW_CAP:
        # The one row past the cap sits in the last bucket read: drop it.
        capped_from = max(i for i, n in enumerate(counts) if n)
        counts[capped_from] -= 1
    overdue = _bounded(f"SELECT 1 FROM {table} WHERE deliver_at < %s", [start], TIMER_COUNT_CAP)
    pending = _bounded_table(table, TIMER_COUNT_CAP)
    next_due = None if first is None else from_db_time(first[0])
    return TimersDue(now, bucket, tuple(counts), capped_from, overdue, pending, next_due)
