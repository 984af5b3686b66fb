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
#: Timers counted per bar of the due chart at most.
TIMER_BUCKET_CAP = 1_000


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


def _estimate(table: str) -> int | None:
    if not is_postgres():
        return None
    with connection.cursor() as cur:
        cur.execute("SELECT reltuples::bigint FROM pg_class WHERE oid = %s::regclass", [table])
        row = cur.fetchone()
    return None if row is None or row[0] < 0 else int(row[0])


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
    #: Timers due in each bucket from ``start`` (each up to ``TIMER_BUCKET_CAP``).
    counts: tuple[int, ...]
    capped: tuple[bool, ...]
    #: Timers already due and not yet fired (up to ``TIMER_BUCKET_CAP``).
    overdue: Bounded
    pending: Bounded
    next_due: datetime | None


def timers_due(*, now: datetime, bucket: timedelta = timedelta(minutes=1), buckets: int = 60) -> TimersDue:
    """Pending timers per ``bucket`` over the next ``buckets``, bounded.

    Unlike ``timers.timers_due_histogram`` (exact, a count of every timer),
    every figure here is a capped index range count on ``deliver_at``: one
    statement for the bars and the overdue, one for the next due, one for
    the total (plus the estimate past its cap).
    """
    table = Timer._meta.db_table
    edges = [to_db_time(now + bucket * i) for i in range(buckets + 1)]
    branch = (
        f"SELECT %s, COUNT(*) FROM (SELECT 1 FROM {table} WHERE deliver_at >= %s AND deliver_at < %s"
        f" LIMIT {TIMER_BUCKET_CAP + 1}) b"
    )
    overdue_branch = (
        f"SELECT -1, COUNT(*) FROM (SELECT 1 FROM {table} WHERE deliver_at < %s LIMIT {TIMER_BUCKET_CAP + 1}) b"
    )
    params: list[Any] = [edges[0]]
    for i in range(buckets):
        params += [i, edges[i], edges[i + 1]]
    with connection.cursor() as cur:
        cur.execute(" UNION ALL ".join([overdue_branch] + [branch] * buckets), params)
        found = {int(i): int(n) for i, n in cur.fetchall()}
        cur.execute(f"SELECT deliver_at FROM {table} ORDER BY deliver_at, id LIMIT 1")
        first = cur.fetchone()
    counts = tuple(min(found.get(i, 0), TIMER_BUCKET_CAP) for i in range(buckets))
    capped = tuple(found.get(i, 0) > TIMER_BUCKET_CAP for i in range(buckets))
    overdue = Bounded(min(found[-1], TIMER_BUCKET_CAP), found[-1] > TIMER_BUCKET_CAP)
    pending = _bounded(f"SELECT 1 FROM {table}", [], TIMER_COUNT_CAP)
    if pending.capped:
        pending = Bounded(pending.value, True, _estimate(table))
    next_due = None if first is None else from_db_time(first[0])
    return TimersDue(now, bucket, counts, capped, overdue, pending, next_due)
