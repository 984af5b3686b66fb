"""The overview store's contract, held by whichever store this run's database uses.

Like ``test_queue_store_contract``: the same calls on SQLite and on
PostgreSQL, asserting what each method returns, never its SQL. Keys and
timers are made through the domain.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.db import connection

from queenadmin.domain import timers
from queenadmin.domain.kv import kv_put
from queenadmin.domain.overview.store import PostgresStore, SqliteStore, store
from queenadmin.models import Timer

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 10, 8, 10, 0, 0, tzinfo=UTC)


def schedule(*minutes: float) -> None:
    with time_machine.travel(T0, tick=False):
        for i, m in enumerate(minutes):
            timers.timer_schedule(queue="q", timer_key=f"t{i}", payload=i, delay=timedelta(minutes=m))


def test_the_store_matches_the_database():
    """``store()`` answers the one class written for this run's database."""
    expected = PostgresStore if connection.vendor == "postgresql" else SqliteStore
    assert type(store()) is expected


def test_table_count_stops_one_past_the_cap():
    """A table is counted up to ``cap + 1`` rows; an estimate, if any, is not negative."""
    schedule(1, 2, 3)
    table = Timer._meta.db_table
    n, estimate = store().table_count(table, 10)
    assert n == 3
    assert estimate is None or estimate >= 0
    assert store().table_count(table, 1)[0] == 2


def test_live_keys_leave_out_expired_keys():
    """Live keys of a namespace, counted up to ``cap + 1``."""
    with time_machine.travel(T0, tick=False) as traveller:
        for i in range(4):
            kv_put(namespace="a", key=f"k{i}", value=i, ttl=None)
        kv_put(namespace="b", key="short", value=1, ttl=timedelta(seconds=5))
        traveller.shift(10)
    now = T0 + timedelta(seconds=10)
    assert store().live_keys("a", now=now, cap=10) == 4
    assert store().live_keys("b", now=T0, cap=10) == 1
    assert store().live_keys("a", now=now, cap=1) == 2


def test_timers_due_before_counts_up_to_the_cap():
    """Timers due before a moment, up to ``cap + 1``."""
    schedule(1, 2, 30)
    assert store().timers_due_before(T0 + timedelta(minutes=5), cap=10) == 2
    assert store().timers_due_before(T0 + timedelta(minutes=5), cap=1) == 2
    assert store().timers_due_before(T0 + timedelta(minutes=40), cap=1) == 2
    assert store().timers_due_before(T0, cap=10) == 0


def test_timer_buckets_group_the_window_by_bucket():
    """Timers due in ``[start, end)`` per bucket from ``start``, reading at most ``cap + 1``."""
    schedule(0.5, 0.7, 3.2, 59.9, 61)
    rows = store().timer_buckets(start=T0, end=T0 + timedelta(hours=1), bucket_seconds=60.0, cap=100)
    assert rows == [(0, 2), (3, 1), (59, 1)]
    capped = store().timer_buckets(start=T0, end=T0 + timedelta(hours=1), bucket_seconds=60.0, cap=1)
    assert capped == [(0, 2)]


def test_next_timer_due_is_the_earliest():
    """The first pending timer's due time, in UTC; None without timers."""
    assert store().next_timer_due() is None
    schedule(3, 1)
    assert store().next_timer_due() == T0 + timedelta(minutes=1)
