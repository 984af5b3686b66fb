"""POST /api/v1/locks over HTTP (Django's test client): every answer of
protocol.md 3.3 and every validation reason of 3.4, status and exact body.
Time moves with time-machine, never with sleeps."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.test import Client, override_settings

from queenadmin.domain import kv, tokens

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 10, 8, 10, 0, 0, 250000, tzinfo=UTC)


@pytest.fixture
def client() -> Client:
    token = tokens.token_create(by=tokens.HOST, name="locks-api-tests")
    return Client(HTTP_AUTHORIZATION=f"Bearer {token}")


def post(client: Client, body: Any) -> Any:
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    return client.post("/api/v1/locks", data=data, content_type="application/json")


def call(client: Client, *ops: dict[str, Any]) -> list[dict[str, Any]]:
    response = post(client, {"operations": list(ops)})
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/json"
    results = response.json()["results"]
    assert len(results) == len(ops)
    return results


def one(client: Client, op: dict[str, Any]) -> dict[str, Any]:
    return call(client, op)[0]


def guard(name: str, token: int, slot: int = 0) -> dict[str, Any]:
    return {"op": "check", "ns": "queen-locks", "key": f"{name}#{slot}", "expect": token, "required": True}


def acquire(name: str, ttl: int = 30, **extra: Any) -> dict[str, Any]:
    return {"op": "acquire", "name": name, "ttlSeconds": ttl, **extra}


# -- acquire -----------------------------------------------------------------


def test_acquire_granted_exact_body_and_owner_null_when_none_sent(client):
    first = one(client, acquire("report", owner="w-1"))
    token = first["token"]
    assert first == {
        "index": 0,
        "op": "acquire",
        "name": "report",
        "acquired": True,
        "slot": 0,
        "token": token,
        "owner": "w-1",
        "guard": guard("report", token),
    }
    anon = one(client, acquire("anon"))
    assert anon["owner"] is None
    assert "already" not in anon
    assert anon["token"] > token


def test_acquire_of_a_held_lock_is_200_held_with_its_holder(client):
    one(client, acquire("report", owner="w-1"))
    refused = one(client, acquire("report", owner="w-2"))
    assert refused == {
        "index": 0,
        "op": "acquire",
        "name": "report",
        "acquired": False,
        "reason": "held",
        "holders": [{"slot": 0, "owner": "w-1"}],
    }
    # No owner sent never matches a holder, even one without owner.
    one(client, acquire("anon"))
    assert one(client, acquire("anon"))["holders"] == [{"slot": 0, "owner": None}]


def test_owner_resend_answers_already_with_the_same_token(client):
    first = one(client, acquire("report", owner="w-1"))
    again = one(client, acquire("report", owner="w-1", ttlSeconds=60))
    assert again == {**first, "already": True}


def stored_permit(key: str, value: Any) -> None:
    """A permit row as a database from before the permits' rule may hold it."""
    kv.kv_call([kv.KVPut("queen-locks", key, json.dumps(value), timedelta(seconds=60))], permits=True)


def test_a_row_written_by_hand_occupies_the_slot_with_owner_null(client):
    stored_permit("gpu#0", {"note": "by hand"})
    refused = one(client, acquire("gpu"))
    assert refused["holders"] == [{"slot": 0, "owner": None}]


def test_expired_lock_is_taken_over_with_a_higher_token(client):
    with time_machine.travel(T0, tick=False) as traveller:
        first = one(client, acquire("report", ttl=5, owner="w-1"))
        traveller.shift(timedelta(seconds=4.9))
        assert one(client, acquire("report", owner="w-2"))["acquired"] is False
        traveller.shift(timedelta(seconds=0.2))
        second = one(client, acquire("report", owner="w-2"))
        assert second["acquired"] is True
        assert second["token"] > first["token"]
        # The old holder's token no longer renews, releases or guards.
        renew = one(client, {"op": "renew", "name": "report", "token": first["token"], "ttlSeconds": 5})
        assert renew == {
            "index": 0,
            "op": "renew",
            "name": "report",
            "renewed": False,
            "reason": "lost",
            "slot": 0,
            "holders": [{"slot": 0, "owner": "w-2"}],
        }
        release = one(client, {"op": "release", "name": "report", "token": first["token"]})
        assert release == {
            "index": 0,
            "op": "release",
            "name": "report",
            "released": False,
            "reason": "lost",
            "slot": 0,
            "holders": [{"slot": 0, "owner": "w-2"}],
        }
        stale = client.post(
            "/api/v1/kv", data=json.dumps({"operations": [first["guard"]]}), content_type="application/json"
        )
        assert stale.json() == {
            "ok": False,
            "reason": "kv_precondition",
            "failedIndex": 0,
            "kvReason": "version",
            "version": second["token"],
            # The permit records who took it: the calling token's name.
            "value": {"owner": "w-2", "caller": "locks-api-tests"},
        }


# -- semaphores ----------------------------------------------------------------


def test_semaphore_admits_limit_holders_then_answers_held(client):
    granted = [one(client, acquire("gpu", owner=f"w-{i}", limit=3)) for i in range(3)]
    assert all(g["acquired"] for g in granted)
    assert sorted(g["slot"] for g in granted) == [0, 1, 2]
    for g in granted:
        assert g["guard"] == guard("gpu", g["token"], g["slot"])
    refused = one(client, acquire("gpu", owner="w-9", limit=3))
    owners = {g["slot"]: g["owner"] for g in granted}
    assert refused == {
        "index": 0,
        "op": "acquire",
        "name": "gpu",
        "acquired": False,
        "reason": "held",
        "holders": [{"slot": s, "owner": owners[s]} for s in range(3)],
    }
    # A holder asking again gets its own slot back.
    again = one(client, acquire("gpu", owner=granted[1]["owner"], limit=3))
    assert again == {**granted[1], "already": True}
    # A released slot is the free one.
    released = one(client, {"op": "release", "name": "gpu", "token": granted[2]["token"], "slot": granted[2]["slot"]})
    assert released == {"index": 0, "op": "release", "name": "gpu", "released": True, "slot": granted[2]["slot"]}
    late = one(client, acquire("gpu", owner="w-9", limit=3))
    assert (late["acquired"], late["slot"]) == (True, granted[2]["slot"])


def test_semaphore_that_keeps_losing_its_free_slot_answers_contended(client, monkeypatch):
    from queenadmin.domain import locks
    from queenadmin.domain.locks import calls

    real_put = calls._put
    stolen: list[str] = []

    def put_after_a_thief(key, value, ttl, *, expect, op="put", now, waited_ms=None):
        if op == "putIfAbsent":
            # Somebody else takes the chosen free slot just before us.
            real_put(key, {"owner": f"thief-{len(stolen)}"}, ttl, expect=0, op="putIfAbsent", now=now)
            stolen.append(key)
        return real_put(key, value, ttl, expect=expect, op=op, now=now, waited_ms=waited_ms)

    monkeypatch.setattr(calls, "_put", put_after_a_thief)
    result = one(client, acquire("pool", owner="me", limit=8))
    assert len(stolen) == locks.ACQUIRE_ATTEMPTS
    assert result["acquired"] is False
    assert result["reason"] == "contended"
    assert {h["slot"]: h["owner"] for h in result["holders"]} == {
        int(key.split("#")[1]): f"thief-{i}" for i, key in enumerate(stolen)
    }


def test_a_lock_never_answers_contended(client, monkeypatch):
    from queenadmin.domain.locks import calls

    real_put = calls._put

    def put_after_a_thief(key, value, ttl, *, expect, op="put", now, waited_ms=None):
        real_put(key, {"owner": "thief"}, ttl, expect=0, op="putIfAbsent", now=now)
        return real_put(key, value, ttl, expect=expect, op=op, now=now, waited_ms=waited_ms)

    monkeypatch.setattr(calls, "_put", put_after_a_thief)
    result = one(client, acquire("solo", owner="me"))
    assert (result["acquired"], result["reason"]) == (False, "held")


# -- renew and release -----------------------------------------------------------


def test_renew_answers_a_new_token_and_the_old_one_stops_working(client):
    first = one(client, acquire("report", owner="w-1"))
    renewed = one(client, {"op": "renew", "name": "report", "token": first["token"], "ttlSeconds": 30})
    token = renewed["token"]
    assert token > first["token"]
    assert renewed == {
        "index": 0,
        "op": "renew",
        "name": "report",
        "renewed": True,
        "slot": 0,
        "token": token,
        "guard": guard("report", token),
    }
    stale = one(client, {"op": "renew", "name": "report", "token": first["token"], "ttlSeconds": 30})
    assert stale["renewed"] is False
    assert stale["holders"] == [{"slot": 0, "owner": "w-1"}]
    assert one(client, {"op": "release", "name": "report", "token": first["token"]})["released"] is False
    assert one(client, {"op": "release", "name": "report", "token": token}) == {
        "index": 0,
        "op": "release",
        "name": "report",
        "released": True,
        "slot": 0,
    }


def test_stale_renew_by_the_same_owner_is_carried_through(client):
    first = one(client, acquire("report", owner="w-1"))
    landed = one(client, {"op": "renew", "name": "report", "token": first["token"], "ttlSeconds": 30, "owner": "w-1"})
    # The answer of the first renew was lost; the owner resends with the old token.
    again = one(client, {"op": "renew", "name": "report", "token": first["token"], "ttlSeconds": 30, "owner": "w-1"})
    assert again["renewed"] is True
    assert again["token"] > landed["token"]
    stranger = one(client, {"op": "renew", "name": "report", "token": first["token"], "ttlSeconds": 30, "owner": "w-2"})
    assert stranger["renewed"] is False
    assert stranger["holders"] == [{"slot": 0, "owner": "w-1"}]


def test_renew_and_release_of_a_gone_permit_answer_lost_with_no_holders(client):
    with time_machine.travel(T0, tick=False) as traveller:
        first = one(client, acquire("report", ttl=2, owner="w-1"))
        traveller.shift(timedelta(seconds=2))
        renew = one(client, {"op": "renew", "name": "report", "token": first["token"], "ttlSeconds": 2})
        assert renew == {
            "index": 0,
            "op": "renew",
            "name": "report",
            "renewed": False,
            "reason": "lost",
            "slot": 0,
            "holders": [],
        }
        release = one(client, {"op": "release", "name": "report", "token": first["token"], "slot": 0})
        assert release == {
            "index": 0,
            "op": "release",
            "name": "report",
            "released": False,
            "reason": "lost",
            "slot": 0,
            "holders": [],
        }


def test_renew_keeps_the_lease_alive_past_its_first_lifetime(client):
    with time_machine.travel(T0, tick=False) as traveller:
        token = one(client, acquire("report", ttl=3, owner="w-1"))["token"]
        for _ in range(5):
            traveller.shift(timedelta(seconds=2))
            token = one(client, {"op": "renew", "name": "report", "token": token, "ttlSeconds": 3})["token"]
        assert one(client, acquire("report", owner="w-2"))["acquired"] is False


# -- get -------------------------------------------------------------------------


def test_get_lists_every_live_slot_with_since_expiry_and_renewal(client):
    with time_machine.travel(T0, tick=False) as traveller:
        a = one(client, acquire("gpu", ttl=10, owner="w-a", limit=2))
        traveller.shift(timedelta(seconds=1))
        b = one(client, acquire("gpu", ttl=10, owner="w-b", limit=2))
        traveller.shift(timedelta(seconds=1))
        renewed = one(client, {"op": "renew", "name": "gpu", "token": a["token"], "slot": a["slot"], "ttlSeconds": 20})
        traveller.shift(timedelta(seconds=1))
        renewed_again = one(
            client, {"op": "renew", "name": "gpu", "token": renewed["token"], "slot": a["slot"], "ttlSeconds": 20}
        )
        state = one(client, {"op": "get", "name": "gpu"})
    holders = {
        a["slot"]: {
            "slot": a["slot"],
            "owner": "w-a",
            "token": renewed_again["token"],
            "since": "2026-10-08T10:00:00.25+00:00",
            "expiresAt": "2026-10-08T10:00:23.25+00:00",
            "renewedAt": "2026-10-08T10:00:03.25+00:00",
        },
        b["slot"]: {
            "slot": b["slot"],
            "owner": "w-b",
            "token": b["token"],
            "since": "2026-10-08T10:00:01.25+00:00",
            "expiresAt": "2026-10-08T10:00:11.25+00:00",
            "renewedAt": "2026-10-08T10:00:01.25+00:00",
        },
    }
    assert state == {
        "index": 0,
        "op": "get",
        "name": "gpu",
        "held": True,
        "holders": [holders[0], holders[1]],
    }
    row = kv.kv_get(namespace="queen-locks", key=f"gpu#{a['slot']}", now=T0 + timedelta(seconds=3))
    assert row is not None
    assert row.value == {"owner": "w-a", "caller": "locks-api-tests", "since": "2026-10-08T10:00:00.25+00:00"}


def test_get_of_a_free_lock_and_keys_that_are_no_slots(client):
    for key in ("job#07", "job#+7", "jobs#0"):
        stored_permit(key, {"owner": "x"})
    assert one(client, {"op": "get", "name": "job"}) == {
        "index": 0,
        "op": "get",
        "name": "job",
        "held": False,
        "holders": [],
    }


def test_several_ops_per_call_are_independent_and_index_aligned(client):
    held = one(client, acquire("b", owner="other"))
    results = call(
        client,
        acquire("a", owner="me"),
        acquire("b", owner="me"),
        {"op": "get", "name": "c"},
        {"op": "release", "name": "d", "token": 1},
    )
    assert [r["index"] for r in results] == [0, 1, 2, 3]
    assert [r["op"] for r in results] == ["acquire", "acquire", "get", "release"]
    assert results[0]["acquired"] is True
    assert results[1]["holders"] == [{"slot": 0, "owner": held["owner"]}]
    assert results[2]["held"] is False
    assert results[3]["released"] is False


def test_bare_array_body_and_empty_operations(client):
    assert post(client, []).json() == {"results": []}
    assert post(client, {"operations": []}).json() == {"results": []}
    response = post(client, [{"op": "get", "name": "x"}])
    assert response.json() == {"results": [{"index": 0, "op": "get", "name": "x", "held": False, "holders": []}]}


def test_without_a_token_the_route_is_401():
    response = Client().post("/api/v1/locks", data="[]", content_type="application/json")
    assert response.status_code == 401


# -- validation: 400 {"error": "locks_bad_request", "reason", "detail"} ---------------


def bad(client: Client, body: Any, reason: str) -> None:
    response = post(client, body)
    assert response.status_code == 400, response.content
    data = response.json()
    assert set(data) == {"error", "reason", "detail"}
    assert data["error"] == "locks_bad_request"
    assert data["reason"] == reason
    assert isinstance(data["detail"], str)
    assert data["detail"]


def test_bad_body_exact_envelope(client):
    response = post(client, {"ops": []})
    assert response.status_code == 400
    assert response.json() == {
        "error": "locks_bad_request",
        "reason": "locks_bad_body",
        "detail": "body must be an array or {operations: [...]}",
    }


@pytest.mark.parametrize("body", ["", "{", "nan", '"text"', "3", "null", '{"operations": {}}', '{"operations": 1}'])
def test_bodies_that_are_no_call_are_locks_bad_body(client, body):
    bad(client, body, "locks_bad_body")


@pytest.mark.parametrize(
    ("op", "reason"),
    [
        ("acquire", "locks_bad_request"),
        (["acquire"], "locks_bad_request"),
        (None, "locks_bad_request"),
        ({"name": "x"}, "locks_unknown_op"),
        ({"op": "lock", "name": "x"}, "locks_unknown_op"),
        ({"op": 1, "name": "x"}, "locks_unknown_op"),
        ({"op": "get", "name": "x", "tenant": "t"}, "locks_tenant_not_an_input"),
        ({"op": "get", "name": "x", "tenantId": "t"}, "locks_tenant_not_an_input"),
        ({"op": "get", "name": "x", "_tenant": "t"}, "locks_tenant_not_an_input"),
        ({"op": "get"}, "locks_bad_name"),
        ({"op": "get", "name": ""}, "locks_bad_name"),
        ({"op": "get", "name": 7}, "locks_bad_name"),
        ({"op": "get", "name": "a#b"}, "locks_bad_name"),
        ({"op": "get", "name": "tab\there"}, "locks_bad_name"),
        ({"op": "get", "name": "del\x7f"}, "locks_bad_name"),
        ({"op": "get", "name": "c1\x85"}, "locks_bad_name"),
        ({"op": "get", "name": "x" * 257}, "locks_bad_name"),
        ({"op": "get", "name": "é" * 129}, "locks_bad_name"),
        ({"op": "acquire", "name": "x"}, "locks_ttl_required"),
        ({"op": "renew", "name": "x", "token": 1}, "locks_ttl_required"),
        ({"op": "acquire", "name": "x", "forever": True}, "locks_ttl_required"),
        ({"op": "acquire", "name": "x", "ttlSeconds": 30, "forever": True}, "locks_ttl_required"),
        ({"op": "acquire", "name": "x", "ttlSeconds": 1.5}, "locks_bad_ttl"),
        ({"op": "acquire", "name": "x", "ttlSeconds": "30"}, "locks_bad_ttl"),
        ({"op": "acquire", "name": "x", "ttlSeconds": None}, "locks_bad_ttl"),
        ({"op": "acquire", "name": "x", "ttlSeconds": 0}, "locks_bad_ttl"),
        ({"op": "acquire", "name": "x", "ttlSeconds": -5}, "locks_bad_ttl"),
        ({"op": "acquire", "name": "x", "ttlSeconds": True}, "locks_bad_ttl"),
        ({"op": "renew", "name": "x", "token": 1, "ttlSeconds": 0}, "locks_bad_ttl"),
        ({"op": "acquire", "name": "x", "ttlSeconds": 30, "owner": ""}, "locks_bad_owner"),
        ({"op": "acquire", "name": "x", "ttlSeconds": 30, "owner": 5}, "locks_bad_owner"),
        ({"op": "acquire", "name": "x", "ttlSeconds": 30, "owner": "a\nb"}, "locks_bad_owner"),
        ({"op": "acquire", "name": "x", "ttlSeconds": 30, "owner": "o" * 257}, "locks_bad_owner"),
        ({"op": "renew", "name": "x", "token": 1, "ttlSeconds": 30, "owner": ["w"]}, "locks_bad_owner"),
        ({"op": "renew", "name": "x", "ttlSeconds": 30}, "locks_token_required"),
        ({"op": "release", "name": "x"}, "locks_token_required"),
        ({"op": "release", "name": "x", "token": 0}, "locks_bad_token"),
        ({"op": "release", "name": "x", "token": -1}, "locks_bad_token"),
        ({"op": "release", "name": "x", "token": "9"}, "locks_bad_token"),
        ({"op": "release", "name": "x", "token": None}, "locks_bad_token"),
        ({"op": "renew", "name": "x", "token": True, "ttlSeconds": 30}, "locks_bad_token"),
        ({"op": "release", "name": "x", "token": 1, "slot": -1}, "locks_bad_slot"),
        ({"op": "release", "name": "x", "token": 1, "slot": 1024}, "locks_bad_slot"),
        ({"op": "release", "name": "x", "token": 1, "slot": "0"}, "locks_bad_slot"),
        ({"op": "renew", "name": "x", "token": 1, "ttlSeconds": 30, "slot": 0.5}, "locks_bad_slot"),
        ({"op": "acquire", "name": "x", "ttlSeconds": 30, "limit": 0}, "locks_bad_limit"),
        ({"op": "acquire", "name": "x", "ttlSeconds": 30, "limit": 1025}, "locks_bad_limit"),
        ({"op": "acquire", "name": "x", "ttlSeconds": 30, "limit": "3"}, "locks_bad_limit"),
        ({"op": "acquire", "name": "x", "ttlSeconds": 30, "limit": 2.5}, "locks_bad_limit"),
        ({"op": "acquire", "name": "x", "ttlSeconds": 30, "limit": True}, "locks_bad_limit"),
    ],
)
def test_each_bad_operation_has_its_reason(client, op, reason):
    bad(client, {"operations": [op]}, reason)


def test_whole_floats_are_integers(client):
    """``limit: 2.0`` is a semaphore of 2 and ``token: 7.0`` the token 7, as
    JSON Schema's integer counts them (tests/api/test_whole_numbers.py)."""
    first = one(client, acquire("sem", ttl=30.0, limit=2.0))
    second = one(client, acquire("sem", limit=2.0))
    assert {first["slot"], second["slot"]} == {0, 1}
    assert one(client, acquire("sem", limit=2))["acquired"] is False
    token, slot = float(first["token"]), float(first["slot"])
    released = one(client, {"op": "release", "name": "sem", "token": token, "slot": slot})
    assert (released["released"], released["slot"]) == (True, first["slot"])
    assert one(client, acquire("sem", limit=2))["slot"] == first["slot"]


def test_limits_at_the_edge_are_accepted(client):
    results = call(
        client,
        {"op": "acquire", "name": "x" * 256, "ttlSeconds": 30, "owner": "o" * 256, "limit": 1024},
        {"op": "release", "name": "y", "token": 1, "slot": 1023},
        {"op": "get", "name": "é" * 128},
    )
    assert results[0]["acquired"] is True


def test_a_bad_op_refuses_the_whole_call(client):
    bad(client, [acquire("a", owner="me"), {"op": "get", "name": ""}], "locks_bad_name")
    assert one(client, {"op": "get", "name": "a"})["held"] is False


def test_too_many_ops(client):
    ops = [{"op": "release", "name": f"l{i}", "token": 1} for i in range(65)]
    bad(client, ops, "locks_too_many_ops")
    assert len(call(client, *ops[:64])) == 64


def test_too_many_keys_counts_limits_and_gets(client):
    bad(client, [{"op": "get", "name": f"g{i}"} for i in range(5)], "locks_too_many_keys")
    assert len(call(client, *[{"op": "get", "name": f"g{i}"} for i in range(4)])) == 4
    semaphores = [acquire(f"s{i}", limit=1024) for i in range(4)]
    bad(client, [*semaphores, {"op": "release", "name": "one-more", "token": 1}], "locks_too_many_keys")


def test_a_name_twice_in_one_call(client):
    bad(client, [acquire("a"), {"op": "get", "name": "a"}], "locks_duplicate_in_call")


@override_settings(QUEENADMIN_KV_WRITE_RATE=1, QUEENADMIN_KV_WRITE_BURST=1)
def test_lock_calls_spend_the_kv_write_rate(client):
    from queenadmin.api import ratelimit

    ratelimit.reset()
    try:
        acquire = {"operations": [{"op": "acquire", "name": "rl", "ttlSeconds": 30}]}
        first = client.post("/api/v1/locks", data=json.dumps(acquire), content_type="application/json")
        assert first.status_code == 200
        refused = client.post("/api/v1/locks", data=json.dumps(acquire), content_type="application/json")
        assert refused.status_code == 429
        assert refused.json()["error"] == "rate_limited"
        assert refused["Retry-After"] == "1"
    finally:
        ratelimit.reset()
