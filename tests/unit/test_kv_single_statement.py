"""Lone writes outside any transaction: on PostgreSQL these take the
one-statement paths (blind put, create-if-no-row, delete of a live key) and
fall back to the transactional path for every other case. The answers must
be the same as the transactional path's, on both databases.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.db import connection

from queenadmin.api.wire import kv as kv_wire
from queenadmin.domain import kv
from queenadmin.models import KVEntry

pytestmark = pytest.mark.django_db(transaction=True)

T0 = datetime(2026, 10, 8, 10, 0, 0, tzinfo=UTC)


def one(op: dict[str, Any], *, permits: bool = False) -> Any:
    assert not connection.in_atomic_block
    return kv.kv_call(kv_wire.parse_ops([{"ns": "fast", **op}]), permits=permits)[0]


def test_put_if_absent_creates_refuses_and_takes_over_an_expired_row():
    with time_machine.travel(T0, tick=False):
        created = one({"op": "putIfAbsent", "key": "k", "value": {"owner": "a"}, "ttlSeconds": 5})
        assert (created.applied, created.value) == (True, {"owner": "a"})
        refused = one({"op": "putIfAbsent", "key": "k", "value": {"owner": "b"}, "ttlSeconds": 5})
        assert (refused.applied, refused.reason, refused.value, refused.version) == (
            False,
            "exists",
            {"owner": "a"},
            created.version,
        )
    with time_machine.travel(T0 + timedelta(seconds=6), tick=False):
        taken = one({"op": "putIfAbsent", "key": "k", "value": {"owner": "b"}, "ttlSeconds": 5})
        assert taken.applied
        assert taken.version > created.version
        assert kv.kv_get(namespace="fast", key="k").value == {"owner": "b"}
        assert KVEntry.objects.get(namespace="fast", key="k").created_at == T0 + timedelta(seconds=6)


def test_put_with_expect_zero_is_a_create():
    first = one({"op": "put", "key": "z", "value": 1, "forever": True, "expect": 0})
    second = one({"op": "put", "key": "z", "value": 2, "forever": True, "expect": 0})
    assert first.applied
    assert (second.applied, second.reason, second.version) == (False, "exists", first.version)


def test_delete_applies_at_the_right_version_only():
    written = one({"op": "put", "key": "d", "value": "v", "forever": True})
    stale = one({"op": "delete", "key": "d", "expect": written.version + 1})
    assert (stale.applied, stale.reason, stale.value, stale.version) == (False, "version", "v", written.version)
    deleted = one({"op": "delete", "key": "d", "expect": written.version})
    assert (deleted.applied, deleted.value, deleted.version) == (True, "v", written.version)
    again = one({"op": "delete", "key": "d"})
    assert (again.applied, again.reason, again.version) == (False, "absent", 0)


def test_plain_delete_of_an_expired_row_is_refused_and_prunes_it():
    with time_machine.travel(T0, tick=False):
        one({"op": "put", "key": "e", "value": 1, "ttlSeconds": 1})
    with time_machine.travel(T0 + timedelta(seconds=2), tick=False):
        refused = one({"op": "delete", "key": "e"})
        assert (refused.applied, refused.reason) == (False, "absent")
    assert not KVEntry.objects.filter(namespace="fast", key="e").exists()


def test_required_refusals_still_abort_from_the_fallback():
    from queenadmin.errors import PreconditionFailed

    one({"op": "put", "key": "r", "value": 1, "forever": True})
    with pytest.raises(PreconditionFailed) as info:
        one({"op": "putIfAbsent", "key": "r", "value": 2, "forever": True, "required": True})
    assert info.value.kv_reason == "exists"


def test_lock_cycle_versions_rise_across_acquire_release_acquire():
    # The KV calls the lock operations make (they alone may write permits).
    permit = {"ns": "queen-locks", "key": "job#0", "ttlSeconds": 30}
    first = one({"op": "putIfAbsent", **permit, "value": {"owner": "a"}}, permits=True)
    released = one({"op": "delete", "ns": "queen-locks", "key": "job#0", "expect": first.version}, permits=True)
    second = one({"op": "putIfAbsent", **permit, "value": {"owner": "b"}}, permits=True)
    assert released.applied
    assert second.applied
    assert second.version > first.version


def test_a_batch_of_puts_writes_all_in_key_order_and_keeps_live_created_at():
    with time_machine.travel(T0, tick=False):
        one({"op": "put", "key": "b", "value": "old", "forever": True})
        one({"op": "put", "key": "c", "value": "old", "ttlSeconds": 1})
    later = T0 + timedelta(seconds=5)
    with time_machine.travel(later, tick=False):
        keys = ["zz", "b", "a", "c", "\u00e9", "B"]
        ops = [{"op": "put", "ns": "fast", "key": k, "value": {"k": k}, "ttlSeconds": 60} for k in keys]
        ops.append({"op": "put", "ns": "fast2", "key": "a", "value": 0, "forever": True})
        results = kv.kv_call(kv_wire.parse_ops(ops))
        assert [r.key for r in results] == [*keys, "a"]
        assert all(r.applied for r in results)
        assert [r.value for r in results[:-1]] == [{"k": k} for k in keys]
        by_key = {r.key: r.version for r in results[:-1]}
        in_byte_order = sorted(keys, key=str.encode)
        assert [by_key[k] for k in in_byte_order] == sorted(by_key.values())
        assert results[-1].version > max(by_key.values())  # namespace "fast2" sorts after "fast"
        for k in keys:
            row = kv.kv_get(namespace="fast", key=k)
            assert (row.value, row.version, row.expires_at) == ({"k": k}, by_key[k], later + timedelta(seconds=60))
    created = dict(KVEntry.objects.filter(namespace="fast").values_list("key", "created_at"))
    assert created["b"] == T0  # was live: keeps its creation time
    assert created["c"] == later  # had expired: created anew
    assert created["a"] == later


def test_lone_writes_tell_the_dashboards_without_a_commit_hook(monkeypatch):
    """A lone write's one statement committed when it returned: its event is
    marked at once, without going through ``on_commit``; a write in a
    transaction still waits for the commit."""
    from django.db import transaction

    from queenadmin.domain import clock, events
    from queenadmin.domain.kv.store import store

    if not store().one_statement_writes:
        pytest.skip("this store writes a lone put in a transaction")
    seen: list[tuple[str, Any]] = []
    monkeypatch.setattr(events.publisher, "listeners", [lambda group, message: seen.append((group, message))])
    hooked: list[Any] = []
    real_on_commit = transaction.on_commit
    monkeypatch.setattr(
        events.transaction, "on_commit", lambda func, *a, **kw: (hooked.append(func), real_on_commit(func, *a, **kw))
    )
    first = one({"op": "put", "key": "e1", "value": 1, "forever": True})
    assert one({"op": "put", "key": "e1", "value": 2, "forever": True, "expect": first.version}).applied
    kv.kv_call(
        kv_wire.parse_ops([{"ns": "fast", "op": "put", "key": k, "value": 1, "forever": True} for k in ("m1", "m2")])
    )
    assert seen == [("kv", {"type": "kv.changed", "namespaces": ["fast"]})] * 3
    assert hooked == []
    with transaction.atomic():
        kv.kv_call_in_txn(
            kv_wire.parse_ops([{"ns": "fast", "op": "put", "key": "t", "value": 1, "forever": True}]), now=clock.now()
        )
        assert len(seen) == 3
    assert len(hooked) == 1
    assert len(seen) == 4
