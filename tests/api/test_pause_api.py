"""Pause and resume over /api/v1, in process: the four routes' answers,
pops that answer 204 while paused, pushes and acks that go on, a waiting
long poll woken by the resume, scopes, grants, 404 and bad bodies.

Pops are async views whose claims run on the database threads
(``api/dbthreads.py``), which see only committed rows: the tests that pop
commit (``transaction=True``) and close those connections after each job.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client, override_settings

from queenadmin.domain import tokens
from queenadmin.domain.queues import wakeups
from queenadmin.models import AuditEntry

pytestmark = pytest.mark.django_db

API = "/api/v1"


@pytest.fixture(autouse=True)
def short_connections() -> Iterator[None]:
    """The pops' database threads close their connection after each job, so
    the test database can be dropped (PostgreSQL refuses while in use)."""
    from django.db import connections

    saved = connections.settings["default"].get("CONN_MAX_AGE", 0)
    connections.settings["default"]["CONN_MAX_AGE"] = 0
    yield
    connections.settings["default"]["CONN_MAX_AGE"] = saved


def client(scope: str = "admin", *, name: str | None = None, grants: tuple[str, ...] = ()) -> Client:
    token = tokens.token_create(by=tokens.HOST, name=name or f"pause-{scope}", scope=scope, grants=grants)
    return Client(HTTP_AUTHORIZATION=f"Bearer {token}")


def post(http: Client, path: str, body: Any = None) -> Any:
    data = "" if body is None else json.dumps(body)
    return http.post(API + path, data=data, content_type="application/json")


def push(http: Client, queue: str, *payloads: Any) -> None:
    items = [{"queue": queue, "partition": "p", "payload": p} for p in payloads]
    assert post(http, "/push", {"items": items}).status_code == 201


def pop(http: Client, queue: str, **params: str) -> Any:
    query = "&".join(f"{k}={v}" for k, v in {"wait": "false", "batch": "10", **params}.items())
    return http.get(f"{API}/pop/queue/{queue}?{query}")


def payloads(answer: Any) -> list[Any]:
    assert answer.status_code == 200, answer.content
    return [m["data"] for m in answer.json()["messages"]]


def detail(http: Client, queue: str) -> dict[str, Any]:
    answer = http.get(f"{API}/resources/queues/{queue}")
    assert answer.status_code == 200
    return answer.json()


@pytest.mark.django_db(transaction=True)
def test_a_paused_queue_pops_204_takes_pushes_and_acks_then_resumes():
    admin = client(name="ops-bot")
    push(admin, "pq", 1, 2)
    held = pop(admin, "pq", consumerGroup="g", batch="1").json()
    paused = post(admin, "/resources/queues/pq/pause", {"reason": "db migration"})
    assert paused.status_code == 200
    assert paused.json() == {
        "success": True,
        "queue": "pq",
        "consumerGroup": None,
        "paused": True,
        "changed": True,
        "queuePaused": True,
        "pausedGroups": [],
    }
    assert (detail(admin, "pq")["paused"], detail(admin, "pq")["pausedGroups"]) == (True, [])
    assert pop(admin, "pq").status_code == 204
    assert pop(admin, "pq", consumerGroup="g").status_code == 204
    push(admin, "pq", 3)
    extended = post(admin, f"/lease/{held['leaseId']}/extend", {"seconds": 30})
    assert extended.json()["success"] is True
    (message,) = held["messages"]
    ack = {"transactionId": message["transactionId"], "partitionId": held["partitionId"], "leaseId": held["leaseId"]}
    acked = post(admin, "/ack", {**ack, "status": "completed", "consumerGroup": "g"})
    assert acked.json()[0]["success"] is True
    again = post(admin, "/resources/queues/pq/pause")
    assert (again.json()["paused"], again.json()["changed"]) == (True, False)
    resumed = post(admin, "/resources/queues/pq/resume", None)
    assert (resumed.status_code, resumed.json()["paused"], resumed.json()["changed"]) == (200, False, True)
    assert detail(admin, "pq")["paused"] is False
    assert payloads(pop(admin, "pq", consumerGroup="g")) == [2, 3]
    assert payloads(pop(admin, "pq")) == [1, 2, 3]
    entries = list(AuditEntry.objects.order_by("id").values_list("action", "target", "actor", "reason", "via"))
    assert entries == [
        ("queue.pause", "pq", "ops-bot", "db migration", "api"),
        ("queue.resume", "pq", "ops-bot", "", "api"),
    ]


@pytest.mark.django_db(transaction=True)
def test_a_group_pause_holds_only_that_group():
    admin = client()
    push(admin, "gq", "a", "b")
    paused = post(admin, "/consumer-groups/slow/queues/gq/pause", {"reason": None})
    assert paused.json() == {
        "success": True,
        "queue": "gq",
        "consumerGroup": "slow",
        "paused": True,
        "changed": True,
        "queuePaused": False,
        "pausedGroups": ["slow"],
    }
    assert detail(admin, "gq")["pausedGroups"] == ["slow"]
    assert detail(admin, "gq")["paused"] is False
    assert pop(admin, "gq", consumerGroup="slow").status_code == 204
    assert payloads(pop(admin, "gq", consumerGroup="fast")) == ["a", "b"]
    assert payloads(pop(admin, "gq")) == ["a", "b"]
    resumed = post(admin, "/consumer-groups/slow/queues/gq/resume")
    assert (resumed.json()["paused"], resumed.json()["pausedGroups"]) == (False, [])
    assert not post(admin, "/consumer-groups/slow/queues/gq/resume").json()["changed"]
    assert payloads(pop(admin, "gq", consumerGroup="slow")) == ["a", "b"]


@pytest.mark.django_db(transaction=True)
@override_settings(QUEENADMIN_POP_RECHECK_SECONDS=60)
def test_a_waiting_long_poll_answers_when_the_queue_resumes():
    """A pop waiting on a paused queue gets the message as soon as the
    resume commits: its re-check is a minute away, so only the resume's
    wake-up can answer it within the ten seconds allowed."""
    admin = client()
    push(admin, "lq", "hello")
    post(admin, "/resources/queues/lq/pause")
    answers: list[Any] = []
    waiting = threading.Thread(
        target=lambda: answers.append(pop(admin, "lq", wait="true", timeout="30000")), daemon=True
    )
    waiting.start()
    deadline = time.monotonic() + 10
    while not wakeups.hub.lanes.get("lq"):
        assert time.monotonic() < deadline, "the pop never waited"
        time.sleep(0.01)
    assert post(admin, "/resources/queues/lq/resume").json()["changed"] is True
    waiting.join(timeout=10)
    assert not waiting.is_alive(), "the resume did not wake the waiting pop"
    assert payloads(answers[0]) == ["hello"]


def test_only_an_admin_token_pauses():
    """Read and write tokens get the scope's 403 and nothing changes; admin pauses."""
    admin = client()
    push(admin, "sq", 1)
    for scope in ("read", "write"):
        http = client(scope)
        for path in (
            "/resources/queues/sq/pause",
            "/resources/queues/sq/resume",
            "/consumer-groups/g/queues/sq/pause",
            "/consumer-groups/g/queues/sq/resume",
        ):
            answer = post(http, path)
            assert answer.status_code == 403, (scope, path)
            assert answer.json() == {
                "error": "forbidden",
                "code": "forbidden",
                "detail": f"this token's scope is {scope}; the call needs admin",
            }
    assert (detail(admin, "sq")["paused"], detail(admin, "sq")["pausedGroups"]) == (False, [])
    assert post(admin, "/consumer-groups/g/queues/sq/pause").status_code == 200
    assert not AuditEntry.objects.exclude(action="queue.group_pause").exists()


def test_a_grant_limited_admin_token_pauses_only_its_queues():
    admin = client()
    push(admin, "orders.in", 1)
    push(admin, "billing.in", 1)
    limited = client(name="orders-admin", grants=("queue:orders.*=admin",))
    for path in ("/resources/queues/billing.in/pause", "/consumer-groups/g/queues/billing.in/pause"):
        answer = post(limited, path)
        assert answer.status_code == 403
        assert answer.json()["code"] == "forbidden"
        assert "grant" in answer.json()["detail"]
    assert detail(admin, "billing.in")["paused"] is False
    assert detail(admin, "billing.in")["pausedGroups"] == []
    assert post(limited, "/resources/queues/orders.in/pause").json()["paused"] is True
    # A grant below admin on the queue does not do either.
    writer = client(name="orders-writer", grants=("queue:orders.*=write",))
    assert post(writer, "/resources/queues/orders.in/resume").status_code == 403


def test_an_unknown_queue_answers_404_and_a_bad_body_400():
    admin = client()
    for path in (
        "/resources/queues/nope/pause",
        "/resources/queues/nope/resume",
        "/consumer-groups/g/queues/nope/pause",
        "/consumer-groups/g/queues/nope/resume",
    ):
        answer = post(admin, path, {"reason": "x"})
        assert (answer.status_code, answer.json()) == (404, {"error": "Queue not found"}), path
    push(admin, "bq", 1)
    for body, error in (
        ([], "the body must be a JSON object"),
        ({"reason": 5}, "reason must be a string"),
        ({"reason": "a\x00b"}, "reason "),
    ):
        answer = post(admin, "/resources/queues/bq/pause", body)
        assert answer.status_code == 400, body
        assert answer.json()["code"] == "bad_request"
        assert answer.json()["error"].startswith(error), answer.json()
    bad = admin.post(f"{API}/resources/queues/bq/pause", data="{", content_type="application/json")
    assert bad.status_code == 400
    # A group is named by the rule of stored names, as a pop names it.
    long = post(admin, f"/consumer-groups/{'g' * 512}/queues/bq/pause")
    assert (long.status_code, long.json()["error"]) == (413, "consumerGroup is over 511 bytes")
    tab = post(admin, "/consumer-groups/a%09b/queues/bq/resume")
    assert (tab.status_code, tab.json()["code"]) == (400, "bad_request")
    assert tab.json()["error"].startswith("consumerGroup ")
    assert detail(admin, "bq")["paused"] is False
    assert not AuditEntry.objects.exists()
