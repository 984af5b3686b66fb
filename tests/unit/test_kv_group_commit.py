"""Group commit of lone KV writes (``domain/kv/group.py``).

Concurrent lone writes of one process share one statement and one commit
where the store has ``write_group`` (PostgreSQL); each caller still gets
the answer its own statement would have given, same-key writes behave as
if run one after another in the order of their versions, and versions rise
in commit order. The threaded invariants hold on both databases; the tests
that need a group to form run where the store groups.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from django.db import connection

from queenadmin.api.wire import kv as kv_wire
from queenadmin.domain import kv
from queenadmin.domain.kv import group
from queenadmin.domain.kv.store import store
from queenadmin.plumbing import db
from tests.threads import in_thread

pytestmark = pytest.mark.django_db(transaction=True)

T0 = datetime(2026, 10, 8, 10, 0, 0, tzinfo=UTC)


@pytest.fixture
def grouping() -> None:
    """Skip where the store writes each lone write by itself (no ``write_group``)."""
    if not store().one_statement_writes:
        pytest.skip("the store has no write_group: lone writes are not grouped")


def one(op: dict[str, Any]) -> Any:
    return kv.kv_call(kv_wire.parse_ops([{"ns": "grp", **op}]))[0]


def put(key: str, value: Any, **extra: Any) -> kv.KVPut:
    return kv.KVPut("grp", key, db.json_text(value), extra.pop("ttl", None), **extra)


@pytest.fixture
def counted(monkeypatch):
    """The statements ``write_group`` ran, as the lists of items each wrote."""
    the_store = store()
    runs: list[list[Any]] = []
    real = type(the_store).write_group

    def counting(items):
        runs.append(list(items))
        return real(the_store, items)

    monkeypatch.setattr(the_store, "write_group", counting, raising=False)
    return runs


def test_one_statement_answers_each_write_as_alone(grouping):
    """Every form in one statement: applied ones answer their version and
    value, refused ones None, and nothing of a refused one is written."""
    live = one({"op": "put", "key": "live", "value": 1, "forever": True})
    doomed = one({"op": "put", "key": "doomed", "value": "bye", "forever": True})
    casme = one({"op": "put", "key": "casme", "value": 2, "forever": True})
    stale = one({"op": "put", "key": "stale", "value": 3, "forever": True})
    old = one({"op": "put", "key": "old", "value": 4, "ttlSeconds": 1})
    later = datetime.now(UTC) + timedelta(seconds=5)
    items: list[Any] = [
        ("put", put("new", {"a": 1}), later, None),
        ("put", put("live", "over"), later, None),
        ("create", put("fresh", "c", expect=0), later, None),
        ("create", put("live2", "no", expect=0), later, None),
        ("create", put("old", "again", expect=0, ttl=timedelta(seconds=60)), later, None),
        ("cas", put("casme", "yes", expect=casme.version), later, None),
        ("cas", put("stale", "no", expect=stale.version + 1), later, None),
        ("cas", put("nothing", "no", expect=5), later, None),
        ("delete", kv.KVDelete("grp", "doomed", expect=doomed.version), later, None),
        ("delete", kv.KVDelete("grp", "absent"), later, None),
    ]
    one({"op": "put", "key": "live2", "value": "here", "forever": True})
    answers = store().write_group(items)
    applied = {items[i][1].key: a for i, a in enumerate(answers) if a is not None}
    assert set(applied) == {"new", "live", "fresh", "old", "casme", "doomed"}
    assert applied["doomed"] == (doomed.version, '"bye"')
    assert applied["new"][1] == '{"a":1}'
    versions = [applied[k][0] for k in ("new", "live", "fresh", "old", "casme")]
    assert len(set(versions)) == 5
    assert min(versions) > max(live.version, casme.version, stale.version, old.version)
    for key, (version, value_json) in applied.items():
        row = kv.kv_get(namespace="grp", key=key, now=later)
        if key == "doomed":
            assert row is None
        else:
            assert (row.version, db.json_text(row.value)) == (version, value_json)
    assert kv.kv_get(namespace="grp", key="stale").value == 3
    assert kv.kv_get(namespace="grp", key="live2").value == "here"
    assert kv.kv_get(namespace="grp", key="nothing") is None
    refreshed = kv.kv_get(namespace="grp", key="old", now=later)
    assert refreshed.created_at == later
    # Each applied write is in its key's history, from the same statement;
    # a refused one is not.
    for key, (version, value_json) in applied.items():
        (newest,) = kv.kv_history(namespace="grp", key=key, limit=1).versions or (None,)
        assert newest is not None, key
        assert newest.at == later, key
        if key == "doomed":
            assert (newest.op, newest.value) == ("delete", None)
            assert newest.version > version
        else:
            assert (newest.op, newest.version, db.json_text(newest.value)) == ("put", version, value_json)
    for key in ("stale", "live2", "nothing"):
        assert all(v.at != later for v in kv.kv_history(namespace="grp", key=key).versions), key


def _hold_key_lock(key: str) -> psycopg.Connection[Any]:
    """A connection holding ``grp/key``'s advisory lock until it commits."""
    from queenadmin.domain.kv.store.postgres import ADVISORY_CLASS

    holder = psycopg.connect(**db.connect_params())
    holder.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [ADVISORY_CLASS, f"grp/{key}"])
    return holder


def test_writes_queued_behind_one_in_flight_share_one_statement(grouping, counted, monkeypatch):
    """Writes that arrive while one is in flight go out together, each with
    its own answer; a second write of a key waits for the next group."""
    monkeypatch.setattr(group, "PATIENCE_SECONDS", 60.0)
    casme = one({"op": "put", "key": "casme", "value": 0, "forever": True})
    taken = one({"op": "put", "key": "taken", "value": 0, "forever": True})
    combiner = group.combiner_of(store())
    holder = _hold_key_lock("gate")
    try:
        gate, gate_out = in_thread(one, {"op": "put", "key": "gate", "value": 0, "forever": True})
        time.sleep(0.2)  # the gate's write leads, and waits for the lock
        assert combiner._busy
        waves = [
            {"op": "put", "key": "a", "value": 1, "forever": True},
            {"op": "put", "key": "b", "value": 1, "forever": True},
            {"op": "put", "key": "a", "value": 2, "forever": True},
            {"op": "put", "key": "casme", "value": 1, "forever": True, "expect": casme.version},
            {"op": "put", "key": "taken", "value": 1, "forever": True, "expect": taken.version + 1},
            {"op": "putIfAbsent", "key": "taken", "value": 1, "forever": True},
            {"op": "delete", "key": "nothing"},
        ]
        threads = []
        for op in waves:
            threads.append(in_thread(one, op))
            # One at a time, so the queue's order is the list's.
            deadline = time.monotonic() + 10
            while len(combiner._queue) < len(threads):
                assert time.monotonic() < deadline
                time.sleep(0.005)
    finally:
        holder.commit()
        holder.close()
    for thread, _ in [(gate, gate_out), *threads]:
        thread.join(timeout=30)
    answers = [out[0] for _, out in threads]
    assert not [a for a in [gate_out[0], *answers] if isinstance(a, BaseException)]
    first_a, b, second_a, cas_ok, cas_stale, create_taken, delete_nothing = answers
    assert (first_a.applied, b.applied, second_a.applied, cas_ok.applied) == (True, True, True, True)
    assert (cas_stale.applied, cas_stale.reason, cas_stale.version) == (False, "version", taken.version)
    # "taken" is written by no group member, so its create is refused by
    # the group's statement, and the planner answers why.
    assert (create_taken.applied, create_taken.reason) == (False, "exists")
    assert (delete_nothing.applied, delete_nothing.reason) == (False, "absent")
    # The first group is everything queued but the second write of each
    # key; those form the next.
    assert [sorted(item[1].key for item in run) for run in counted] == [
        ["a", "b", "casme", "nothing", "taken"],
        ["a", "taken"],
    ]
    # Commit order: the gate, then the first group, then the second.
    assert gate_out[0].version < min(first_a.version, b.version, cas_ok.version)
    assert second_a.version > first_a.version
    assert kv.kv_get(namespace="grp", key="a").value == 2
    assert kv.kv_get(namespace="grp", key="a").version == second_a.version
    assert kv.kv_get(namespace="grp", key="casme").version == cas_ok.version


def test_a_failed_statement_fails_every_member(grouping, counted, monkeypatch):
    """A group's error reaches each of its callers: none is answered applied."""
    monkeypatch.setattr(group, "PATIENCE_SECONDS", 60.0)
    the_store = store()

    def broken(items):
        counted.append(list(items))
        raise RuntimeError("the statement failed")

    monkeypatch.setattr(the_store, "write_group", broken, raising=False)
    combiner = group.combiner_of(the_store)
    holder = _hold_key_lock("gate2")
    try:
        gate, gate_out = in_thread(one, {"op": "put", "key": "gate2", "value": 0, "forever": True})
        time.sleep(0.2)
        threads = [in_thread(one, {"op": "put", "key": f"f{n}", "value": n, "forever": True}) for n in range(3)]
        deadline = time.monotonic() + 10
        while len(combiner._queue) < 3:
            assert time.monotonic() < deadline
            time.sleep(0.005)
    finally:
        holder.commit()
        holder.close()
    for thread, _ in [(gate, gate_out), *threads]:
        thread.join(timeout=30)
    assert gate_out[0].applied
    assert [type(out[0]) for _, out in threads] == [RuntimeError] * 3
    assert len(counted) == 1
    assert not combiner._busy
    assert kv.kv_get(namespace="grp", key="f0") is None


def test_a_write_behind_a_stuck_group_writes_alone(grouping, counted):
    """A group waiting for a key lock held elsewhere holds up writes of
    other keys for ``PATIENCE_SECONDS`` at most: they then write alone."""
    combiner = group.combiner_of(store())
    holder = _hold_key_lock("stuck")
    try:
        gate, gate_out = in_thread(one, {"op": "put", "key": "stuck", "value": 0, "forever": True})
        time.sleep(0.2)
        assert combiner._busy
        began = time.monotonic()
        other = one({"op": "put", "key": "free", "value": 1, "forever": True})
        assert time.monotonic() - began < 5
        assert other.applied
        assert gate.is_alive()
    finally:
        holder.commit()
        holder.close()
    gate.join(timeout=30)
    assert gate_out[0].applied
    assert gate_out[0].version > other.version
    assert counted == []


def _writer(seed: int, keys: list[str], until: float, log: list[tuple[Any, ...]]) -> None:
    import random

    rng = random.Random(seed)
    last: dict[str, int] = {}
    try:
        while time.monotonic() < until:
            key = rng.choice(keys)
            roll = rng.random()
            if roll < 0.45:
                op: dict[str, Any] = {"op": "put", "key": key, "value": [seed, len(log)], "forever": True}
            elif roll < 0.8:
                op = {"op": "put", "key": key, "value": [seed, len(log)], "forever": True, "expect": last.get(key, 1)}
            elif roll < 0.9:
                op = {"op": "putIfAbsent", "key": key, "value": [seed, len(log)], "forever": True}
            else:
                op = {"op": "delete", "key": key, "expect": last.get(key, 1)}
            began = time.monotonic()
            result = one(op)
            ended = time.monotonic()
            if result.version:
                last[key] = result.version
            log.append((key, op["op"], began, ended, result.version, result.applied, op.get("expect"), op.get("value")))
    finally:
        connection.close()


def test_concurrent_lone_writes_keep_versions_and_lose_nothing(counted):
    """Threads of one process writing a few keys: per-key versions follow
    real time, a version is consumed by at most one conditional write, and
    the stored row is the last applied write of its key."""
    keys = ["k1", "k2", "k3", "k4"]
    logs: list[list[tuple[Any, ...]]] = [[] for _ in range(8)]
    until = time.monotonic() + 3.0
    threads = [threading.Thread(target=_writer, args=(n, keys, until, logs[n])) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    events = [e for log in logs for e in log]
    assert len(events) > 200
    if store().one_statement_writes:
        assert len(counted) > 10
        assert max(len(run) for run in counted) > 1
    by_key: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    for event in events:
        by_key[event[0]].append(event)
    for key, key_events in by_key.items():
        finished = sorted(key_events, key=lambda e: e[3])
        high = 0
        i = 0
        for event in sorted(key_events, key=lambda e: e[2]):
            while i < len(finished) and finished[i][3] < event[2]:
                high = max(high, finished[i][4])
                i += 1
            assert not (event[4] and event[4] < high), (key, event, high)
        applied = [e for e in key_events if e[5]]
        # A delete answers the version it removed: after the write of it.
        last = max(applied, key=lambda e: (e[4], e[1] == "delete"))
        row = kv.kv_get(namespace="grp", key=key)
        if last[1] == "delete":
            assert row is None or row.version > last[4]
        else:
            assert row is not None
            assert (row.version, row.value) == (last[4], last[7])
    consumed = [(e[0], e[6]) for e in events if e[6] and e[5]]
    assert len(consumed) > 20
    assert len(consumed) == len(set(consumed))
