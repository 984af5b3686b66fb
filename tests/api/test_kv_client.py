"""The official queen-mq client against a live ``manage.py serve``.

These run on whichever database the suite runs on: the server gets a fresh
database of its own (see ``tests/conftest.py``).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import timedelta

import httpx
import pytest
from queen import Queen
from queen.errors import KvError

from tests.conftest import ROOT

pytestmark = pytest.mark.live


async def test_round_trip_null_value_and_miss(queen, unique):
    ns = unique("rt")
    put = await queen.kv.put(ns, "cart", {"items": 3}, ttl_seconds=60)
    assert put["applied"] is True
    got = await queen.kv.get(ns, "cart")
    assert (got["found"], got["value"], got["version"]) == (True, {"items": 3}, put["version"])
    assert got["expiresAt"].endswith("+00:00")
    await queen.kv.put(ns, "nothing", None, forever=True)
    null = await queen.kv.get(ns, "nothing")
    assert null["found"] is True
    assert null["value"] is None
    miss = await queen.kv.get(ns, "absent")
    assert miss["found"] is False
    assert not miss


async def test_expect_refuses_a_stale_write_with_the_current_state(queen, unique):
    ns = unique("cas")
    first = await queen.kv.put(ns, "cart", {"items": 3}, ttl_seconds=600)
    second = await queen.kv.put(ns, "cart", {"items": 4}, ttl_seconds=600, expect=first["version"])
    assert second["applied"] is True
    stale = await queen.kv.put(ns, "cart", {"items": 5}, ttl_seconds=600, expect=first["version"])
    assert (stale["applied"], stale["reason"]) == (False, "version")
    assert stale["version"] == second["version"]
    assert stale["value"] == {"items": 4}
    nothing = await queen.kv.put(ns, "ghost", 1, forever=True, expect=3)
    assert (nothing["applied"], nothing["reason"], nothing["version"]) == (False, "absent", 0)
    assert (await queen.kv.get(ns, "ghost"))["found"] is False


async def test_put_if_absent_race_has_one_winner(live_server, unique):
    ns = unique("race")
    clients = [Queen(url=live_server.url, bearer_token=live_server.token, retry_attempts=1) for _ in range(8)]
    try:
        results = await asyncio.gather(
            *(c.kv.put_if_absent(ns, "leader", f"w{i}", ttl_seconds=60) for i, c in enumerate(clients))
        )
    finally:
        await asyncio.gather(*(c.close() for c in clients))
    winners = [r for r in results if r["applied"]]
    assert len(winners) == 1
    for loser in results:
        if loser is not winners[0]:
            assert loser["reason"] == "exists"
            assert loser["value"] == winners[0]["value"]
            assert loser["version"] == winners[0]["version"]


async def test_once_claims_a_key_for_one_caller(queen, unique):
    ns = unique("once")
    assert await queen.kv.once(ns, "job-1", ttl_seconds=60) is True
    assert await queen.kv.once(ns, "job-1", ttl_seconds=60) is False


async def test_incr_with_max_refuses_past_the_bound(queen, unique):
    ns = unique("limits")
    for expected in (1, 2, 3):
        hit = await queen.kv.incr(ns, "api:customer-42", delta=1, max=3, ttl_seconds=60)
        assert (hit["applied"], hit["value"]) == (True, expected)
    over = await queen.kv.incr(ns, "api:customer-42", delta=1, max=3, ttl_seconds=60)
    assert (over["applied"], over["reason"], over["value"]) == (False, "limit", 3)
    first_guarded = await queen.kv.incr(ns, "fresh", delta=5, max=3, ttl_seconds=60)
    assert (first_guarded["applied"], first_guarded["reason"], first_guarded["value"]) == (False, "limit", 0)


async def test_incr_keeps_the_live_expiry(queen, unique):
    ns = unique("ttl")
    first = await queen.kv.incr(ns, "c", delta=1, ttl_seconds=60)
    await queen.kv.incr(ns, "c", delta=1, ttl_seconds=3600)
    got = await queen.kv.get(ns, "c")
    assert got["value"] == 2
    assert first["applied"]
    first_expiry = got["expiresAt"]
    await queen.kv.incr(ns, "c", delta=1, ttl_seconds=5)
    assert (await queen.kv.get(ns, "c"))["expiresAt"] == first_expiry


async def test_expiry_hides_the_key_and_frees_it_for_put_if_absent(clock_server, clock_queen, unique):
    queen = clock_queen
    ns = unique("exp")
    old = await queen.kv.put(ns, "tmp", "old", ttl_seconds=1)
    assert (await queen.kv.get(ns, "tmp"))["found"] is True
    clock_server.shift(timedelta(seconds=1.3))
    assert (await queen.kv.get(ns, "tmp"))["found"] is False
    again = await queen.kv.put_if_absent(ns, "tmp", "new", ttl_seconds=60)
    assert again["applied"] is True
    assert again["version"] > old["version"]


async def test_delete_is_idempotent(queen, unique):
    ns = unique("del")
    await queen.kv.put(ns, "k", 1, forever=True)
    assert (await queen.kv.delete(ns, "k"))["applied"] is True
    again = await queen.kv.delete(ns, "k")
    assert (again["applied"], again["reason"]) == (False, "absent")


async def test_prefix_paging_with_list_all(queen, unique):
    ns = unique("page")
    await queen.kv.batch([queen.kv.op.put(ns, f"user:{i:03d}", i, forever=True) for i in range(25)])
    await queen.kv.put(ns, "userx", "not under the prefix", forever=True)
    page = await queen.kv.get_prefix(ns, "user:", limit=10)
    assert len(page["rows"]) == 10
    assert page["truncated"] is True
    assert page["nextAfter"] == page["rows"][-1]["key"]
    rows = await queen.kv.list_all(ns, "user:", limit=7)
    assert [r["key"] for r in rows] == [f"user:{i:03d}" for i in range(25)]
    keys_only = await queen.kv.get_prefix(ns, "user:0", limit=3, keys_only=True)
    assert all("value" not in r for r in keys_only["rows"])


async def test_get_many_reports_missing_keys(queen, unique):
    ns = unique("many")
    await queen.kv.put(ns, "a", 1, forever=True)
    result = await queen.kv.get_many(ns, ["a", "b"])
    assert [r["key"] for r in result["rows"]] == ["a"]
    assert result["missing"] == ["b"]


async def test_batch_results_are_index_aligned(queen, unique):
    ns = unique("batch")
    ops = [
        queen.kv.op.put(ns, "z", 1, forever=True),
        queen.kv.op.get(ns, "a"),
        queen.kv.op.put(ns, "a", 2, forever=True),
    ]
    results = await queen.kv.batch(ops)
    assert [r["index"] for r in results] == [0, 1, 2]
    assert [r["op"] for r in results] == ["put", "get", "put"]


async def test_a_get_in_a_batch_sees_an_earlier_write_of_its_key_only(queen, unique):
    """Issue 27: Queen's apply order in one call. A get before the put of its
    key answers the state before the call, a get after it the put, as the
    getMany of the same call and a get in the next call do."""
    ns = unique("order")
    before = await queen.kv.put(ns, "k", "before", forever=True)
    earlier = await queen.kv.get(ns, "k")
    op = queen.kv.op
    results = await queen.kv.batch(
        [
            op.get(ns, "k"),
            op.put(ns, "k", "after", ttl_seconds=60),
            op.get(ns, "k"),
            op.get_many(ns, ["k"]),
            op.put(ns, "new", {"n": 1}, forever=True),
            op.get(ns, "new"),
        ]
    )
    later = await queen.kv.get(ns, "k")
    assert later["version"] == results[1]["version"] > before["version"]
    assert (later["found"], later["value"]) == (True, "after")
    assert later["expiresAt"] is not None
    assert {**results[0]} == {**earlier, "index": 0}
    assert (earlier["value"], earlier["version"]) == ("before", before["version"])
    assert {**results[2]} == {**later, "index": 2, "op": "get"}
    row = {k: later[k] for k in ("key", "value", "version", "expiresAt", "updatedAt")}
    assert {**results[3]} == {"index": 3, "op": "getMany", "rows": [row], "missing": [], "truncated": False}
    assert (results[5]["found"], results[5]["value"], results[5]["version"]) == (True, {"n": 1}, results[4]["version"])


async def test_check_asserts_a_version_without_writing(queen, unique):
    ns = unique("check")
    put = await queen.kv.put(ns, "k", 1, forever=True)
    held = await queen.kv.check(ns, "k", expect=put["version"])
    assert held["applied"] is True
    assert "value" not in held
    moved = await queen.kv.check(ns, "k", expect=put["version"] + 1)
    assert (moved["applied"], moved["reason"], moved["value"]) == (False, "version", 1)


async def test_bad_namespace_is_a_kv_bad_request_error(queen):
    with pytest.raises(KvError) as info:
        await queen.kv.put("Bad Namespace", "k", 1, forever=True)
    assert info.value.code == "kv_bad_request"
    assert info.value.reason == "kv_bad_namespace"


async def test_a_wrong_token_is_refused(live_server):
    client = Queen(url=live_server.url, bearer_token="qa_wrong", retry_attempts=1)
    try:
        with pytest.raises(KvError) as info:
            await client.kv.get("ns", "k")
        assert info.value.code == "unauthorized"
    finally:
        await client.close()


def test_revoked_token_stops_working_within_the_cache_time(live_server):
    token = live_server.manage("apitoken", "create", "to-revoke").strip().splitlines()[-1]
    headers = {"Authorization": f"Bearer {token}"}
    ok = httpx.post(f"{live_server.url}/api/v1/kv", json={"operations": []}, headers=headers)
    assert ok.status_code == 200
    listing = live_server.manage("apitoken", "list")
    assert "to-revoke" in listing
    assert token not in listing
    live_server.manage("apitoken", "revoke", "to-revoke")
    # The server trusts a validated token for QUEENADMIN_TOKEN_CACHE_SECONDS (1 s).
    deadline = 0
    status = 200
    while deadline < 30 and status == 200:
        status = httpx.post(f"{live_server.url}/api/v1/kv", json={"operations": []}, headers=headers).status_code
        deadline += 1
        if status == 200:
            import time

            time.sleep(0.1)
    assert status == 401
    assert "revoked" in live_server.manage("apitoken", "list")


def test_health_and_unknown_routes_on_the_live_server(live_server):
    assert httpx.get(f"{live_server.url}/health").json() == {"status": "ok"}
    missing = httpx.get(f"{live_server.url}/api/v1/nope", headers={"Authorization": f"Bearer {live_server.token}"})
    assert missing.status_code == 404
    assert missing.json()["code"] == "no_such_route"


def test_apitoken_create_prints_the_token_alone_on_the_last_line(live_server):
    out = live_server.manage("apitoken", "create", "printed")
    last = out.strip().splitlines()[-1]
    assert last.startswith("qa_")
    assert " " not in last
    duplicate = subprocess.run(
        [sys.executable, "manage.py", "apitoken", "create", "printed"],
        cwd=ROOT,
        env=live_server.env,
        capture_output=True,
        text=True,
    )
    assert duplicate.returncode != 0
    assert "exists already" in duplicate.stderr
