"""Random KV calls against a reference model of protocol.md section 2.

The model knows each key's value, version and expiry; the store must agree
on every answer. It cannot predict version numbers, so it checks what the
protocol promises about them: an applied write gets a version higher than
any ever handed out, a refused one answers the current live version.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
import time_machine
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from queenadmin.api.wire import kv as kv_wire
from queenadmin.domain import kv
from queenadmin.errors import PreconditionFailed
from queenadmin.models import KVEntry

T0 = datetime(2026, 10, 8, 10, 0, 0, tzinfo=UTC)
KEYS = ["a", "b", "c"]


@dataclass
class Row:
    value: Any
    version: int
    expires_at: datetime | None


def live(row: Row | None, now: datetime) -> Row | None:
    if row is None or (row.expires_at is not None and row.expires_at <= now):
        return None
    return row


values = st.one_of(st.integers(-5, 5), st.just("text"), st.none(), st.lists(st.integers(0, 3), max_size=2))
ttl = st.one_of(st.none(), st.integers(1, 4))
expects = st.one_of(st.none(), st.just(0), st.integers(1, 3))  # 1..3 = "some version", resolved below

op_strategy = st.one_of(
    st.fixed_dictionaries(
        {"op": st.just("put"), "key": st.sampled_from(KEYS), "value": values, "ttl": ttl, "expect": expects}
    ),
    st.fixed_dictionaries({"op": st.just("putIfAbsent"), "key": st.sampled_from(KEYS), "value": values, "ttl": ttl}),
    st.fixed_dictionaries({"op": st.just("delete"), "key": st.sampled_from(KEYS), "expect": expects}),
    st.fixed_dictionaries(
        {
            "op": st.just("incr"),
            "key": st.sampled_from(KEYS),
            "delta": st.integers(-3, 3),
            "ttl": ttl,
            "max": st.one_of(st.none(), st.integers(0, 4)),
        }
    ),
    st.fixed_dictionaries({"op": st.just("check"), "key": st.sampled_from(KEYS), "expect": expects}),
    st.fixed_dictionaries({"op": st.just("tick"), "seconds": st.integers(1, 3)}),
)


def wire(step: dict[str, Any], model: dict[str, Row], now: datetime) -> dict[str, Any]:
    raw: dict[str, Any] = {"op": step["op"], "ns": "model", "key": step["key"]}
    if "value" in step:
        raw["value"] = step["value"]
    if "ttl" in step:
        raw.update({"forever": True} if step["ttl"] is None else {"ttlSeconds": step["ttl"]})
    if step.get("expect") is not None:
        expect = step["expect"]
        if expect > 0:
            current = live(model.get(step["key"]), now)
            # 1 = the current version (a match), 2 and 3 = a stale one.
            expect = current.version if (expect == 1 and current) else 10**9 + expect
        raw["expect"] = expect
    elif step["op"] == "check":
        raw["expect"] = 0
    if step["op"] == "incr":
        raw["delta"] = step["delta"]
        if step["max"] is not None:
            raw["max"] = step["max"]
    return raw


def expected(raw: dict[str, Any], model: dict[str, Row], now: datetime) -> tuple[bool, str | None, Any, int]:
    """(applied, reason, value, version) per the protocol; version -1 = "a new one"."""
    row = live(model.get(raw["key"]), now)
    cur_value, cur_version = (row.value, row.version) if row else (None, 0)
    expect = raw.get("expect")
    op = raw["op"]
    if op == "check":
        if expect == 0:
            return (False, "exists", cur_value, cur_version) if row else (True, None, None, 0)
        if not row:
            return False, "absent", None, 0
        return (True, None, None, expect) if cur_version == expect else (False, "version", cur_value, cur_version)
    if op == "delete":
        if expect == 0:
            return (False, "exists", cur_value, cur_version) if row else (True, None, None, 0)
        if not row:
            return False, "absent", None, 0
        if expect is not None and expect != cur_version:
            return False, "version", cur_value, cur_version
        return True, None, cur_value, cur_version
    if op in ("put", "putIfAbsent"):
        if op == "putIfAbsent":
            expect = 0
        if expect == 0 and row:
            return False, "exists", cur_value, cur_version
        if expect:
            if not row:
                return False, "absent", None, 0
            if expect != cur_version:
                return False, "version", cur_value, cur_version
        return True, None, raw["value"], -1
    # incr
    if row and (isinstance(cur_value, bool) or not isinstance(cur_value, int)):
        return False, "type", cur_value, cur_version
    total = (cur_value if row else 0) + raw["delta"]
    if "max" in raw and total > raw["max"]:
        return False, "limit", cur_value if row else 0, cur_version
    return True, None, total, -1


def apply_model(raw: dict[str, Any], result: Any, model: dict[str, Row], now: datetime) -> None:
    key = raw["key"]
    row = live(model.get(key), now)
    if raw["op"] == "delete":
        if result.applied or row is None:
            # Applied, or the row was already expired (a delete prunes it).
            model.pop(key, None)
        return
    if raw["op"] == "check" or not result.applied:
        return
    if raw["op"] == "incr" and row:
        expires_at = row.expires_at
    else:
        expires_at = None if raw.get("forever") else now + timedelta(seconds=raw["ttlSeconds"])
    model[key] = Row(result.value, result.version, expires_at)


@pytest.mark.django_db
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(op_strategy, min_size=1, max_size=25), required=st.booleans())
def test_the_store_agrees_with_the_model(steps, required):
    KVEntry.objects.filter(namespace="model").delete()
    model: dict[str, Row] = {}
    highest = 0
    now = T0
    for step in steps:
        if step["op"] == "tick":
            now += timedelta(seconds=step["seconds"])
            continue
        raw = wire(step, model, now)
        if required and raw["op"] != "incr":
            raw["required"] = True
        want = expected(raw, model, now)
        with time_machine.travel(now, tick=False):
            if raw.get("required") and not want[0]:
                with pytest.raises(PreconditionFailed) as info:
                    kv.kv_call(kv_wire.parse_ops([raw]))
                assert (info.value.kv_reason, info.value.value, info.value.version) == want[1:]
                continue
            result = kv.kv_call(kv_wire.parse_ops([raw]))[0]
        applied, reason, value, version = want
        assert (result.applied, result.reason) == (applied, reason), (raw, model)
        if raw["op"] == "incr" and applied:
            assert Decimal(str(result.value)) == Decimal(value)
        else:
            assert result.value == value, (raw, model)
        if version == -1:
            assert result.version > highest
            highest = result.version
        else:
            assert result.version == version
        apply_model(raw, result, model, now)
        with time_machine.travel(now, tick=False):
            for key in KEYS:
                stored = kv.kv_get(namespace="model", key=key)
                row = live(model.get(key), now)
                assert (stored is None) == (row is None), key
                if row is not None and stored is not None:
                    assert (stored.value, stored.version, stored.expires_at) == (row.value, row.version, row.expires_at)
