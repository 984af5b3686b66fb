"""``LoopLease``: the permit the timer and sampler loops hold across steps."""

from __future__ import annotations

import pytest

from queenadmin.domain import locks

pytestmark = pytest.mark.django_db


def test_first_hold_grants_and_the_next_keeps():
    """The first hold takes the permit; the next, before a renew is due,
    keeps it without a new token."""
    lease = locks.LoopLease(locks.Lock("loop-a", ttl=30))
    assert lease.hold() == "granted"
    token = lease.lock.token
    assert lease.hold() == "held"
    assert lease.lock.token == token
    assert 0 < lease.renew_due_in() <= 10


def test_hold_renews_once_a_third_of_the_lifetime_passed(monkeypatch):
    """A hold a third of a lifetime after the grant renews: a new token."""
    lease = locks.LoopLease(locks.Lock("loop-b", ttl=30))
    assert lease.hold() == "granted"
    token = lease.lock.token
    monkeypatch.setattr(lease, "_renewed_at", lease._renewed_at - 10)
    assert lease.renew_due_in() <= 0
    assert lease.hold() == "held"
    assert lease.lock.token is not None
    assert lease.lock.token > token
    assert lease.renew_due_in() > 9


def test_a_taken_permit_is_not_held():
    """A loop whose permit another loop holds gets None and holds nothing."""
    first = locks.LoopLease(locks.Lock("loop-c", ttl=30, owner="first"))
    second = locks.LoopLease(locks.Lock("loop-c", ttl=30, owner="second"))
    assert first.hold() == "granted"
    assert second.hold() is None
    assert not second.lock.held


def test_give_up_marks_lost_and_frees_the_permit():
    """After give_up the lease is lost and another loop is granted the permit."""
    first = locks.LoopLease(locks.Lock("loop-d", ttl=30, owner="first"))
    second = locks.LoopLease(locks.Lock("loop-d", ttl=30, owner="second"))
    assert first.hold() == "granted"
    first.give_up()
    assert first.lock.lost.is_set()
    assert not first.lock.held
    assert second.hold() == "granted"
