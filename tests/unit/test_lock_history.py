"""A lock's life read back from its permits' history (issue 41)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.test import override_settings

from queenadmin.domain import locks
from queenadmin.domain.audit import Who
from queenadmin.domain.locks import history
from queenadmin.domain.locks.operator import lease_mark, lock_force_release
from queenadmin.domain.transactions import TxnBundle, txn_commit
from queenadmin.models import KVVersion

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 10, 8, 10, 0, tzinfo=UTC)
OWNERS = ("owner-secret-a", "owner-secret-b", "owner-secret-c", "owner-secret-d")


def _at(seconds: float):
    return time_machine.travel(T0 + timedelta(seconds=seconds), tick=False)


def _acquire(owner: str, ttl: int, caller: str = "tok") -> locks.Acquire:
    op = locks.LockOp(op="acquire", name="jobs", ttl=timedelta(seconds=ttl), owner=owner)
    (result,) = locks.locks_call([op], caller=caller)
    assert result.acquired
    return result


def script_a_life() -> dict[str, int]:
    """acquire, renew, release, acquire, expire, acquire, force release,
    acquire, renew, a refused guard: the tokens by name."""
    tokens: dict[str, int] = {}
    with _at(0):
        tokens["a"] = _acquire(OWNERS[0], 60).token
    with _at(1):
        tokens["a2"] = locks.lock_renew(name="jobs", token=tokens["a"], ttl=60).token
    with _at(2):
        assert locks.lock_release(name="jobs", token=tokens["a2"]).released
    with _at(3):
        tokens["b"] = _acquire(OWNERS[1], 10, caller="other").token
    with _at(20):
        tokens["c"] = _acquire(OWNERS[2], 60).token
    with _at(21):
        holder = locks.lock_holders(name="jobs").holders[0]
        mark = lease_mark(owner=holder.owner, since=holder.since)
        assert lock_force_release(name="jobs", slot=0, lease=mark, who=Who("otto")).released
    with _at(22):
        tokens["d"] = _acquire(OWNERS[3], 60).token
    with _at(23.5):
        tokens["d2"] = locks.lock_renew(name="jobs", token=tokens["d"], ttl=60).token
    with _at(24):
        stale = locks.guard_check(name="jobs", slot=0, token=tokens["d"])
        outcome = txn_commit(bundle=TxnBundle(), guard=stale)
        assert outcome.reason == "kv_precondition"
    return tokens


def test_a_scripted_life_comes_back_in_order():
    tokens = script_a_life()
    with _at(30):
        page = history.lock_events(name="jobs")
    got = [(e.event, e.at, e.token, e.holder) for e in page.events]
    at = lambda s: T0 + timedelta(seconds=s)  # noqa: E731
    assert got == [
        ("guard_refused", at(24), tokens["d"], None),
        ("renewed", at(23.5), tokens["d2"], "tok"),
        ("acquired", at(22), tokens["d"], "tok"),
        ("forced", at(21), tokens["c"], "tok"),
        ("acquired", at(20), tokens["c"], "tok"),
        ("expired", at(13), tokens["b"], "other"),
        ("acquired", at(3), tokens["b"], "other"),
        ("released", at(2), tokens["a2"], "tok"),
        ("renewed", at(1), tokens["a2"], "tok"),
        ("acquired", at(0), tokens["a"], "tok"),
    ]
    events = {(e.event, e.token): e for e in page.events}
    assert events[("renewed", tokens["a2"])].margin_ms == 59_000
    assert events[("released", tokens["a2"])].held_ms == 2_000
    assert events[("expired", tokens["b"])].held_ms == 10_000
    assert events[("forced", tokens["c"])].held_ms == 1_000
    assert events[("acquired", tokens["a"])].waited_ms == 0
    assert page.next_before is None


def test_pages_of_a_life_join_up_without_repeats():
    script_a_life()
    with _at(30):
        whole = history.lock_events(name="jobs").events
        pages, before = [], None
        while True:
            page = history.lock_events(name="jobs", before=before, limit=3)
            pages += page.events
            if page.next_before is None:
                break
            before = page.next_before
    assert [(e.event, e.seq) for e in pages] == [(e.event, e.seq) for e in whole]


def test_no_owner_string_is_kept():
    script_a_life()
    for row in KVVersion.objects.all():
        for owner in OWNERS:
            assert owner not in f"{row.value_json} {row.actor} {row.key}"


def test_a_wait_seen_by_this_process_is_kept_with_the_acquire(monkeypatch):
    """Refused, then granted 2.5 s later to the same owner: waitedMs 2500;
    the first acquire, granted at once, 0."""
    clock_now = [100.0]
    monkeypatch.setattr(history.time, "monotonic", lambda: clock_now[0])
    with _at(0):
        first = _acquire("holder", 5)
    op = locks.LockOp(op="acquire", name="jobs", ttl=timedelta(seconds=60), owner="waiter")
    with _at(1):
        (refused,) = locks.locks_call([op])
        assert not refused.acquired
        assert locks.lock_release(name="jobs", token=first.token).released
        clock_now[0] = 102.5
        (granted,) = locks.locks_call([op])
        assert granted.acquired
        acquired = [e for e in history.lock_events(name="jobs").events if e.event == "acquired"]
    assert [e.waited_ms for e in acquired] == [2500, 0]


def _holds() -> tuple[float, float]:
    """(count, sum) of ``queenadmin_lock_hold_seconds`` in this process."""
    from queenadmin.metrics import process_metrics

    samples = {s.name: s.value for s in process_metrics().lock_hold.collect()[0].samples}
    return samples["queenadmin_lock_hold_seconds_count"], samples["queenadmin_lock_hold_seconds_sum"]


@pytest.mark.parametrize("through", ["the granting process", "another process"])
def test_a_release_is_timed_through_any_process(through):
    """A release is timed whether or not this process granted the lease
    (another process's release reads the permit's acquisition time), also
    after a renew; the history's ``heldMs`` agrees."""
    from queenadmin.domain.locks import calls

    count, total = _holds()
    with _at(0):
        granted = _acquire("a", 60)
    with _at(1):
        token = locks.lock_renew(name="jobs", token=granted.token, ttl=60).token
    if through == "another process":
        calls._granted_at.clear()
    with _at(2.5):
        assert locks.lock_release(name="jobs", token=token).released
    assert _holds() == (count + 1, pytest.approx(total + 2.5))
    (released,) = [e for e in history.lock_events(name="jobs").events if e.event == "released"]
    assert released.held_ms == 2500


@pytest.mark.django_db(transaction=True)
def test_a_force_release_is_timed_after_its_commit():
    count, total = _holds()
    with _at(0):
        _acquire("a", 60)
    with _at(4):
        holder = locks.lock_holders(name="jobs").holders[0]
        assert holder.since == T0
        mark = lease_mark(owner=holder.owner, since=holder.since)
        assert lock_force_release(name="jobs", slot=0, lease=mark, who=Who("otto")).released
    assert _holds() == (count + 1, pytest.approx(total + 4))


@override_settings(QUEENADMIN_HISTORY_MAX_ENTRIES=20, QUEENADMIN_HISTORY_MAX_AGE_SECONDS=0)
def test_a_hammered_slot_is_kept_within_the_limit_and_its_slack():
    """A slot past the limit plus a tenth is cut back to the limit by one
    pass; up to the slack it is left alone; its newest events stay."""
    from queenadmin.domain import kv

    def cycle() -> None:
        granted = _acquire("a", 60)
        assert locks.lock_release(name="jobs", token=granted.token).released

    def kept() -> int:
        return KVVersion.objects.filter(namespace=kv.LOCKS_NAMESPACE, key="jobs#0").count()

    for _ in range(30):
        cycle()
    newest = [e.seq for e in history.lock_events(name="jobs", limit=20).events]
    assert kv.kv_history_trim().extra == 40
    assert kept() == 20
    assert [e.seq for e in history.lock_events(name="jobs", limit=20).events] == newest
    cycle()
    assert (kv.kv_history_trim().extra, kept()) == (0, 22)
    cycle()
    assert (kv.kv_history_trim().extra, kept()) == (4, 20)
