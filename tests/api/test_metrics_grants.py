"""``/metrics`` and ``/api/v1/analytics/*`` meet a token's grants (issue 36).

A token granted ``queue:orders.*`` and ``kv:orders`` scrapes the series of
its own queues and namespace and nothing of billing's: no label value of
another queue or namespace appears in the body. Series about the deployment
(processes, hostnames, pids, store-wide totals) need a grant on every
resource of their kind; without one they are left out of ``/metrics`` and
the analytics routes answer 403. A token without grants sees everything,
as before.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from django.test import Client, override_settings

from queenadmin import metrics
from queenadmin.domain import clock, procmetrics, tokens
from queenadmin.metrics import process

pytestmark = pytest.mark.django_db

ORDERS, BILLING = "orders.eu", "billing.eu"
#: A replica's hostname and pid as the process sampler stores them.
HOST, PID = "replica-7.h36.example", 424242


@pytest.fixture
def admin() -> Client:
    """A token without grants, and a store with an orders and a billing side of each kind."""
    client = Client(
        HTTP_AUTHORIZATION=f"Bearer {tokens.token_create(by=tokens.HOST, name='metrics-admin', scope='admin')}"
    )

    def post(path: str, body: Any) -> None:
        answer = client.post(f"/api/v1{path}", data=json.dumps(body), content_type="application/json")
        assert answer.status_code in (200, 201), answer.content

    for side in ("orders", "billing"):
        queue = f"{side}.eu"
        post("/push", {"items": [{"queue": queue, "partition": "p", "payload": {"n": n}} for n in range(3)]})
        post("/kv", [{"op": "put", "ns": side, "key": "k", "value": 1, "forever": True}])
    post("/locks", [{"op": "acquire", "name": f"{BILLING}.lock", "ttlSeconds": 300}])
    timer = {"op": "schedule", "queue": BILLING, "timerKey": "t", "txn": "x", "payload": "e30=", "delayMs": 3_600_000}
    post("/timers", [timer])
    # A request answered by this process, as the server counts each one.
    metrics.request_started("kv")
    metrics.request_finished("kv", 200, 0.002)
    sample = process.read_self(now=clock.now())
    procmetrics.procmetrics_record(row=dataclasses.replace(sample, host=HOST, pid=PID))
    return client


def token(name: str, *grants: str) -> Client:
    made = tokens.token_create(by=tokens.HOST, name=name, scope="read", grants=grants)
    return Client(HTTP_AUTHORIZATION=f"Bearer {made}")


def scrape(client: Client) -> str:
    with override_settings(QUEENADMIN_METRICS_STORE_SECONDS=0):
        answer = client.get("/metrics")
    assert answer.status_code == 200, answer.content
    return answer.content.decode()


def series(text: str) -> set[str]:
    """The sample lines' names with their labels, values left out."""
    return {line.rsplit(" ", 1)[0] for line in text.splitlines() if line and not line.startswith("#")}


def refused(answer: Any) -> None:
    assert answer.status_code == 403, answer.content
    body = answer.json()
    assert body["error"] == body["code"] == "forbidden", body
    assert set(body) == {"error", "code", "detail"}, body


def test_a_granted_token_scrapes_only_its_own_queues_and_namespaces(admin):
    """A token granted queue:orders.* and kv:orders sees orders' depth and
    rows; nothing of billing, of the locks, the timers or the processes."""
    whole = scrape(admin)
    assert f'queenadmin_queue_depth{{queue="{BILLING}"}} 3.0' in whole
    assert 'queenadmin_kv_rows{namespace="billing"} 1.0' in whole

    text = scrape(token("orders-only", "queue:orders.*=read", "kv:orders=read"))
    assert f'queenadmin_queue_depth{{queue="{ORDERS}"}} 3.0' in text
    assert f'queenadmin_queue_in_flight{{queue="{ORDERS}"}} 0.0' in text
    assert 'queenadmin_kv_rows{namespace="orders"} 1.0' in text
    assert "billing" not in text
    assert "queen-locks" not in text
    assert "queenadmin_http_requests" not in text
    names = {s.partition("{")[0] for s in series(text)}
    assert names == {
        "queenadmin_queue_depth",
        "queenadmin_queue_in_flight",
        "queenadmin_queue_dead_letters",
        "queenadmin_queue_oldest_ready_age_seconds",
        "queenadmin_kv_rows",
    }


def test_a_token_granted_every_resource_scrapes_what_a_token_without_grants_does(admin):
    """Grants on every name of every kind (*=read) reach the deployment's
    series too: the same series as a token without grants."""
    whole = series(scrape(admin))
    assert any(s.startswith("queenadmin_http_requests_total{") for s in whole)
    assert {"queenadmin_locks_held", "queenadmin_timers_pending", "queenadmin_workers"} <= whole
    assert series(scrape(token("everything", "*=read"))) == whole


def test_store_wide_totals_need_a_grant_on_every_name_of_their_kind(admin):
    """The held locks need lock:*, the timers timer:*, the processes queue:*
    (the API's store-wide rule); each grant shows its totals and no more."""
    locks = series(scrape(token("locks", "lock:*=read")))
    assert "queenadmin_locks_held" in locks
    assert 'queenadmin_kv_rows{namespace="queen-locks"}' in locks
    assert not {"queenadmin_timers_pending", "queenadmin_workers", "queenadmin_store_read_seconds"} & locks
    timers = series(scrape(token("timers", "timer:*=read")))
    assert {"queenadmin_timers_pending", "queenadmin_timers_overdue_seconds"} <= timers
    assert not {"queenadmin_locks_held", "queenadmin_workers"} & timers
    every_queue = series(scrape(token("queues", "queue:*=read")))
    assert {"queenadmin_workers", "queenadmin_store_read_seconds"} <= every_queue
    assert f'queenadmin_queue_depth{{queue="{BILLING}"}}' in every_queue
    assert any(s.startswith("queenadmin_http_requests_total{") for s in every_queue)
    assert not {"queenadmin_locks_held", "queenadmin_timers_pending"} & every_queue
    assert not any(s.startswith("queenadmin_kv_rows") for s in every_queue)


def test_system_metrics_need_a_whole_store_grant(admin):
    """The replicas' hostnames and pids: 403 for a token granted orders
    only, in the auth envelope and without them; 200 for a token granted
    queue:* or without grants."""
    limited = token("orders-only", "queue:orders.*=read", "kv:orders=read")
    for path in ("/api/v1/analytics/system-metrics", "/api/v1/analytics/worker-metrics"):
        answer = limited.get(path)
        refused(answer)
        assert HOST not in answer.content.decode()
        assert str(PID) not in answer.content.decode()
    for client in (admin, token("queues", "queue:*=read")):
        answer = client.get("/api/v1/analytics/system-metrics")
        assert answer.status_code == 200, answer.content
        assert [(r["hostname"], r["pid"]) for r in answer.json()["replicas"]] == [(HOST, PID)]
