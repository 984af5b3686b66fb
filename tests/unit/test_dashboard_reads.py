"""The overview's bounded counts and the search box's lookups."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from queenadmin.domain import locks, overview, search, timers
from queenadmin.domain.kv import kv_put
from tests.dashboard_ops.conftest import push

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 10, 8, 10, 0, 0, tzinfo=UTC)
ALL_KINDS = frozenset({"queue", "lock", "kv", "timer", "message"})


def test_lock_permits_held_count_live_ones_up_to_the_cap(monkeypatch):
    with time_machine.travel(T0, tick=False) as traveller:
        locks.lock_acquire(name="a", ttl=60, owner="o1", limit=3)
        locks.lock_acquire(name="a", ttl=60, owner="o2", limit=3)
        locks.lock_acquire(name="b", ttl=5, owner="o3")
        assert overview.locks_held(now=T0) == overview.Bounded(3, False)
        traveller.shift(10)
        assert overview.locks_held(now=T0 + timedelta(seconds=10)) == overview.Bounded(2, False)
        monkeypatch.setattr(overview, "LOCK_COUNT_CAP", 1)
        assert overview.locks_held(now=T0) == overview.Bounded(1, True)


def test_timers_due_per_minute_overdue_and_next(monkeypatch):
    with time_machine.travel(T0, tick=False):
        for i, minutes in enumerate([0.5, 0.7, 3.2, 59.9, 60.5, 61, 120]):
            timers.timer_schedule(queue="q", timer_key=f"t{i}", payload=i, delay=timedelta(minutes=minutes))
    later = T0 + timedelta(minutes=1)  # the first two are overdue now
    due = overview.timers_due(now=later)
    assert due.overdue == overview.Bounded(2, False)
    assert due.pending == overview.Bounded(7, False)
    assert due.next_due == T0 + timedelta(minutes=0.5)
    assert len(due.counts) == 60
    expected = [0] * 60
    expected[2] = 1  # 3.2 min from T0 is 2.2 from ``later``
    expected[58] = 1  # 59.9
    expected[59] = 1  # 60.5 (61 is past the hour shown)
    assert list(due.counts) == expected
    monkeypatch.setattr(overview, "TIMER_COUNT_CAP", 1)
    monkeypatch.setattr(overview, "TIMER_WINDOW_CAP", 1)
    due = overview.timers_due(now=later)
    assert (due.pending.value, due.pending.capped) == (1, True)
    assert due.overdue == overview.Bounded(1, True)
    # The window read stopped at the second timer due (bucket 58): up to
    # there the bars are exact, from there on lower bounds.
    assert due.capped_from == 58
    assert list(due.counts) == [0, 0, 1] + [0] * 57


def test_no_timers_no_next_due():
    due = overview.timers_due(now=T0)
    assert (due.next_due, due.pending, sum(due.counts), due.capped_from) == (None, overview.Bounded(0, False), 0, None)


# -- search ----------------------------------------------------------------------


def kinds_of(hits: list[search.Hit]) -> list[tuple[str, tuple[str, ...]]]:
    return [(h.kind, h.ref) for h in hits]


def test_search_by_prefix_in_byte_order_and_live_keys_only():
    with time_machine.travel(T0, tick=False) as traveller:
        kv_put(namespace="app", key="user:1", value=1, ttl=None)
        kv_put(namespace="app", key="user:2", value=1, ttl=timedelta(seconds=1))
        kv_put(namespace="other", key="user:3", value=1, ttl=None)
        kv_put(namespace="app", key="userx", value=1, ttl=None)
        traveller.shift(5)
        hits = search.search(text="user:", now=T0 + timedelta(seconds=5), kinds=ALL_KINDS)
    assert kinds_of(hits) == [("kv", ("app", "user:1")), ("kv", ("other", "user:3"))]


def test_search_namespace_slash_key_and_locks_stay_out_of_kv():
    kv_put(namespace="app", key="flag", value=1, ttl=None)
    locks.lock_acquire(name="flag-lock", ttl=60, owner="secret-owner")
    hits = search.search(text="app/flag", now=datetime.now(UTC), kinds=ALL_KINDS)
    assert kinds_of(hits) == [("kv", ("app", "flag"))]
    hits = search.search(text="flag", now=datetime.now(UTC), kinds=ALL_KINDS)
    assert kinds_of(hits) == [("lock", ("flag-lock",)), ("kv", ("app", "flag"))]
    assert all("secret-owner" not in f"{h.label} {h.detail}" for h in hits)


def test_search_counts_permits_of_a_lock():
    for owner in ("a", "b"):
        locks.lock_acquire(name="sem", ttl=60, owner=owner, limit=4)
    (hit,) = search.search(text="sem", now=datetime.now(UTC), kinds=frozenset({"lock"}))
    assert (hit.label, hit.detail) == ("sem", "2 permits held")


def test_search_finds_timers_queues_and_messages_and_respects_kinds():
    timers.timer_schedule(queue="mail", timer_key="remind-7", payload=1, delay=timedelta(minutes=5))
    pushed = push("mail-out", 1)[0]
    hits = search.search(text="mail", now=datetime.now(UTC), kinds=ALL_KINDS)
    assert kinds_of(hits) == [("queue", ("mail-out",))]
    hits = search.search(text="remind", now=datetime.now(UTC), kinds=ALL_KINDS)
    assert kinds_of(hits) == [("timer", ("mail", "remind-7"))]
    hits = search.search(text=pushed.message_id, now=datetime.now(UTC), kinds=ALL_KINDS)
    assert kinds_of(hits) == [("message", ("mail-out", pushed.message_id))]
    assert search.search(text=pushed.message_id, now=datetime.now(UTC), kinds=frozenset({"queue"})) == []


@pytest.mark.parametrize("text", ["", "   ", "x" * (search.MAX_QUERY_CHARS + 1)])
def test_search_of_nothing_or_too_much_finds_nothing(text):
    push("x" * 10, 1)
    assert search.search(text=text, now=datetime.now(UTC), kinds=ALL_KINDS) == []
