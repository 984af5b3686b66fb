"""Every lone write answers the same through either path.

On PostgreSQL, ``kv_call`` answers a lone write that ``planner.fast_path_of``
names with one statement of ``store/postgres.py``; everything else goes
through ``kv_call_in_txn`` (read under lock, ``planner.decide``, write). Each op
here runs against the same stored state (no row, a live row, an expired
row) once through ``kv_call`` outside any transaction and once through
``kv_call_in_txn`` inside one, and the answers and the rows left behind must be
the same. On SQLite both are the transactional path, so the test still
checks the planner against itself and the wire parser's commands.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.db import connection, transaction

from queenadmin.api.wire import kv as kv_wire
from queenadmin.domain import kv
from queenadmin.domain.kv import planner
from queenadmin.domain.kv import store as kv_store
from queenadmin.errors import PreconditionFailed
from queenadmin.models import KVEntry

pytestmark = pytest.mark.django_db(transaction=True)

T0 = datetime(2026, 10, 8, 10, 0, 0, tzinfo=UTC)
LATER = T0 + timedelta(seconds=5)
CUR = "current version"
NEXT = "current version + 1"

OPS: list[dict[str, Any]] = [
    {"op": "put", "value": "new", "forever": True},
    {"op": "put", "value": {"n": 1}, "ttlSeconds": 60},
    {"op": "put", "value": "new", "forever": True, "expect": 0},
    {"op": "put", "value": "new", "forever": True, "expect": 0, "required": True},
    {"op": "putIfAbsent", "value": "new", "ttlSeconds": 60},
    {"op": "put", "value": "new", "forever": True, "expect": CUR},
    {"op": "put", "value": "new", "forever": True, "expect": NEXT},
    {"op": "delete"},
    {"op": "delete", "required": True},
    {"op": "delete", "expect": CUR},
    {"op": "delete", "expect": NEXT},
    {"op": "delete", "expect": 0},
    {"op": "incr", "delta": 2, "ttlSeconds": 60},
    {"op": "incr", "delta": 2, "max": 3, "ttlSeconds": 60},
    {"op": "check", "expect": CUR},
    {"op": "check", "expect": 0, "required": True},
]


def _arrange(ns: str, key: str, state: str) -> int:
    """Leave ``key`` in ``state`` at LATER; its version (0 = no row)."""
    if state == "none":
        return 0
    ttl = {"ttlSeconds": 1} if state == "expired" else {"forever": True}
    with time_machine.travel(T0, tick=False):
        (written,) = kv.kv_call(kv_wire.parse_ops([{"op": "put", "ns": ns, "key": key, "value": 1, **ttl}]))
    assert isinstance(written, kv.WriteResult)
    return written.version


def _op(raw: dict[str, Any], ns: str, key: str, version: int) -> kv.KVOp:
    concrete = {k: (version if v == CUR else version + 1 if v == NEXT else v) for k, v in raw.items()}
    (op,) = kv_wire.parse_ops([{**concrete, "ns": ns, "key": key}])
    return op


def _relative(version: int, before: int) -> str:
    if version == 0:
        return "0"
    if version == before:
        return "before"
    return "new" if version > before else f"older:{version}"


def _outcome(run: Any, before: int) -> tuple[Any, ...]:
    try:
        result = run()
    except PreconditionFailed as exc:
        return ("aborted", exc.kv_reason, _relative(exc.version, before), exc.value)
    return (result.op, result.applied, result.reason, result.value, _relative(result.version, before))


def _row(ns: str, key: str, before: int) -> tuple[Any, ...] | None:
    row = KVEntry.objects.filter(namespace=ns, key=key).first()
    if row is None:
        return None
    return (row.value_json, _relative(row.version, before), row.expires_at, row.created_at, row.updated_at)


@pytest.mark.parametrize("state", ["none", "live", "expired"])
def test_the_fast_and_the_planned_path_agree(state, monkeypatch):
    fast_calls: list[str] = []
    if connection.vendor == "postgresql":
        for name in ("put_fast", "create_fast", "cas_fast", "delete_fast"):
            real = getattr(kv_store.PostgresStore, name)

            def spy(self, *args, _real=real, _name=name):
                fast_calls.append(_name)
                return _real(self, *args)

            monkeypatch.setattr(kv_store.PostgresStore, name, spy)
    expected_fast = took_fast = 0
    for i, raw in enumerate(OPS):
        key = f"k{i}"
        before_fast = _arrange("fast", key, state)
        before_planned = _arrange("planned", key, state)
        fast_op = _op(raw, "fast", key, before_fast)
        planned_op = _op(raw, "planned", key, before_planned)
        if planner.fast_path_of(fast_op) is not None:
            expected_fast += 1

        def fast(op: kv.KVOp = fast_op) -> Any:
            return kv.kv_call([op], now=LATER)[0]

        def planned(op: kv.KVOp = planned_op) -> Any:
            with transaction.atomic(durable=True):
                return kv.kv_call_in_txn([op], now=LATER)[0]

        with time_machine.travel(LATER, tick=False):
            fast_calls.clear()
            got_fast = _outcome(fast, before_fast)
            took_fast += len(fast_calls)
            got_planned = _outcome(planned, before_planned)
        assert got_fast == got_planned, (state, raw)
        assert _row("fast", key, before_fast) == _row("planned", key, before_planned), (state, raw)
    if connection.vendor == "postgresql":
        # The fast statements really ran (each falls back to the planner
        # when the row is not in its one state).
        assert took_fast == expected_fast > 0
