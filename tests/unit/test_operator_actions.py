"""Operator actions in the domain: each writes its audit entry in its own
transaction, only when it acts, and aims at what the operator saw."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from queenadmin.domain import clock, kv, locks, timers
from queenadmin.domain.audit import Who
from queenadmin.domain.kv.operator import kv_operator_delete, kv_operator_edit, kv_operator_revert
from queenadmin.domain.locks.operator import lease_mark, lock_force_release, locks_page
from queenadmin.domain.timers.operator import SeenTimer, timer_operator_action
from queenadmin.errors import KVBadRequest, TimerHorizonExceeded
from queenadmin.models import AuditEntry

pytestmark = pytest.mark.django_db


def test_locks_page_lists_permits_across_names_with_their_holder_counts():
    for owner in ("a", "b", "c"):
        locks.lock_acquire(name="sem", ttl=60, owner=owner, limit=5)
    locks.lock_acquire(name="solo", ttl=60, owner="d")
    page = locks_page(limit=3)
    assert [(p.name, p.held) for p in page.permits] == [("sem", 3)] * 3
    assert page.next_after is not None
    rest = locks_page(after=page.next_after, limit=3)
    assert [(p.name, p.slot, p.held, p.owner) for p in rest.permits] == [("solo", 0, 1, "d")]
    assert rest.next_after is None


def test_force_release_audits_only_when_it_releases():
    got = locks.lock_acquire(name="job", ttl=60, owner="w")
    holder = locks.lock_holders(name="job").holders[0]
    mark = lease_mark(owner=holder.owner, since=holder.since)
    refused = lock_force_release(name="job", slot=0, lease="not-it", who=Who("ann"))
    assert (refused.released, refused.reason) == (False, "changed")
    assert not AuditEntry.objects.exists()
    done = lock_force_release(name="job", slot=0, lease=mark, who=Who("ann", "stuck"))
    assert (done.released, done.token) == (True, got.token)
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.kind, entry.target, entry.reason) == ("lock.release", "lock", "job#0", "stuck")
    again = lock_force_release(name="job", slot=0, lease=mark, who=Who("ann"))
    assert (again.released, again.reason) == (False, "gone")
    assert AuditEntry.objects.count() == 1


def _seen(queue: str, key: str) -> SeenTimer:
    row = timers.timer_peek(queue=queue, timer_key=key)
    assert row is not None
    return SeenTimer(queue, key, row.message_id, row.txn, row.partition)


def test_a_timer_action_on_a_fired_timer_says_when_it_fired():
    timers.timer_schedule(queue="q", timer_key="k", payload=1, delay=timedelta(minutes=5))
    seen = _seen("q", "k")
    fired = timers.timer_fire_now(queue="q", timer_key="k")
    for verb in ("cancel", "move", "fire"):
        outcome = timer_operator_action(verb=verb, who=Who("ann"), by=timedelta(minutes=1), seen=seen)
        assert (outcome.done, outcome.why, outcome.fired_at) == (False, "fired", fired.deliver_at)
    assert not AuditEntry.objects.exists()


def test_a_move_past_the_horizon_is_refused_and_writes_nothing():
    timers.timer_schedule(queue="q", timer_key="k", payload=1, delay=timedelta(minutes=5))
    seen = _seen("q", "k")
    with pytest.raises(TimerHorizonExceeded):
        timer_operator_action(verb="move", who=Who("ann"), by=timedelta(days=400), seen=seen)
    assert timers.timer_peek(queue="q", timer_key="k").deliver_at < clock.now() + timedelta(minutes=6)
    assert not AuditEntry.objects.exists()


def test_kv_edit_delete_and_revert_chain_as_compare_and_sets():
    first = kv.kv_put(namespace="cfg", key="k", value="one", ttl=None)
    edit = kv_operator_edit(namespace="cfg", key="k", value="two", expect=first.version, who=Who("ann"))
    assert edit.applied
    stale = kv_operator_edit(namespace="cfg", key="k", value="three", expect=first.version, who=Who("ann"))
    assert (stale.applied, stale.current_version, stale.current_value) == (False, edit.version, "two")
    entry = AuditEntry.objects.get(action="kv.edit")
    assert json.loads(entry.before)["value"] == "one"
    back = kv_operator_revert(entry_id=entry.pk, who=Who("bob"))
    assert back.applied
    assert kv.kv_get(namespace="cfg", key="k").value == "one"
    undo_revert = AuditEntry.objects.get(action="kv.revert")
    assert kv_operator_revert(entry_id=undo_revert.pk, who=Who("bob")).applied
    assert kv.kv_get(namespace="cfg", key="k").value == "two"
    gone = kv_operator_delete(
        namespace="cfg", key="k", expect=kv.kv_get(namespace="cfg", key="k").version, who=Who("ann")
    )
    assert gone.applied
    assert kv.kv_get(namespace="cfg", key="k") is None


def test_lock_permits_are_not_edited_as_kv():
    got = locks.lock_acquire(name="l", ttl=60, owner="w")
    with pytest.raises(KVBadRequest):
        kv_operator_edit(
            namespace=kv.LOCKS_NAMESPACE, key="l#0", value={"owner": "x"}, expect=got.token, who=Who("ann")
        )
    with pytest.raises(KVBadRequest):
        kv_operator_delete(namespace=kv.LOCKS_NAMESPACE, key="l#0", expect=got.token, who=Who("ann"))
