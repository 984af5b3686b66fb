"""The KV domain: every outcome and reason of protocol.md sections 2.3 to 2.11."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine

from queenadmin.api.wire import kv as kv_wire
from queenadmin.domain import kv
from queenadmin.errors import KVBadRequest, KVConflict, KVPayloadTooLarge, PreconditionFailed
from queenadmin.models import KVEntry

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 10, 8, 10, 0, 0, tzinfo=UTC)


def call(*ops: dict[str, Any]) -> list[Any]:
    return kv.kv_call(kv_wire.parse_ops(list(ops)))


def one(op: dict[str, Any]) -> Any:
    return call(op)[0]


def put(key: str, value: Any = 1, ns: str = "t", **extra: Any) -> Any:
    extra.setdefault("forever", True) if "ttlSeconds" not in extra else None
    return one({"op": "put", "ns": ns, "key": key, "value": value, **extra})


def get(key: str, ns: str = "t") -> Any:
    return one({"op": "get", "ns": ns, "key": key})


# -- put and get -------------------------------------------------------------


def test_put_then_get_round_trips_value_and_version():
    written = put("a", {"x": [1, "two", None]})
    assert written.applied
    assert written.reason is None
    assert written.value == {"x": [1, "two", None]}
    found = get("a")
    assert found.row.value == {"x": [1, "two", None]}
    assert found.row.version == written.version
    assert found.row.expires_at is None


def test_get_of_a_missing_key_is_a_miss():
    assert get("nope").row is None


def test_null_is_a_value_not_an_absence():
    put("n", None)
    assert get("n").row is not None
    assert get("n").row.value is None


def test_versions_are_store_wide_and_rise_across_keys():
    a = put("a").version
    b = put("b").version
    a2 = put("a").version
    assert a < b < a2


def test_a_recreated_key_gets_a_higher_version_than_it_ever_had():
    first = put("k").version
    second = put("k").version
    deleted = one({"op": "delete", "ns": "t", "key": "k"})
    assert deleted.applied
    assert deleted.version == second
    recreated = put("k").version
    assert first < second < recreated


def test_put_without_expect_replaces_the_expiry():
    with time_machine.travel(T0, tick=False):
        put("e", 1, forever=None, ttlSeconds=60)
        assert get("e").row.expires_at == T0 + timedelta(seconds=60)
        put("e", 2)
        assert get("e").row.expires_at is None


# -- expect ------------------------------------------------------------------


def test_expect_zero_refuses_a_live_row_with_its_current_state():
    first = put("x", "winner")
    refused = put("x", "loser", expect=0)
    assert (refused.applied, refused.reason) == (False, "exists")
    assert refused.value == "winner"
    assert refused.version == first.version
    assert get("x").row.value == "winner"


def test_expect_n_updates_only_at_that_version():
    first = put("x", 1)
    stale = put("x", 2, expect=first.version + 1000)
    assert (stale.applied, stale.reason, stale.value, stale.version) == (False, "version", 1, first.version)
    fresh = put("x", 3, expect=first.version)
    assert fresh.applied
    assert fresh.version > first.version


def test_expect_n_never_creates():
    refused = put("ghost", 1, expect=5)
    assert (refused.applied, refused.reason, refused.value, refused.version) == (False, "absent", None, 0)
    assert get("ghost").row is None
    assert not KVEntry.objects.filter(key="ghost").exists()


def test_put_if_absent_is_put_with_expect_zero():
    won = one({"op": "putIfAbsent", "ns": "t", "key": "p", "value": "a", "forever": True})
    lost = one({"op": "putIfAbsent", "ns": "t", "key": "p", "value": "b", "forever": True})
    assert won.applied
    assert won.op == "putIfAbsent"
    assert (lost.applied, lost.reason, lost.value, lost.version) == (False, "exists", "a", won.version)


# -- expiry ------------------------------------------------------------------


def test_an_expired_row_is_invisible_and_never_blocks_expect_zero():
    with time_machine.travel(T0, tick=False):
        old = put("tmp", "old", forever=None, ttlSeconds=1)
    with time_machine.travel(T0 + timedelta(seconds=1), tick=False):
        # expires_at == now: no longer live.
        assert get("tmp").row is None
        assert KVEntry.objects.filter(key="tmp").exists()  # not reaped yet
        fresh = put("tmp", "new", expect=0)
        assert fresh.applied
        assert fresh.version > old.version
        assert get("tmp").row.value == "new"


def test_a_row_is_live_until_the_instant_it_expires():
    with time_machine.travel(T0, tick=False):
        put("tmp", 1, forever=None, ttlSeconds=2)
    with time_machine.travel(T0 + timedelta(seconds=2) - timedelta(microseconds=1), tick=False):
        assert get("tmp").row is not None


def test_expired_rows_answer_version_zero_to_refused_writes():
    with time_machine.travel(T0, tick=False):
        put("tmp", 1, forever=None, ttlSeconds=1)
    with time_machine.travel(T0 + timedelta(seconds=5), tick=False):
        refused = put("tmp", 2, expect=9)
        assert (refused.reason, refused.value, refused.version) == ("absent", None, 0)


def test_reaper_deletes_only_expired_rows():
    with time_machine.travel(T0, tick=False):
        put("short", 1, forever=None, ttlSeconds=1)
        put("long", 1, forever=None, ttlSeconds=100)
        put("forever", 1)
    with time_machine.travel(T0 + timedelta(seconds=10), tick=False):
        assert kv.kv_reap_expired() == 1
        assert sorted(KVEntry.objects.values_list("key", flat=True)) == ["forever", "long"]
        assert kv.kv_reap_expired() == 0


def test_reaper_works_in_batches():
    with time_machine.travel(T0, tick=False):
        call(*[{"op": "put", "ns": "t", "key": f"k{i}", "value": i, "ttlSeconds": 1} for i in range(7)])
    with time_machine.travel(T0 + timedelta(seconds=2), tick=False):
        assert kv.kv_reap_expired(batch_size=3) == 3
        assert kv.kv_reap_expired(batch_size=3) == 3
        assert kv.kv_reap_expired(batch_size=3) == 1


# -- delete ------------------------------------------------------------------


def test_delete_answers_the_removed_value_and_version():
    written = put("d", {"v": 1})
    deleted = one({"op": "delete", "ns": "t", "key": "d"})
    assert (deleted.applied, deleted.value, deleted.version) == (True, {"v": 1}, written.version)
    assert get("d").row is None


def test_delete_of_an_absent_key_is_refused_absent():
    refused = one({"op": "delete", "ns": "t", "key": "none"})
    assert (refused.applied, refused.reason, refused.value, refused.version) == (False, "absent", None, 0)


def test_delete_of_an_expired_key_is_refused_but_prunes_the_row():
    with time_machine.travel(T0, tick=False):
        put("gone", 1, forever=None, ttlSeconds=1)
    with time_machine.travel(T0 + timedelta(seconds=3), tick=False):
        refused = one({"op": "delete", "ns": "t", "key": "gone"})
        assert (refused.applied, refused.reason) == (False, "absent")
    assert not KVEntry.objects.filter(key="gone").exists()


def test_delete_with_expect_zero_on_an_absent_key_applies_at_version_zero():
    result = one({"op": "delete", "ns": "t", "key": "none", "expect": 0})
    assert (result.applied, result.version, result.value) == (True, 0, None)


def test_delete_with_expect_zero_on_a_live_key_is_refused_exists():
    written = put("live")
    result = one({"op": "delete", "ns": "t", "key": "live", "expect": 0})
    assert (result.applied, result.reason, result.version) == (False, "exists", written.version)


def test_delete_with_a_stale_expect_is_refused_version():
    written = put("v")
    result = one({"op": "delete", "ns": "t", "key": "v", "expect": written.version + 1})
    assert (result.applied, result.reason, result.version) == (False, "version", written.version)
    assert get("v").row is not None


# -- incr --------------------------------------------------------------------


def incr(key: str, delta: Any = 1, **extra: Any) -> Any:
    if "ttlSeconds" not in extra:
        extra.setdefault("forever", True)
    return one({"op": "incr", "ns": "t", "key": key, "delta": delta, **extra})


def test_incr_creates_from_zero_and_adds():
    assert incr("c", 5).value == 5
    assert incr("c", -2).value == 3


def test_incr_is_exact_decimal_arithmetic():
    incr("d", 0.1)
    result = incr("d", 0.2)
    assert result.value == 0.3
    assert KVEntry.objects.get(key="d").value_json == "0.3"


def test_incr_keeps_large_integers_exact():
    incr("big", 2**62)
    assert incr("big", 2**62).value == 2**63


def test_incr_max_refuses_and_never_saturates():
    incr("m", 9, max=10)
    refused = incr("m", 2, max=10)
    assert (refused.applied, refused.reason, refused.value) == (False, "limit", 9)
    assert get("m").row.value == 9


def test_incr_bound_is_checked_on_creation_too():
    refused = incr("new", 5, max=3)
    assert (refused.applied, refused.reason, refused.value, refused.version) == (False, "limit", 0, 0)
    assert get("new").row is None
    refused_min = incr("new2", -1, min=0)
    assert (refused_min.reason, refused_min.value) == ("limit", 0)


def test_incr_is_exact_beyond_28_digits():
    """10**30 + 1 is 10**30 + 1 (the default decimal context kept 28 digits)."""
    incr("huge", 10**30)
    result = incr("huge", 1)
    assert (result.applied, result.value) == (True, 10**30 + 1)
    assert KVEntry.objects.get(key="huge").value_json == "1" + "0" * 29 + "1"
    with pytest.raises(KVConflict, match="more significant digits than a fractional number keeps"):
        incr("huge", 0.5)
    assert get("huge").row.value == 10**30 + 1


def test_incr_past_max_by_one_in_the_29th_digit_is_refused():
    incr("cap", 10**28)
    refused = incr("cap", 1, max=10**28)
    assert (refused.applied, refused.reason, refused.value) == (False, "limit", 10**28)
    assert get("cap").row.value == 10**28


@pytest.mark.parametrize(
    ("field", "number"),
    [("delta", 10**100), ("delta", -(10**100)), ("delta", 1e-101), ("max", 10**100), ("min", 1e300)],
    ids=["delta-1e100", "delta-minus-1e100", "delta-1e-101", "max-1e100", "min-1e300"],
)
def test_incr_refuses_numbers_beyond_its_exact_range(field, number):
    op = {"op": "incr", "ns": "t", "key": "r", "delta": 1, "forever": True, field: number}
    with pytest.raises(KVBadRequest) as refused:
        one(op)
    assert str(refused.value).startswith(f"{field} is beyond what incr computes exactly")
    assert not isinstance(refused.value, KVConflict)  # the request's own number: a 400
    assert get("r").row is None


def test_incr_on_a_stored_number_beyond_its_range_is_a_conflict():
    put("giant", 10**100)
    with pytest.raises(KVConflict, match="the stored value is beyond what incr computes exactly"):
        incr("giant")
    assert get("giant").row.value == 10**100


def test_incr_is_exact_up_to_its_range_and_refuses_past_it():
    incr("edge", 10**100 - 2)
    assert incr("edge", 1).value == 10**100 - 1
    with pytest.raises(KVConflict, match="the result is beyond what incr computes exactly"):
        incr("edge", 1)
    assert get("edge").row.value == 10**100 - 1


def test_incr_on_a_non_number_is_refused_type():
    put("s", "text")
    refused = incr("s")
    assert (refused.applied, refused.reason, refused.value) == (False, "type", "text")


def test_incr_on_a_boolean_is_refused_type():
    put("b", True)
    assert incr("b").reason == "type"


def test_incr_ttl_applies_on_creation_only():
    with time_machine.travel(T0, tick=False):
        incr("ttl", 1, ttlSeconds=60)
    with time_machine.travel(T0 + timedelta(seconds=30), tick=False):
        incr("ttl", 1, ttlSeconds=600)
        assert get("ttl").row.expires_at == T0 + timedelta(seconds=60)


def test_incr_on_an_expired_non_number_starts_again_from_zero():
    with time_machine.travel(T0, tick=False):
        put("exp", "text", forever=None, ttlSeconds=1)
    with time_machine.travel(T0 + timedelta(seconds=2), tick=False):
        assert incr("exp", 4).value == 4


# -- check -------------------------------------------------------------------


def test_check_held_answers_the_expected_version_and_writes_nothing():
    written = put("c")
    held = one({"op": "check", "ns": "t", "key": "c", "expect": written.version})
    assert (held.applied, held.version, held.value) == (True, written.version, None)
    assert get("c").row.version == written.version


def test_check_not_held_answers_what_a_reader_would_see():
    written = put("c", {"owner": "me"})
    result = one({"op": "check", "ns": "t", "key": "c", "expect": written.version + 1})
    assert (result.applied, result.reason, result.value, result.version) == (
        False,
        "version",
        {"owner": "me"},
        written.version,
    )
    absent = one({"op": "check", "ns": "t", "key": "zz", "expect": 3})
    assert (absent.reason, absent.version) == ("absent", 0)
    exists = one({"op": "check", "ns": "t", "key": "c", "expect": 0})
    assert exists.reason == "exists"
    free = one({"op": "check", "ns": "t", "key": "zz", "expect": 0})
    assert (free.applied, free.version) == (True, 0)


# -- required and ordering ---------------------------------------------------


def test_required_failure_aborts_the_whole_call():
    written = put("guard", {"owner": "w-1"})
    with pytest.raises(PreconditionFailed) as info:
        call(
            {"op": "put", "ns": "t", "key": "a", "value": 1, "forever": True},
            {"op": "check", "ns": "t", "key": "guard", "expect": written.version + 1, "required": True},
            {"op": "put", "ns": "t", "key": "z", "value": 1, "forever": True},
        )
    exc = info.value
    assert (exc.failed_index, exc.kv_reason, exc.version, exc.value) == (
        1,
        "version",
        written.version,
        {"owner": "w-1"},
    )
    assert get("a").row is None
    assert get("z").row is None


def test_a_required_write_that_applies_commits_with_the_rest():
    call(
        {"op": "put", "ns": "t", "key": "a", "value": 1, "forever": True, "required": True},
        {"op": "put", "ns": "t", "key": "b", "value": 2, "forever": True},
    )
    assert get("a").row.value == 1
    assert get("b").row.value == 2


def test_results_are_index_aligned_whatever_the_apply_order():
    results = call(
        {"op": "put", "ns": "t", "key": "zz", "value": 1, "forever": True},
        {"op": "get", "ns": "t", "key": "aa"},
        {"op": "put", "ns": "t", "key": "aa", "value": 2, "forever": True},
    )
    assert [r.key for r in results] == ["zz", "aa", "aa"]
    assert [type(r).__name__ for r in results] == ["WriteResult", "GetResult", "WriteResult"]
    # Writes apply in key order, so aa draws its version before zz.
    assert results[2].version < results[0].version


def test_a_single_get_sees_the_state_before_the_call():
    put("k", "before")
    results = call(
        {"op": "get", "ns": "t", "key": "k"},
        {"op": "put", "ns": "t", "key": "k", "value": "after", "forever": True},
    )
    assert results[0].row.value == "before"


def test_multi_key_reads_see_the_calls_own_writes():
    results = call(
        {"op": "getMany", "ns": "t", "keys": ["k1", "k2"]},
        {"op": "put", "ns": "t", "key": "k1", "value": "new", "forever": True},
        {"op": "getPrefix", "ns": "t", "prefix": "k"},
    )
    assert [r.key for r in results[0].rows] == ["k1"]
    assert results[0].missing == ("k2",)
    assert [r.value for r in results[2].rows] == ["new"]


# -- a get after a write of its key in one call (issue 27) --------------------
# Queen's apply order: a get takes its place among the writes of its key by
# position, so it sees an earlier write of the key and not a later one; a
# getMany or getPrefix sees every write of the call.


def test_a_get_after_a_put_of_its_key_sees_the_put_as_get_many_does():
    before = put("k", "before", ttlSeconds=60)
    with time_machine.travel(T0, tick=False):
        results = call(
            {"op": "get", "ns": "t", "key": "k"},
            {"op": "put", "ns": "t", "key": "k", "value": "after", "ttlSeconds": 30},
            {"op": "get", "ns": "t", "key": "k"},
            {"op": "getMany", "ns": "t", "keys": ["k"]},
        )
        later = get("k").row
    first, written, got, many = results
    assert (first.row.value, first.row.version) == ("before", before.version)
    assert (written.applied, written.version) == (True, later.version)
    assert later.version > before.version
    assert later.value == "after"
    assert later.expires_at == T0 + timedelta(seconds=30)
    assert later.updated_at == T0
    # The get, the getMany of the same call and a get in the next call answer one row.
    assert got == kv.GetResult("k", later)
    assert many.rows == (later,)
    assert many.missing == ()


def test_a_get_after_a_put_of_a_new_key_finds_it():
    results = call(
        {"op": "put", "ns": "t", "key": "fresh", "value": [1, 2], "forever": True},
        {"op": "get", "ns": "t", "key": "fresh"},
        {"op": "get", "ns": "t", "key": "other"},
    )
    assert results[1] == kv.GetResult("fresh", get("fresh").row)
    assert (results[1].row.value, results[1].row.version) == ([1, 2], results[0].version)
    assert results[2] == kv.GetResult("other", None)


def test_a_get_after_a_delete_of_its_key_misses_as_get_many_does():
    put("gone", "x")
    results = call(
        {"op": "get", "ns": "t", "key": "gone"},
        {"op": "delete", "ns": "t", "key": "gone"},
        {"op": "get", "ns": "t", "key": "gone"},
        {"op": "getMany", "ns": "t", "keys": ["gone"]},
    )
    assert results[0].row.value == "x"
    assert results[1].applied
    assert results[2] == kv.GetResult("gone", None)
    assert (results[3].rows, results[3].missing) == ((), ("gone",))


def test_a_get_after_an_incr_of_its_key_sees_the_new_count():
    put("n", 5)
    results = call(
        {"op": "incr", "ns": "t", "key": "n", "delta": 2, "forever": True},
        {"op": "get", "ns": "t", "key": "n"},
    )
    assert (results[1].row.value, results[1].row.version) == (7, results[0].version)


def test_a_get_after_a_refused_write_of_its_key_sees_the_unchanged_row():
    before = put("k", "before")
    results = call(
        {"op": "put", "ns": "t", "key": "k", "value": "stale", "forever": True, "expect": before.version + 1},
        {"op": "get", "ns": "t", "key": "k"},
    )
    assert (results[0].applied, results[0].reason) == (False, "version")
    assert results[1] == kv.GetResult("k", get("k").row)
    assert (results[1].row.value, results[1].row.version) == ("before", before.version)


def test_a_get_after_a_write_inside_a_caller_transaction_sees_it():
    from django.db import transaction

    with transaction.atomic():
        results = kv.kv_call_in_txn(
            kv_wire.parse_ops(
                [
                    {"op": "put", "ns": "t", "key": "tx", "value": 1, "forever": True},
                    {"op": "get", "ns": "t", "key": "tx"},
                ]
            ),
            now=datetime.now(UTC),
        )
    assert (results[1].row.value, results[1].row.version) == (1, results[0].version)


# -- getMany and getPrefix ---------------------------------------------------


def test_get_many_returns_live_rows_in_byte_order_and_the_missing_keys():
    put("b")
    put("a")
    put("Z")
    result = one({"op": "getMany", "ns": "t", "keys": ["b", "nope", "a", "Z"]})
    assert [r.key for r in result.rows] == ["Z", "a", "b"]
    assert result.missing == ("nope",)
    assert result.truncated is False


def test_get_prefix_pages_with_an_exclusive_cursor():
    for i in range(5):
        put(f"p/{i}")
    put("q/0")
    first = one({"op": "getPrefix", "ns": "t", "prefix": "p/", "limit": 2})
    assert [r.key for r in first.rows] == ["p/0", "p/1"]
    assert (first.truncated, first.next_after) == (True, "p/1")
    second = one({"op": "getPrefix", "ns": "t", "prefix": "p/", "limit": 2, "after": "p/1"})
    assert [r.key for r in second.rows] == ["p/2", "p/3"]
    last = one({"op": "getPrefix", "ns": "t", "prefix": "p/", "limit": 2, "after": "p/3"})
    assert [r.key for r in last.rows] == ["p/4"]
    assert (last.truncated, last.next_after) == (False, None)


def test_get_prefix_treats_like_metacharacters_and_case_literally():
    put("a%b")
    put("a_c")
    put("axb")
    put("A%b")
    result = one({"op": "getPrefix", "ns": "t", "prefix": "a%"})
    assert [r.key for r in result.rows] == ["a%b"]
    result = one({"op": "getPrefix", "ns": "t", "prefix": "a_"})
    assert [r.key for r in result.rows] == ["a_c"]


def test_keys_sort_as_utf8_bytes():
    for key in ["é", "z", "Z", "a", "\U0001f600", "ä"]:
        put(key, ns="bytes")
    result = one({"op": "getPrefix", "ns": "bytes", "prefix": "\x01", "limit": 10})
    assert result.rows == ()
    page = kv.kv_list(namespace="bytes")
    assert [r.key for r in page.rows] == sorted(["é", "z", "Z", "a", "\U0001f600", "ä"], key=str.encode)


def test_get_prefix_skips_expired_rows():
    with time_machine.travel(T0, tick=False):
        put("e/1", forever=None, ttlSeconds=1)
        put("e/2")
    with time_machine.travel(T0 + timedelta(seconds=2), tick=False):
        result = one({"op": "getPrefix", "ns": "t", "prefix": "e/"})
        assert [r.key for r in result.rows] == ["e/2"]


def test_get_prefix_limit_is_clamped_never_refused():
    assert kv_wire.parse_ops([{"op": "getPrefix", "ns": "t", "prefix": "x", "limit": 0}])[0].limit == 1
    assert kv_wire.parse_ops([{"op": "getPrefix", "ns": "t", "prefix": "x", "limit": 5000}])[0].limit == 1000


def test_namespaces_are_separate():
    put("k", "one", ns="n1")
    put("k", "two", ns="n2")
    assert get("k", ns="n1").row.value == "one"
    assert dict(kv.kv_namespaces()) == {"n1": 1, "n2": 1}


def test_prefix_upper_bound_covers_every_extension():
    assert kv.prefix_upper_bound("ab") == "ac"
    assert kv.prefix_upper_bound("a\U0010ffff") == "b"
    assert kv.prefix_upper_bound("\U0010ffff") is None
    assert kv.prefix_upper_bound("\ud7ff") == "\ue000"


# -- validation --------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "reason"),
    [
        ("not an object", "kv_bad_request"),
        ({"op": "nope", "ns": "t"}, "kv_unknown_op"),
        ({"ns": "t", "key": "k"}, "kv_unknown_op"),
        ({"op": "get", "ns": "t", "key": "k", "tenant": "x"}, "kv_tenant_not_an_input"),
        ({"op": "get", "ns": "Upper", "key": "k"}, "kv_bad_namespace"),
        ({"op": "get", "ns": "-lead", "key": "k"}, "kv_bad_namespace"),
        ({"op": "get", "ns": "x" * 65, "key": "k"}, "kv_bad_namespace"),
        ({"op": "get", "key": "k"}, "kv_bad_namespace"),
        ({"op": "get", "ns": "t", "key": ""}, "kv_bad_key"),
        ({"op": "get", "ns": "t", "key": "a\x00b"}, "kv_bad_key"),
        ({"op": "get", "ns": "t", "key": 7}, "kv_bad_request"),
        ({"op": "put", "ns": "t", "key": "k", "value": 1}, "kv_expiry_not_specified"),
        ({"op": "put", "ns": "t", "key": "k", "value": 1, "ttlSeconds": 5, "forever": True}, "kv_expiry_not_specified"),
        ({"op": "put", "ns": "t", "key": "k", "value": 1, "ttlSeconds": 0}, "kv_bad_ttl"),
        ({"op": "put", "ns": "t", "key": "k", "value": 1, "ttlSeconds": -3}, "kv_bad_ttl"),
        ({"op": "put", "ns": "t", "key": "k", "value": 1, "ttlSeconds": 1.5}, "kv_bad_ttl"),
        ({"op": "put", "ns": "t", "key": "k", "value": 1, "ttlSeconds": "30"}, "kv_bad_ttl"),
        ({"op": "put", "ns": "t", "key": "k", "value": 1, "ttlSeconds": True}, "kv_bad_ttl"),
        ({"op": "put", "ns": "t", "key": "k", "value": 1, "ttlSeconds": 10**12}, "kv_bad_ttl"),
        ({"op": "put", "ns": "t", "key": "k", "forever": True}, "kv_bad_request"),
        ({"op": "put", "ns": "t", "key": "k", "value": 1, "forever": True, "expect": -1}, "kv_bad_expect"),
        ({"op": "put", "ns": "t", "key": "k", "value": 1, "forever": True, "expect": "3"}, "kv_bad_expect"),
        ({"op": "putIfAbsent", "ns": "t", "key": "k", "value": 1, "forever": True, "expect": 4}, "kv_bad_expect"),
        ({"op": "incr", "ns": "t", "key": "k", "delta": 1, "forever": True, "expect": 1}, "kv_bad_expect"),
        ({"op": "incr", "ns": "t", "key": "k", "forever": True}, "kv_bad_request"),
        ({"op": "incr", "ns": "t", "key": "k", "delta": True, "forever": True}, "kv_bad_request"),
        ({"op": "incr", "ns": "t", "key": "k", "delta": 1, "forever": True, "max": "9"}, "kv_bad_request"),
        ({"op": "check", "ns": "t", "key": "k"}, "kv_bad_expect"),
        ({"op": "put", "ns": "t", "key": "k", "value": 1, "forever": True, "required": "yes"}, "kv_bad_request"),
        ({"op": "getPrefix", "ns": "t"}, "kv_prefix_required"),
        ({"op": "getPrefix", "ns": "t", "prefix": ""}, "kv_prefix_required"),
        ({"op": "getMany", "ns": "t", "keys": []}, "kv_bad_request"),
    ],
)
def test_bad_operations_are_refused_with_their_reason(op, reason):
    with pytest.raises(KVBadRequest) as info:
        kv_wire.parse_ops([op])
    assert info.value.reason == reason


def test_oversize_key_and_value_are_413_reasons():
    with pytest.raises(KVPayloadTooLarge) as key_info:
        kv_wire.parse_ops([{"op": "get", "ns": "t", "key": "k" * 513}])
    assert key_info.value.reason == "kv_key_too_large"
    kv_wire.parse_ops([{"op": "get", "ns": "t", "key": "é" * 256}])  # 512 bytes is fine
    with pytest.raises(KVPayloadTooLarge) as value_info:
        kv_wire.parse_ops([{"op": "put", "ns": "t", "key": "k", "value": "x" * 65536, "forever": True}])
    assert value_info.value.reason == "kv_value_too_large"


def test_call_limits():
    too_many = [{"op": "get", "ns": "t", "key": f"k{i}"} for i in range(257)]
    with pytest.raises(KVBadRequest) as ops_info:
        kv_wire.parse_ops(too_many)
    assert ops_info.value.reason == "kv_too_many_ops"
    pages = [{"op": "getPrefix", "ns": "t", "prefix": f"p{i}", "limit": 1000} for i in range(2)]
    with pytest.raises(KVBadRequest) as keys_info:
        kv_wire.parse_ops(pages)
    assert keys_info.value.reason == "kv_too_many_keys"
    dup = [
        {"op": "put", "ns": "t", "key": "k", "value": 1, "forever": True},
        {"op": "check", "ns": "t", "key": "k", "expect": 0},
    ]
    with pytest.raises(KVBadRequest) as dup_info:
        kv_wire.parse_ops(dup)
    assert dup_info.value.reason == "kv_duplicate_key_in_call"
    # A get of a written key is not a duplicate.
    kv_wire.parse_ops([{"op": "get", "ns": "t", "key": "k"}, dup[0]])


def test_transaction_riders_have_tighter_limits():
    with pytest.raises(KVBadRequest) as info:
        kv_wire.parse_ops([{"op": "getPrefix", "ns": "t", "prefix": "p"}], in_transaction=True)
    assert info.value.reason == "kv_get_prefix_not_allowed_in_transaction"
    with pytest.raises(KVBadRequest) as ops_info:
        kv_wire.parse_ops([{"op": "get", "ns": "t", "key": f"k{i}"} for i in range(65)], in_transaction=True)
    assert ops_info.value.reason == "kv_too_many_ops"


# -- the in-process API ------------------------------------------------------


def test_in_process_helpers_speak_the_same_rules():
    written = kv.kv_put(namespace="app", key="cfg", value={"a": 1}, ttl=timedelta(minutes=5))
    assert written.applied
    assert kv.kv_get(namespace="app", key="cfg").value == {"a": 1}
    assert not kv.kv_put(namespace="app", key="cfg", value=2, ttl=None, expect=0).applied
    assert kv.kv_incr(namespace="app", key="n", ttl=None, maximum=1).value == 1
    assert kv.kv_incr(namespace="app", key="n", ttl=None, maximum=1).reason == "limit"
    assert kv.kv_delete(namespace="app", key="cfg").applied
    assert kv.kv_get(namespace="app", key="cfg") is None


def test_totals_count_rows_and_their_size():
    put("ab", {"x": 1})
    put("c", "é", ns="other")
    assert kv.kv_totals() == (2, len("ab") + len('{"x":1}') + len("c") + len('"é"'))
