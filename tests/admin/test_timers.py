"""Timers in the admin: list, filter, search; cancel, fire now, move and
edit through the domain (audit via admin, timers events); races; permissions."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from queenadmin.domain import clock, timers
from queenadmin.models import AuditEntry, Message, Timer
from tests.admin.conftest import action, groups_of
from tests.dashboard_ops.conftest import configure

pytestmark = pytest.mark.django_db

LIST = "/admin/queenadmin/timer/"


@pytest.fixture
def scheduled() -> list[Timer]:
    configure("mail")
    configure("sms")
    timers.timer_schedule(queue="mail", timer_key="welcome", payload={"to": "a"}, delay=timedelta(minutes=10))
    timers.timer_schedule(queue="mail", timer_key="reminder", payload={"to": "b"}, delay=timedelta(minutes=20))
    timers.timer_schedule(queue="sms", timer_key="code", payload={"n": 1}, delay=timedelta(minutes=5))
    return list(Timer.objects.order_by("deliver_at"))


def test_list_filter_and_search(operator, scheduled):
    page = operator.get(LIST).content.decode()
    assert page.index("code") < page.index("welcome") < page.index("reminder"), "by due time"
    by_queue = operator.get(LIST, {"queue": "sms"}).content.decode()
    assert "code" in by_queue
    assert "welcome" not in by_queue
    found = operator.get(LIST, {"q": "remi"}).content.decode()
    assert "reminder" in found
    assert "welcome" not in found


def test_cancel_action(operator, scheduled, published, committing):
    mail = [t.pk for t in scheduled if t.queue == "mail"]
    with committing():
        done = operator.post(LIST, action("cancel_timers", mail, reason="campaign stopped"), follow=True)
    assert "Cancelled 2 rows." in done.content.decode()
    assert not Timer.objects.filter(queue="mail").exists()
    entries = AuditEntry.objects.filter(action="timer.cancel")
    assert {(e.via, e.reason, e.actor) for e in entries} == {("admin", "campaign stopped", "otto")}
    assert {"timers", "audit"} <= groups_of(published)


def test_fire_now_appends_the_message(operator, scheduled):
    code = next(t for t in scheduled if t.timer_key == "code")
    done = operator.post(LIST, action("fire_now", [code.pk], reason="test"), follow=True)
    assert "Fired 1 row." in done.content.decode()
    assert Message.objects.filter(partition__queue__name="sms", transaction_id=code.txn).exists()
    assert AuditEntry.objects.get(action="timer.fire").via == "admin"


def test_move_by_a_delta_asks_for_seconds(operator, scheduled):
    welcome = next(t for t in scheduled if t.timer_key == "welcome")
    page = operator.post(LIST, {"action": "move_by", "_selected_action": [welcome.pk]})
    assert "Move by (seconds)" in page.content.decode()
    operator.post(LIST, action("move_by", [welcome.pk], reason="later", seconds="3600"))
    moved = Timer.objects.get(pk=welcome.pk)
    assert moved.deliver_at == welcome.deliver_at + timedelta(hours=1)
    assert AuditEntry.objects.get(action="timer.move").reason == "later"


def test_a_move_the_domain_refuses_is_reported(operator, scheduled):
    """Past the horizon: the domain's refusal is told, nothing moves."""
    code = next(t for t in scheduled if t.timer_key == "code")
    page = operator.post(LIST, action("move_by", [code.pk], reason="x", seconds=str(10**9)), follow=True)
    assert "Moved 0 rows. Unchanged: 1 delayMs is past the" in page.content.decode()
    assert Timer.objects.get(pk=code.pk).deliver_at == code.deliver_at
    assert not AuditEntry.objects.exists()


def _edit(timer: Timer, **extra: str) -> dict[str, str]:
    due = timer.deliver_at.astimezone(clock.now().tzinfo)
    return {
        "due": due.strftime("%Y-%m-%d %H:%M:%S"),
        "payload_text": timer.payload_json,
        "seen_message_id": timer.message_id,
        "reason": "customer asked",
        "_save": "Save",
        **extra,
    }


def test_edit_is_a_reschedule(operator, scheduled, published, committing):
    welcome = next(t for t in scheduled if t.timer_key == "welcome")
    later = (welcome.deliver_at + timedelta(hours=3)).replace(microsecond=0)
    form = _edit(welcome, payload_text=json.dumps({"to": "new"}), due=later.strftime("%Y-%m-%d %H:%M:%S"))
    with committing():
        response = operator.post(f"{LIST}{welcome.pk}/change/", form)
    assert response.status_code == 302
    row = timers.timer_peek(queue="mail", timer_key="welcome")
    assert row is not None
    assert row.deliver_at == later
    assert row.message_id != welcome.message_id
    assert row.txn == welcome.txn
    assert json.loads(Timer.objects.get(queue="mail", timer_key="welcome").payload_json) == {"to": "new"}
    entry = AuditEntry.objects.get(action="timer.reschedule")
    assert (entry.via, entry.reason) == ("admin", "customer asked")
    assert "timers" in groups_of(published)


def test_edit_of_a_timer_that_changed_since_writes_nothing(operator, scheduled):
    welcome = next(t for t in scheduled if t.timer_key == "welcome")
    form = _edit(welcome)
    timers.timer_schedule(queue="mail", timer_key="welcome", payload={"to": "z"}, delay=timedelta(hours=2))
    page = operator.post(f"{LIST}{welcome.pk}/change/", form, follow=True).content.decode()
    assert "rescheduled since" in page
    assert not AuditEntry.objects.exists()


def test_delete_cancels(operator, scheduled):
    code = next(t for t in scheduled if t.timer_key == "code")
    assert operator.post(f"{LIST}{code.pk}/delete/", {"post": "yes", "reason": "dup"}).status_code == 302
    assert not Timer.objects.filter(pk=code.pk).exists()
    assert AuditEntry.objects.get(action="timer.cancel").reason == "dup"


def test_viewer_may_not_change(viewer, scheduled):
    code = next(t for t in scheduled if t.timer_key == "code")
    assert viewer.get(LIST).status_code == 200
    assert viewer.post(f"{LIST}{code.pk}/change/", _edit(code)).status_code == 403
    assert viewer.post(f"{LIST}{code.pk}/delete/", {"post": "yes", "reason": "x"}).status_code == 403
    for name in ("cancel_timers", "fire_now", "move_by"):
        assert viewer.post(LIST, action(name, [code.pk], reason="x", seconds="60")).status_code == 403
    assert Timer.objects.filter(pk=code.pk).exists()
    assert not AuditEntry.objects.exists()


def test_delete_aims_at_the_timer_the_page_showed(operator, scheduled):
    code = next(t for t in scheduled if t.timer_key == "code")
    page = operator.get(f"{LIST}{code.pk}/delete/").content.decode()
    assert f'name="seen_message_id" value="{code.message_id}"' in page
    timers.timer_schedule(queue="sms", timer_key="code", payload={"n": 2}, delay=timedelta(hours=1))
    form = {"post": "yes", "reason": "dup", "seen_message_id": code.message_id}
    done = operator.post(f"{LIST}{code.pk}/delete/", form, follow=True)
    assert "Not cancelled: the timer rescheduled since." in done.content.decode()
    assert "deleted successfully" not in done.content.decode()
    assert Timer.objects.filter(queue="sms", timer_key="code").exists()
    assert not AuditEntry.objects.exists()
