"""Pause and resume from the dashboard: the queue's buttons and its
groups', the confirmation with its reason, the audit entry, and the paused
badge on the overview, the queues list and the queue page."""

from __future__ import annotations

import pytest

from queenadmin.domain.audit import Who
from queenadmin.domain.queues import operator as queue_operator
from queenadmin.models import AuditEntry
from tests.dashboard_ops.conftest import claim, push

pytestmark = pytest.mark.django_db

PAUSE = "/queues/q/pause/"


@pytest.fixture
def read_by_a():
    push("q", 2)
    claim("q", group="a", batch=1)


def test_a_viewer_sees_the_badge_but_no_button_and_gets_403(viewer, read_by_a):
    queue_operator.queue_pause(queue="q", who=Who("ann"))
    page = viewer.get("/queues/q/").content.decode()
    assert "data-paused" in page
    assert "Resume the queue" not in page
    assert "Pause…" not in page
    assert viewer.get(f"{PAUSE}?do=resume").status_code == 403
    assert viewer.post(PAUSE, {"do": "resume"}).status_code == 403
    assert queue_operator.queue_pause_state(name="q").paused  # type: ignore[union-attr]


def test_an_operator_pauses_the_queue_with_a_reason_and_resumes_it(operator, read_by_a):
    page = operator.get("/queues/q/").content.decode()
    assert "Pause the queue…" in page
    assert "data-paused" not in page
    confirm = operator.get(f"{PAUSE}?do=pause", headers={"HX-Request": "true"}).content.decode()
    assert "<html" not in confirm
    assert 'id="dialog-title"' in confirm
    assert "Pushes are still taken" in confirm
    done = operator.post(PAUSE, {"do": "pause", "reason": "orders-db migration"})
    assert done.status_code == 303
    assert done["Location"] == "/queues/q/#queue-summary"
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.target, entry.reason, entry.via) == (
        "queue.pause",
        "q",
        "orders-db migration",
        "dashboard",
    )
    assert entry.actor.startswith("operator")
    page = operator.get("/queues/q/").content.decode()
    assert "data-paused" in page
    assert "Resume the queue…" in page
    assert "data-paused" in operator.get("/queues/").content.decode()
    assert "data-paused" in operator.get("/").content.decode()
    answer = operator.post(
        PAUSE,
        {"do": "resume", "reason": "done"},
        headers={"HX-Request": "true", "HX-Current-URL": "http://testserver/queues/q/"},
    )
    body = answer.content.decode()
    assert answer.status_code == 200
    assert "Resumed" in body
    assert 'id="queue-summary" hx-swap-oob="true"' in body
    assert "Pause the queue…" in body
    assert not queue_operator.queue_pause_state(name="q").paused  # type: ignore[union-attr]
    assert AuditEntry.objects.count() == 2


def test_an_operator_pauses_one_group_and_one_before_its_first_pop(operator, read_by_a):
    assert operator.post(PAUSE, {"do": "pause", "group": "a"}).status_code == 303
    assert operator.post(PAUSE, {"do": "pause", "group": "later"}).status_code == 303
    state = queue_operator.queue_pause_state(name="q")
    assert state == queue_operator.PauseState("q", False, ("a", "later"))
    page = operator.get("/queues/q/").content.decode()
    assert page.count("data-paused>paused</span>") == 1  # group a's row
    assert "data-paused-ahead" in page
    assert "Resume…" in page
    assert "1 group paused" not in page
    assert "2 groups paused" in operator.get("/queues/").content.decode()
    again = operator.post(
        PAUSE,
        {"do": "pause", "group": "a"},
        headers={"HX-Request": "true", "HX-Current-URL": "http://testserver/queues/q/"},
    )
    assert "already paused: nothing changed" in again.content.decode()
    assert [e.target for e in AuditEntry.objects.order_by("id")] == ["q/a", "q/later"]
    assert operator.post(PAUSE, {"do": "resume", "group": "a"}).status_code == 303
    assert queue_operator.queue_pause_state(name="q").paused_groups == ("later",)  # type: ignore[union-attr]


def test_an_unknown_queue_is_404(operator):
    assert operator.get("/queues/nope/pause/?do=pause").status_code == 404
    assert operator.post("/queues/nope/pause/", {"do": "pause"}).status_code == 404
    assert not AuditEntry.objects.exists()
