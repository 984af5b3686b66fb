"""/api/v1/timers over HTTP (Django's test client): exact answers and every refusal."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from typing import Any

import pytest
import time_machine
import zstandard
from django.test import Client

from queenadmin.domain import tokens
from queenadmin.models import Timer

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 10, 8, 10, 0, 0, 123456, tzinfo=UTC)
ISO0 = "2026-10-08T10:00:00.123456Z"


@pytest.fixture
def client() -> Client:
    token = tokens.token_create(by=tokens.HOST, name="timer-tests")
    return Client(HTTP_AUTHORIZATION=f"Bearer {token}")


def b64(value: Any) -> str:
    raw = value if isinstance(value, bytes) else json.dumps(value).encode()
    return base64.b64encode(raw).decode()


def schedule(queue: str = "orders", key: str = "k", delay_ms: Any = 1000, **extra: Any) -> dict[str, Any]:
    return {
        "op": "schedule",
        "queue": queue,
        "timerKey": key,
        "delayMs": delay_ms,
        "txn": "tx-1",
        "payload": b64({"a": 1}),
        **extra,
    }


def post(client: Client, body: Any) -> Any:
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    return client.post("/api/v1/timers", data=data, content_type="application/json")


def refused(response: Any, status: int, reason: str, error: str = "timers_bad_request") -> None:
    assert response.status_code == status, response.content
    body = response.json()
    assert (body["error"], body["reason"]) == (error, reason)
    assert isinstance(body["detail"], str)
    assert body["detail"]


def test_schedule_reschedule_and_cancel_exact_bodies(client):
    with time_machine.travel(T0, tick=False):
        first = post(client, {"operations": [schedule(key="order:1:expire")]})
    assert first.status_code == 200
    (result,) = first.json()["results"]
    message_id = result.pop("messageId")
    assert len(message_id) == 36
    assert message_id[14] == "7"
    assert result == {
        "ok": True,
        "status": "scheduled",
        "queue": "orders",
        "timerKey": "order:1:expire",
        "txn": "tx-1",
        "deliverAt": "2026-10-08T10:00:01.123456Z",
    }
    with time_machine.travel(T0, tick=False):
        again = post(client, [{**schedule(key="order:1:expire", delay_ms=250.5), "op": "reschedule", "txn": "tx-2"}])
    (moved,) = again.json()["results"]
    assert (moved["status"], moved["txn"], moved["deliverAt"]) == ("rescheduled", "tx-2", "2026-10-08T10:00:00.373956Z")
    assert moved["messageId"] != message_id
    cancelled = post(client, [{"op": "cancel", "queue": "orders", "timerKey": "order:1:expire"}])
    assert cancelled.json() == {
        "results": [{"ok": True, "status": "cancelled", "queue": "orders", "timerKey": "order:1:expire", "txn": "tx-2"}]
    }
    absent = post(client, [{"op": "cancel", "queue": "orders", "timerKey": "order:1:expire", "txn": "tx-2"}])
    assert absent.status_code == 200
    assert absent.json() == {
        "results": [{"ok": False, "status": "absent", "queue": "orders", "timerKey": "order:1:expire", "txn": "tx-2"}]
    }
    assert post(client, []).json() == {"results": []}


def test_delete_route_cancels_keys_with_slashes_and_echoes_txn(client):
    post(client, [schedule(key="a/b/c")])
    gone = client.delete("/api/v1/timers/orders/a/b/c")
    assert gone.status_code == 200
    assert gone.json() == {"ok": True, "status": "cancelled", "queue": "orders", "timerKey": "a/b/c", "txn": "tx-1"}
    absent = client.delete("/api/v1/timers/orders/a/b/c?txn=tx-9")
    assert absent.status_code == 200
    assert absent.json() == {"ok": False, "status": "absent", "queue": "orders", "timerKey": "a/b/c", "txn": "tx-9"}
    assert client.delete("/api/v1/timers/orders/nothing").json()["txn"] is None


def test_peek_list_and_count(client):
    with time_machine.travel(T0, tick=False):
        post(client, [schedule(key=f"k{i}", delay_ms=1000 * i, txn=f"t{i}") for i in range(5)])
    peek = client.get("/api/v1/timers/orders/k2").json()
    assert peek.pop("messageId")
    assert peek == {
        "found": True,
        "queue": "orders",
        "timerKey": "k2",
        "partition": "Default",
        "deliverAt": "2026-10-08T10:00:02.123456Z",
        "txn": "t2",
        "payloadZstd": False,
        "encrypted": False,
        "producerSub": "timer-tests",  # the scheduling token's name (issue 40)
        "attempts": 0,
        "lastError": None,
        "claimed": False,
        "createdAt": ISO0,
        "updatedAt": ISO0,
        "payload": b64({"a": 1}),
    }
    assert client.get("/api/v1/timers/orders/nope").json() == {"found": False, "queue": "orders", "timerKey": "nope"}
    page = client.get("/api/v1/timers/orders?limit=2").json()
    assert [r["timerKey"] for r in page["rows"]] == ["k0", "k1"]
    assert (page["truncated"], page["nextAfter"]) == (True, "k1")
    assert "payload" not in page["rows"][0]
    rest = client.get("/api/v1/timers/orders?after=k1&limit=5000").json()
    assert [r["timerKey"] for r in rest["rows"]] == ["k2", "k3", "k4"]
    assert (rest["truncated"], rest["nextAfter"]) == (False, None)
    assert client.get("/api/v1/timers/orders?limit=0").json()["rows"][0]["timerKey"] == "k0"
    assert client.get("/api/v1/timers/orders?mode=count").json() == {"count": 5}
    assert client.get("/api/v1/timers/orders?mode=count&prefix=k1").json() == {"count": 1}
    assert client.get("/api/v1/timers/other?mode=count").json() == {"count": 0}


def test_payload_zstd_is_stored_decompressed(client):
    packed = base64.b64encode(zstandard.ZstdCompressor().compress(b'{"big":"payload"}')).decode()
    post(client, [schedule(payload=packed, payloadZstd=True)])
    peek = client.get("/api/v1/timers/orders/k").json()
    assert base64.b64decode(peek["payload"]) == b'{"big":"payload"}'
    assert peek["payloadZstd"] is False


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"nope": 1}, "timers_bad_body"),
        ("3", "timers_bad_body"),
        ("not json", "timers_bad_body"),
        ([3], "timers_bad_request"),
        ([{"op": "fire", "queue": "q", "timerKey": "k"}], "timers_bad_op"),
        ([schedule(messageId="x")], "timers_server_owned_field"),
        ([schedule(deliverAt="2026-01-01T00:00:00Z")], "timers_server_owned_field"),
        ([schedule(_anything=1)], "timers_server_owned_field"),
        ([schedule(queue="")], "timers_queue_required"),
        ([schedule(queue=5)], "timers_queue_required"),
        ([schedule(key="")], "timers_bad_request"),
        ([schedule(partition="")], "timers_bad_request"),
        ([schedule(delay_ms=None)], "timers_delay_required"),
        ([schedule(delay_ms="5")], "timers_delay_required"),
        ([schedule(delay_ms=True)], "timers_delay_required"),
        ([schedule(txn="")], "timers_bad_request"),
        ([schedule(payload=None)], "timers_payload_required"),
        ([schedule(payload="***")], "timers_payload_not_base64"),
        ([schedule(payload=b64(b"not zstd"), payloadZstd=True)], "timers_payload_not_zstd"),
        ([schedule(payloadZstd="yes")], "timers_bad_request"),
        ([schedule(queue="q\x00")], "timers_bad_request"),
        ([schedule(), {"op": "cancel", "queue": "orders", "timerKey": "k"}], "timers_bad_request"),
        ([schedule(key=f"k{i}") for i in range(257)], "timers_too_many_ops"),
    ],
)
def test_each_bad_request_is_a_400_with_its_reason_and_writes_nothing(client, body, reason):
    response = post(client, body)
    refused(response, 400, reason)
    assert Timer.objects.count() == 0


def test_one_bad_op_refuses_the_whole_call(client):
    response = post(client, [schedule(key="good"), schedule(key="bad", payload="***")])
    refused(response, 400, "timers_payload_not_base64")
    assert not Timer.objects.exists()


def test_horizon_payload_size_and_name_limits(client):
    refused(post(client, [schedule(delay_ms=90 * 86400 * 1000 + 1)]), 403, "timers_horizon", "timer_horizon_exceeded")
    refused(post(client, [schedule(delay_ms=1e300)]), 403, "timers_horizon", "timer_horizon_exceeded")
    big = base64.b64encode(b"x" * (1024 * 1024 + 1)).decode()
    refused(post(client, [schedule(payload=big)]), 413, "timers_payload_too_large", "payload_too_large")
    long_queue = post(client, [schedule(queue="q" * 512)])
    assert long_queue.status_code == 413
    assert long_queue.json()["code"] == "name_too_long"
    assert not Timer.objects.exists()
    # The horizon itself and any past delay are fine.
    ok = post(client, [schedule(key="edge", delay_ms=90 * 86400 * 1000), schedule(key="past", delay_ms=-5000)])
    assert [r["status"] for r in ok.json()["results"]] == ["scheduled", "scheduled"]


def test_read_refusals(client):
    refused(client.get("/api/v1/timers/orders?mode=list"), 400, "timers_read_mode_unknown")
    refused(client.get("/api/v1/timers/orders?mode=count&after=x"), 400, "timers_count_bad_params")
    refused(client.get("/api/v1/timers/orders?mode=count&prefix=" + "p" * 129), 400, "timers_count_bad_prefix")


def test_timers_need_a_token():
    assert Client().post("/api/v1/timers", data="[]", content_type="application/json").status_code == 401
