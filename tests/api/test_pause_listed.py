"""The pause shows wherever a queue is listed over /api/v1: the queue list,
``/status``, ``/status/queues`` and ``/status/queues/{name}``, read with
the same statements as before. (The list's ``stats=lanes`` form stays
Queen's light shape: names and partition counts only.)"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from queenadmin.domain import tokens

pytestmark = pytest.mark.django_db

API = "/api/v1"


@pytest.fixture
def admin() -> Client:
    token = tokens.token_create(by=tokens.HOST, name="pause-listed", scope="admin")
    return Client(HTTP_AUTHORIZATION=f"Bearer {token}")


def post(http: Client, path: str, body: Any = None) -> Any:
    answer = http.post(API + path, data=json.dumps(body or {}), content_type="application/json")
    assert answer.status_code in (200, 201), answer.content
    return answer.json()


def get(http: Client, path: str) -> Any:
    answer = http.get(API + path)
    assert answer.status_code == 200, answer.content
    return answer.json()


@pytest.fixture
def two_queues(admin):
    """``held`` and ``free``, a message each."""
    for name in ("held", "free"):
        post(admin, "/push", {"items": [{"queue": name, "partition": "p", "payload": {"q": name}}]})


def pauses(http: Client) -> dict[str, dict[str, tuple[bool, list[str]]]]:
    """Each answer's (paused, pausedGroups) by queue name."""

    def of(items: list[dict[str, Any]], key: str = "name") -> dict[str, tuple[bool, list[str]]]:
        return {i[key]: (i["paused"], i["pausedGroups"]) for i in items}

    detail = {n: get(http, f"/status/queues/{n}")["queue"] for n in ("held", "free")}
    return {
        "list": of(get(http, "/resources/queues")["queues"]),
        "status": of(get(http, "/status")["queues"]),
        "status/queues": of(get(http, "/status/queues")["queues"]),
        "status/queues/{name}": of(list(detail.values())),
    }


def test_a_paused_queue_and_group_are_listed_until_resumed(admin, two_queues):
    """Pause ``held`` and the group ``billing`` on ``free``: every listing says
    so; resume both: none does."""
    calm = {"held": (False, []), "free": (False, [])}
    assert pauses(admin) == dict.fromkeys(pauses(admin), calm)
    post(admin, "/resources/queues/held/pause", {"reason": "migration"})
    post(admin, "/consumer-groups/billing/queues/free/pause")
    paused = {"held": (True, []), "free": (False, ["billing"])}
    assert pauses(admin) == dict.fromkeys(pauses(admin), paused)
    post(admin, "/resources/queues/held/resume")
    post(admin, "/consumer-groups/billing/queues/free/resume")
    assert pauses(admin) == dict.fromkeys(pauses(admin), calm)


@pytest.mark.parametrize("path", ["/resources/queues", "/status", "/status/queues"])
def test_the_pause_costs_no_statement(admin, two_queues, path):
    """Listing paused queues takes the statements listing them unpaused takes."""
    with CaptureQueriesContext(connection) as before:
        get(admin, path)
    post(admin, "/resources/queues/held/pause")
    post(admin, "/resources/queues/free/pause")
    post(admin, "/consumer-groups/billing/queues/free/pause")
    with CaptureQueriesContext(connection) as after:
        get(admin, path)
    assert len(after.captured_queries) == len(before.captured_queries)
