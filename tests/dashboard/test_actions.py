"""The dashboard's actions: permission, CSRF, confirmation, the domain path,
the audit entry in the same transaction, and races told plainly."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from queenadmin.domain import clock, kv, locks, timers
from queenadmin.domain.locks.operator import lease_mark
from queenadmin.domain.masking import mask_token
from queenadmin.errors import PreconditionFailed
from queenadmin.models import AuditEntry, Message, Timer
from tests.dashboard.conftest import csrf_token_of

pytestmark = pytest.mark.django_db


def _release_query(name: str, slot: int = 0) -> dict[str, str]:
    state = locks.lock_holders(name=name)
    holder = next(h for h in state.holders if h.slot == slot)
    assert holder.since is not None
    return {"name": name, "slot": str(slot), "lease": lease_mark(owner=holder.owner, since=holder.since)}


def _timer_query(queue: str, key: str) -> dict[str, str]:
    row = timers.timer_peek(queue=queue, timer_key=key)
    assert row is not None
    return {"queue": queue, "key": key, "message_id": row.message_id, "txn": row.txn, "partition": row.partition}


ACTIONS = [
    ("/locks/release/", "lock"),
    ("/timers/cancel/", "timer"),
    ("/timers/move/", "timer"),
    ("/timers/fire/", "timer"),
    ("/kv/config/edit/", "kv"),
    ("/kv/config/delete/", "kv"),
    ("/audit/{entry}/revert/", "audit"),
]


@pytest.fixture
def targets(operator):
    """One object for every action, and the form that acts on it."""
    locks.lock_acquire(name="jobs.sync", ttl=60, owner="w")
    timers.timer_schedule(queue="mail", timer_key="t1", payload={"a": 1}, delay=timedelta(minutes=10))
    put = kv.kv_put(namespace="config", key="flag", value=1, ttl=None)
    from queenadmin.domain.audit import Who
    from queenadmin.domain.kv.operator import kv_operator_edit

    kv_operator_edit(namespace="config", key="flag", value=2, expect=put.version, who=Who("otto"))
    entry = AuditEntry.objects.get(action="kv.edit")
    return {
        "lock": _release_query("jobs.sync"),
        "timer": _timer_query("mail", "t1") | {"when": "+5m"},
        "kv": {"key": "flag", "expect": str(kv.kv_get(namespace="config", key="flag").version), "value": "3"},
        "audit": {},
        "entry": entry.pk,
    }


@pytest.mark.parametrize(("path", "kind"), ACTIONS)
@pytest.mark.parametrize("who", ["anonymous", "outsider", "viewer"])
def test_actions_are_refused_without_the_change_permission(client_for, targets, request, path, kind, who):
    user = None if who == "anonymous" else request.getfixturevalue(who)
    client = client_for(user)
    url = path.format(entry=targets["entry"])
    before = AuditEntry.objects.count()
    assert client.get(url, targets[kind]).status_code == 403
    assert client.post(url, targets[kind]).status_code == 403
    assert client.post(url, targets[kind], HTTP_HX_REQUEST="true").status_code == 403
    assert AuditEntry.objects.count() == before
    assert locks.lock_holders(name="jobs.sync").held
    assert timers.timer_peek(queue="mail", timer_key="t1") is not None


@pytest.mark.parametrize(("path", "kind"), ACTIONS)
def test_every_action_asks_first_and_needs_the_csrf_token(client_for, operator, targets, path, kind):
    client = client_for(operator, csrf=True)
    url = path.format(entry=targets["entry"])
    confirm = client.get(url, targets[kind])
    assert confirm.status_code == 200
    html = confirm.content.decode()
    assert 'name="reason"' in html
    before = AuditEntry.objects.count()
    assert client.post(url, targets[kind]).status_code == 403
    assert AuditEntry.objects.count() == before
    done = client.post(url, targets[kind] | {"csrfmiddlewaretoken": csrf_token_of(html), "reason": "tested"})
    assert done.status_code == 302
    assert AuditEntry.objects.count() == before + 1
    assert AuditEntry.objects.order_by("-id").first().reason == "tested"


def test_an_htmx_action_answers_its_outcome_and_fresh_regions(client_for, operator, targets):
    response = client_for(operator).post(
        "/timers/cancel/",
        targets["timer"],
        HTTP_HX_REQUEST="true",
        HTTP_HX_CURRENT_URL="http://testserver/timers/?queue=mail",
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert 'id="action-outcome"' in html
    assert "Cancelled" in html
    assert '<div id="timers-pending" data-hold-while-used hx-swap-oob="true">' in html
    assert "mail/t1" not in html.split('id="timers-pending"')[1]


def test_a_confirmation_asked_by_htmx_is_the_bare_form(client_for, operator, targets):
    response = client_for(operator).get("/locks/release/", targets["lock"], HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert html.lstrip().startswith('<form class="confirm"')
    assert "fencing token dies" in html


# ---------------------------------------------------------------- locks


def test_force_release_kills_the_token_and_is_audited_masked(client_for, operator, pages, distinct_tokens):
    owner = "settle-worker:pid-777"
    got = locks.lock_acquire(name="payments.settle", ttl=60, owner=owner)
    response = client_for(operator).post(
        "/locks/release/", _release_query("payments.settle") | {"reason": "host died"}, HTTP_HX_REQUEST="true"
    )
    assert "Released" in response.content.decode()
    assert not locks.lock_holders(name="payments.settle").held
    assert locks.lock_renew(name="payments.settle", token=got.token, ttl=timedelta(seconds=30)).renewed is False
    with pytest.raises(PreconditionFailed):
        kv.kv_call([locks.guard_check(name="payments.settle", slot=0, token=got.token)])
    entry = AuditEntry.objects.get(action="lock.release")
    assert (entry.actor, entry.kind, entry.target, entry.reason) == ("otto", "lock", "payments.settle#0", "host died")
    assert mask_token(owner) in entry.before
    assert owner not in entry.before
    assert str(got.token) not in entry.before
    pages.assert_free_of(owner, str(got.token))


def test_force_release_of_a_lease_that_changed_hands_does_nothing(client_for, operator):
    got = locks.lock_acquire(name="swap", ttl=60, owner="first")
    form = _release_query("swap")
    locks.lock_release(name="swap", token=got.token)
    locks.lock_acquire(name="swap", ttl=60, owner="second")
    html = client_for(operator).post("/locks/release/", form, HTTP_HX_REQUEST="true").content.decode()
    assert "Another lease holds it now" in html
    assert locks.lock_holders(name="swap").holders[0].owner == "second"
    assert not AuditEntry.objects.exists()


def test_force_release_survives_the_holders_renew(client_for, operator):
    """The form names the lease, not the token: a renew in between is fine."""
    got = locks.lock_acquire(name="busy", ttl=60, owner="w")
    form = _release_query("busy")
    assert locks.lock_renew(name="busy", token=got.token, ttl=timedelta(seconds=60)).renewed
    html = client_for(operator).post("/locks/release/", form, HTTP_HX_REQUEST="true").content.decode()
    assert "Released" in html
    assert not locks.lock_holders(name="busy").held


def test_force_release_of_an_expired_lease_says_it_is_gone(client_for, operator, time_machine):
    locks.lock_acquire(name="brief", ttl=5, owner="w")
    form = _release_query("brief")
    time_machine.move_to(clock.now() + timedelta(seconds=10))
    html = client_for(operator).post("/locks/release/", form, HTTP_HX_REQUEST="true").content.decode()
    assert "Nothing to release" in html
    assert not AuditEntry.objects.exists()


# ---------------------------------------------------------------- timers


def test_cancel_deletes_the_timer_and_audits_it(client_for, operator, targets):
    client_for(operator).post("/timers/cancel/", targets["timer"] | {"reason": "duplicate"})
    assert timers.timer_peek(queue="mail", timer_key="t1") is None
    entry = AuditEntry.objects.get(action="timer.cancel")
    assert (entry.target, entry.after, entry.reason) == ("mail/t1", "cancelled", "duplicate")


def test_a_cancel_that_lost_the_race_says_when_it_fired(client_for, operator, targets):
    fired = timers.timer_fire_now(queue="mail", timer_key="t1")
    html = client_for(operator).post("/timers/cancel/", targets["timer"], HTTP_HX_REQUEST="true").content.decode()
    assert "Too late: it fired" in html
    assert fired.deliver_at is not None
    assert fired.deliver_at.strftime("%Y-%m-%d %H:%M:%S UTC") in html
    assert Message.objects.filter(message_id=targets["timer"]["message_id"]).count() == 1
    assert not AuditEntry.objects.filter(action="timer.cancel").exists()


def test_a_move_that_lost_the_race_says_when_it_fired(client_for, operator, targets):
    timers.timer_fire_now(queue="mail", timer_key="t1")
    response = client_for(operator).post("/timers/move/", targets["timer"] | {"when": "+1h"})
    assert response.status_code == 302
    follow = client_for(operator).get("/timers/")
    assert follow.status_code == 200
    assert not Timer.objects.exists()


def test_move_by_a_delta_and_to_an_absolute_utc_time(client_for, operator, targets):
    client = client_for(operator)
    before = timers.timer_peek(queue="mail", timer_key="t1").deliver_at
    client.post("/timers/move/", targets["timer"] | {"when": "+15m"})
    assert timers.timer_peek(queue="mail", timer_key="t1").deliver_at == before + timedelta(minutes=15)
    client.post("/timers/move/", targets["timer"] | {"when": "-1h"})
    assert timers.timer_peek(queue="mail", timer_key="t1").deliver_at == before - timedelta(minutes=45)
    target = (clock.now() + timedelta(days=1)).replace(microsecond=0, second=0, tzinfo=None)
    client.post("/timers/move/", targets["timer"] | {"when": target.strftime("%Y-%m-%d %H:%M")})
    moved = timers.timer_peek(queue="mail", timer_key="t1").deliver_at
    assert moved.replace(tzinfo=None) == target
    assert AuditEntry.objects.filter(action="timer.move").count() == 3


@pytest.mark.parametrize(
    ("when", "says"),
    [("", "Give a time"), ("soon", "neither a shift"), ("+200d", "horizon"), ("+5x", "neither a shift")],
)
def test_a_move_to_an_unreadable_time_answers_422_with_the_form(client_for, operator, targets, when, says):
    response = client_for(operator).post("/timers/move/", targets["timer"] | {"when": when}, HTTP_HX_REQUEST="true")
    assert response.status_code == 422
    assert says in response.content.decode()
    assert 'name="when"' in response.content.decode()
    assert not AuditEntry.objects.filter(action="timer.move").exists()


def test_fire_now_appends_the_message_once(client_for, operator, targets):
    client_for(operator).post("/timers/fire/", targets["timer"])
    assert timers.timer_peek(queue="mail", timer_key="t1") is None
    message = Message.objects.get(message_id=targets["timer"]["message_id"])
    assert json.loads(message.payload) == {"a": 1}
    assert AuditEntry.objects.filter(action="timer.fire").count() == 1


def test_a_timer_rescheduled_since_it_was_shown_is_left_alone(client_for, operator, targets):
    timers.timer_schedule(queue="mail", timer_key="t1", payload={"a": 2}, delay=timedelta(hours=3))
    html = client_for(operator).post("/timers/cancel/", targets["timer"], HTTP_HX_REQUEST="true").content.decode()
    assert "It changed since you looked" in html
    assert timers.timer_peek(queue="mail", timer_key="t1") is not None


# ---------------------------------------------------------------- KV


def test_an_edit_is_a_compare_and_set_and_is_audited(client_for, operator):
    put = kv.kv_put(namespace="config", key="limits", value={"rps": 100}, ttl=300)
    response = client_for(operator).post(
        "/kv/config/edit/", {"key": "limits", "expect": put.version, "value": '{"rps": 200}', "reason": "peak"}
    )
    assert response.status_code == 302
    row = kv.kv_get(namespace="config", key="limits")
    assert row.value == {"rps": 200}
    assert row.version > put.version
    assert row.expires_at is not None, "keep: the expiry stays"
    entry = AuditEntry.objects.get(action="kv.edit")
    assert json.loads(entry.before)["value"] == {"rps": 100}
    assert json.loads(entry.after) == {
        "version": row.version,
        "value": {"rps": 200},
        "expires_at": json.loads(entry.after)["expires_at"],
    }


def test_an_edit_that_lost_the_race_shows_the_current_value_and_writes_nothing(client_for, operator):
    put = kv.kv_put(namespace="config", key="limits", value={"rps": 100}, ttl=None)
    newer = kv.kv_put(namespace="config", key="limits", value={"rps": 150}, ttl=None)
    response = client_for(operator).post(
        "/kv/config/edit/",
        {"key": "limits", "expect": put.version, "value": '{"rps": 200}'},
        HTTP_HX_REQUEST="true",
    )
    html = response.content.decode()
    assert "the key moved" in html
    assert f"data-current-version>{newer.version}<" in html
    assert "&quot;rps&quot;: 150" in html
    assert f"Save mine over version {newer.version}" in html
    assert kv.kv_get(namespace="config", key="limits").value == {"rps": 150}
    assert not AuditEntry.objects.exists()


@pytest.mark.parametrize(
    ("value", "expiry", "says"),
    [("{not json", "keep", "not JSON"), ("1", "soon", "Expiry is keep"), ("1", "-5", "must be positive")],
)
def test_a_bad_edit_answers_422(client_for, operator, value, expiry, says):
    put = kv.kv_put(namespace="config", key="k", value=0, ttl=None)
    response = client_for(operator).post(
        "/kv/config/edit/", {"key": "k", "expect": put.version, "value": value, "expiry": expiry}
    )
    assert response.status_code == 422
    assert says in response.content.decode()


def test_lock_permits_cannot_be_edited_or_deleted_as_kv(client_for, operator):
    got = locks.lock_acquire(name="held", ttl=60, owner="w")
    client = client_for(operator)
    form = {"key": "held#0", "expect": got.token, "value": '{"owner": "me"}'}
    assert client.post(f"/kv/{kv.LOCKS_NAMESPACE}/edit/", form).status_code == 422
    assert client.post(f"/kv/{kv.LOCKS_NAMESPACE}/delete/", form).status_code == 422
    assert locks.lock_holders(name="held").holders[0].owner == "w"


def test_a_delete_is_a_compare_and_set(client_for, operator):
    seen = kv.kv_put(namespace="config", key="gone", value=1, ttl=None)
    put = kv.kv_put(namespace="config", key="gone", value=2, ttl=None)
    client = client_for(operator)
    stale = client.post("/kv/config/delete/", {"key": "gone", "expect": seen.version}, HTTP_HX_REQUEST="true")
    assert "the key moved" in stale.content.decode()
    assert kv.kv_get(namespace="config", key="gone") is not None
    client.post("/kv/config/delete/", {"key": "gone", "expect": put.version})
    assert kv.kv_get(namespace="config", key="gone") is None
    assert AuditEntry.objects.filter(action="kv.delete").count() == 1


def test_an_edit_and_its_audit_entry_commit_together(client_for, operator, monkeypatch):
    """If the audit entry cannot be written, the edit does not happen."""
    from queenadmin.domain.audit import Who

    put = kv.kv_put(namespace="config", key="atomic", value=1, ttl=None)

    def broken_audit(who, **kwargs):
        raise RuntimeError("the audit table is unwritable")

    monkeypatch.setattr(Who, "record_in_txn", broken_audit)
    with pytest.raises(RuntimeError):
        client_for(operator).post("/kv/config/edit/", {"key": "atomic", "expect": put.version, "value": "2"})
    assert kv.kv_get(namespace="config", key="atomic").value == 1


# ---------------------------------------------------------------- revert


def _edit(client, key: str, value: str) -> AuditEntry:
    row = kv.kv_get(namespace="config", key=key)
    client.post("/kv/config/edit/", {"key": key, "expect": row.version, "value": value})
    return AuditEntry.objects.filter(action="kv.edit", target=f"config/{key}").latest("id")


def test_a_revert_puts_the_old_value_back_as_a_compare_and_set(client_for, operator):
    kv.kv_put(namespace="config", key="mode", value="safe", ttl=None)
    client = client_for(operator)
    entry = _edit(client, "mode", '"fast"')
    html = client.post(f"/audit/{entry.pk}/revert/", {"reason": "too fast"}, HTTP_HX_REQUEST="true").content.decode()
    assert "Reverted" in html
    assert kv.kv_get(namespace="config", key="mode").value == "safe"
    revert = AuditEntry.objects.get(action="kv.revert")
    assert revert.reason == "too fast"


def test_a_revert_after_a_newer_write_changes_nothing(client_for, operator):
    kv.kv_put(namespace="config", key="mode", value="safe", ttl=None)
    client = client_for(operator)
    entry = _edit(client, "mode", '"fast"')
    newer = kv.kv_put(namespace="config", key="mode", value="faster", ttl=None)
    html = client.post(f"/audit/{entry.pk}/revert/", HTTP_HX_REQUEST="true").content.decode()
    assert "a newer write wins" in html
    assert str(newer.version) in html
    assert kv.kv_get(namespace="config", key="mode").value == "faster"
    assert not AuditEntry.objects.filter(action="kv.revert").exists()


def test_a_revert_of_a_delete_recreates_the_key_only_while_absent(client_for, operator):
    put = kv.kv_put(namespace="config", key="gone", value={"x": 1}, ttl=None)
    client = client_for(operator)
    client.post("/kv/config/delete/", {"key": "gone", "expect": put.version})
    entry = AuditEntry.objects.get(action="kv.delete")
    client.post(f"/audit/{entry.pk}/revert/")
    assert kv.kv_get(namespace="config", key="gone").value == {"x": 1}
    again = client.post(f"/audit/{entry.pk}/revert/", HTTP_HX_REQUEST="true").content.decode()
    assert "a newer write wins" in again


def test_entries_that_are_not_kv_edits_cannot_be_reverted(client_for, operator, targets):
    client = client_for(operator)
    client.post("/timers/cancel/", targets["timer"])
    entry = AuditEntry.objects.get(action="timer.cancel")
    assert client.get(f"/audit/{entry.pk}/revert/").status_code == 404
    assert client.post(f"/audit/{entry.pk}/revert/").status_code == 404
    assert client.post("/audit/999999/revert/").status_code == 404
    page = client.get("/audit/").content.decode()
    assert f"/audit/{entry.pk}/revert/" not in page
    assert f"/audit/{targets['entry']}/revert/" in page


def test_an_edit_from_the_keys_own_page_refreshes_that_page(client_for, operator):
    put = kv.kv_put(namespace="config", key="solo", value=1, ttl=None)
    response = client_for(operator).post(
        "/kv/config/edit/",
        {"key": "solo", "expect": put.version, "value": "2"},
        HTTP_HX_REQUEST="true",
        HTTP_HX_CURRENT_URL="http://testserver/kv/config/key/solo",
    )
    html = response.content.decode()
    assert '<div id="kv-key" hx-swap-oob="true">' in html
    assert 'id="kv-keys"' not in html
