"""A queue's settings on its page, edited and created from the dashboard,
and a message pushed from it: the table derived from the options'
declaration, the forms' refusals in the API's words (422, beside the
field), who may (403 for a viewer), and the audit entry of each."""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

import pytest
from django.test import Client
from django.utils.html import escape

from queenadmin.domain import queues, tokens
from queenadmin.domain.queues.options import BOOL_OPTIONS, INT_OPTIONS, OPTIONS
from queenadmin.models import AuditEntry, Message, Queue
from tests.dashboard_ops.conftest import configure, push

pytestmark = pytest.mark.django_db

_TOKENS = itertools.count()

SETTINGS = "/queues/q/settings/"
CREATE = "/queues/~new/"
PUSH = "/queues/q/push/"
HTMX = {"HX-Request": "true", "HX-Current-URL": "http://testserver/queues/q/"}


def api_error(body: dict[str, Any], path: str = "/configure") -> str:
    """What the API answers ``body`` with: its ``error`` text (a 4xx)."""
    token = tokens.token_create(by=tokens.HOST, name=f"api-{next(_TOKENS)}", scope="admin")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    answer = client.post(f"/api/v1{path}", data=json.dumps(body), content_type="application/json")
    assert 400 <= answer.status_code < 500, answer.content
    return str(answer.json()["error"])


def options_of(name: str = "q") -> dict[str, Any]:
    return dict(Queue.objects.get(name=name).options)


def form_of(page: str) -> dict[str, str]:
    """The values a form's text inputs and selected options hold."""
    found = dict(re.findall(r'<input type="text" id="[^"]*" name="(option-[^"]+)" value="([^"]*)"', page))
    for name, body in re.findall(r'<select id="[^"]*" name="(option-[^"]+)"[^>]*>(.*?)</select>', page, re.S):
        chosen = re.search(r'<option value="([^"]*)" selected>', body)
        found[name] = chosen.group(1) if chosen else ""
    return found


def blank_form(**given: str) -> dict[str, str]:
    """A settings form with every option blank but ``given`` (option name -> text)."""
    return {f"option-{o.name}": given.get(o.name, "") for o in OPTIONS}


@pytest.fixture
def q():
    return configure("q", leaseTime=30, retryLimit=7, deadLetterQueue=False)


# -- the table -------------------------------------------------------------------


def test_the_settings_table_shows_every_declared_option_with_its_value_and_default(viewer, q):
    page = viewer.get("/queues/q/").content.decode()
    rows = re.findall(r'<tr data-option="([^"]+)"( data-differs)?>(.*?)</tr>', page, re.S)
    # Every option of the declaration, in its order, and nothing else.
    assert [name for name, _, _ in rows] == [o.name for o in OPTIONS]
    assert {name for name, _, _ in rows} == set(INT_OPTIONS) | set(BOOL_OPTIONS)
    differs = {name for name, mark, _ in rows if mark}
    assert differs == {"leaseTime", "retryLimit", "deadLetterQueue"}
    # Each cell holds one <span> (a card's grid on a phone): its content.
    cells = {name: re.findall(r"<td[^>]*>(?:<span>)?(.*?)(?:</span>)?</td>", body, re.S) for name, _, body in rows}
    assert "<b>30</b> s" in cells["leaseTime"][1]
    assert "changed" in cells["leaseTime"][1]
    assert cells["leaseTime"][2] == "300 s"
    assert "<b>false</b>" in cells["deadLetterQueue"][1]
    assert cells["deadLetterQueue"][2] == "true"
    assert cells["ttl"][1] == "3600 s"
    assert cells["ttl"][2] == "3600 s"
    assert "stored and answered back only" in cells["ttl"][3]
    assert "3 of 20 options differ" in page
    # A viewer sees the settings, and no way to change them or push.
    assert "Edit settings…" not in page
    assert "Push a message…" not in page
    assert "Create a queue…" not in viewer.get("/queues/").content.decode()


def test_an_option_stored_before_it_was_declared_shows_its_default(viewer):
    configure("q")
    stored = options_of()
    del stored["retentionSinkHold"]
    Queue.objects.filter(name="q").update(options=stored)
    page = viewer.get("/queues/q/").content.decode()
    assert '<tr data-option="retentionSinkHold">' in page


def test_an_operator_gets_the_buttons_and_a_form_filled_with_the_values(operator, q):
    page = operator.get("/queues/q/").content.decode()
    assert "Edit settings…" in page
    assert "Push a message…" in page
    assert "Create a queue…" in operator.get("/queues/").content.decode()
    form = operator.get(SETTINGS, headers={"HX-Request": "true"}).content.decode()
    assert "<html" not in form
    assert 'id="dialog-title"' in form
    values = form_of(form)
    assert values == {f"option-{o.name}": json.dumps(options_of()[o.name]) for o in OPTIONS}
    assert values["option-leaseTime"] == "30"
    assert values["option-deadLetterQueue"] == "false"
    # Without htmx, a page of its own.
    assert "<html" in operator.get(SETTINGS).content.decode()


# -- who may ---------------------------------------------------------------------


def test_a_viewer_is_refused_every_change(viewer, q):
    before = options_of()
    assert viewer.get(SETTINGS).status_code == 403
    assert viewer.post(SETTINGS, blank_form(leaseTime="5")).status_code == 403
    assert viewer.get(CREATE).status_code == 403
    assert viewer.post(CREATE, {"name": "q2"}).status_code == 403
    assert viewer.get(PUSH).status_code == 403
    assert viewer.post(PUSH, {"payload": "{}"}).status_code == 403
    assert options_of() == before
    assert not Queue.objects.filter(name="q2").exists()
    assert not Message.objects.exists()
    assert not AuditEntry.objects.exists()


def test_an_unknown_queue_is_404(operator):
    assert operator.get("/queues/nope/settings/").status_code == 404
    assert operator.post("/queues/nope/settings/", blank_form(leaseTime="5")).status_code == 404
    assert operator.get("/queues/nope/push/").status_code == 404
    assert operator.post("/queues/nope/push/", {"payload": "{}"}).status_code == 404
    assert not Queue.objects.exists()
    assert not AuditEntry.objects.exists()


# -- edit ------------------------------------------------------------------------


def test_merge_changes_what_is_given_and_keeps_the_rest(operator, q):
    answer = operator.post(
        SETTINGS, {**blank_form(leaseTime="45", priority="-5"), "mode": "merge", "reason": "slow renderer"}
    )
    assert answer.status_code == 303
    assert answer["Location"] == "/queues/q/#queue-settings"
    options = options_of()
    assert (options["leaseTime"], options["priority"], options["retryLimit"], options["deadLetterQueue"]) == (
        45,
        -5,
        7,
        False,
    )
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.target, entry.reason, entry.via) == (
        "queue.configure",
        "q",
        "slow renderer",
        "dashboard",
    )
    assert entry.actor.startswith("operator")
    assert json.loads(entry.before)["leaseTime"] == 30
    assert json.loads(entry.after)["leaseTime"] == 45


def test_the_filled_form_sent_back_unchanged_changes_nothing_and_records_nothing(operator, q):
    values = form_of(operator.get(SETTINGS).content.decode())
    answer = operator.post(SETTINGS, {**values, "mode": "merge"}, headers=HTMX)
    assert answer.status_code == 200
    assert "Nothing changed" in answer.content.decode()
    assert not AuditEntry.objects.exists()


def test_replace_resets_what_is_left_blank_to_its_default(operator, q):
    answer = operator.post(SETTINGS, {**blank_form(leaseTime="45"), "mode": "replace"}, headers=HTMX)
    body = answer.content.decode()
    assert answer.status_code == 200
    assert "Changed 3 settings (replaced" in body
    assert re.search(r'id="queue-settings"[^>]*hx-swap-oob="true"', body)
    assert '<tr data-option="retryLimit">' in body  # back at its default: not marked
    options = options_of()
    assert (options["leaseTime"], options["retryLimit"], options["deadLetterQueue"]) == (45, 3, True)
    assert AuditEntry.objects.get().action == "queue.configure"


def test_null_restores_one_option_and_namespace_and_task_are_set(operator, q):
    form = {**blank_form(retryLimit="null", deadLetterQueue="null"), "namespace": "billing", "task": "pdf"}
    assert operator.post(SETTINGS, form).status_code == 303
    row = Queue.objects.get(name="q")
    assert (row.options["retryLimit"], row.options["deadLetterQueue"], row.options["leaseTime"]) == (3, True, 30)
    assert (row.namespace, row.task) == ("billing", "pdf")
    assert "namespace billing; task pdf" in AuditEntry.objects.get().after


BAD_OPTIONS = [
    # (field, text typed or sent, the value the API gets for it)
    ("leaseTime", "abc", "abc"),
    ("leaseTime", "1.5", 1.5),
    ("leaseTime", "true", True),
    ("leaseTime", "-1", -1),
    ("retryLimit", "99999999999", 99999999999),
    ("priority", "5000", 5000),
    ("deadLetterQueue", "maybe", "maybe"),
    ("deadLetterQueue", "1", 1),
    ("maxSize", '"10"', "10"),
]


@pytest.mark.parametrize(("name", "typed", "sent"), BAD_OPTIONS)
def test_a_bad_option_gets_the_apis_refusal_beside_its_field(operator, q, name, typed, sent):
    expected = api_error({"queue": "q", "options": {name: sent}})
    before = options_of()
    answer = operator.post(SETTINGS, {**blank_form(**{name: typed}), "mode": "merge"}, headers=HTMX)
    body = answer.content.decode()
    assert answer.status_code == 422
    assert f"Not changed: {expected}" in body
    field_error = re.search(rf'id="option-{name}-error">([^<]*)<', body)
    assert field_error is not None
    assert field_error.group(1) == expected
    if name not in BOOL_OPTIONS:
        # What was typed stays in the field.
        assert f'name="option-{name}" value="{escape(typed)}"' in body
    assert 'aria-invalid="true"' in body
    assert options_of() == before
    assert not AuditEntry.objects.exists()


def test_two_bad_options_each_show_their_own_and_the_first_is_the_apis(operator, q):
    expected = api_error({"queue": "q", "options": {"retryLimit": "x", "priority": 5000}})
    answer = operator.post(SETTINGS, blank_form(retryLimit="x", priority="5000"))
    body = answer.content.decode()
    assert answer.status_code == 422
    assert "<html" in body
    assert f"Not changed: {expected}" in body
    assert 'id="option-retryLimit-error">option retryLimit must be an integer<' in body
    assert 'id="option-priority-error">option priority must be from -1000 to 1000<' in body


def test_a_bad_mode_gets_the_apis_refusal(operator, q):
    expected = api_error({"queue": "q", "mode": "sideways", "options": {}})
    answer = operator.post(SETTINGS, {**blank_form(leaseTime="9"), "mode": "sideways"})
    assert answer.status_code == 422
    assert f"Not changed: {expected}" in answer.content.decode()
    assert options_of()["leaseTime"] == 30


# -- create ----------------------------------------------------------------------


def test_an_operator_creates_a_queue_with_options(operator):
    form = operator.get(CREATE, headers={"HX-Request": "true"}).content.decode()
    assert 'name="name"' in form
    # A new queue's form holds the defaults.
    assert form_of(form) == {f"option-{o.name}": json.dumps(o.default) for o in OPTIONS}
    answer = operator.post(
        CREATE, {"name": "invoices", "task": "pdf", "option-retryLimit": "9", "reason": "new service"}
    )
    assert answer.status_code == 303
    assert answer["Location"] == "/queues/invoices/"
    row = Queue.objects.get(name="invoices")
    assert (row.options["retryLimit"], row.options["leaseTime"], row.task, row.namespace) == (9, 300, "pdf", None)
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.target, entry.reason, entry.via) == (
        "queue.configure",
        "invoices",
        "new service",
        "dashboard",
    )
    assert entry.before == "(no queue: this configure made it)"
    assert "Created queue invoices." in operator.get("/queues/invoices/").content.decode()


def test_a_create_through_htmx_refreshes_the_list(operator):
    answer = operator.post(
        CREATE, {"name": "mail"}, headers={"HX-Request": "true", "HX-Current-URL": "http://testserver/queues/"}
    )
    body = answer.content.decode()
    assert answer.status_code == 200
    assert "Created" in body
    assert re.search(r'id="queue-table"[^>]*hx-swap-oob="true"', body)
    assert "/queues/mail/" in body


@pytest.mark.parametrize("name", ["", "a\tb", "x" * 512, "right\u202eleft"])
def test_a_bad_name_gets_the_apis_refusal(operator, name):
    expected = api_error({"queue": name})
    answer = operator.post(CREATE, {"name": name, "option-leaseTime": "60"})
    body = answer.content.decode()
    assert answer.status_code == 422
    assert expected in body
    assert 'id="new-queue-name-error"' in body
    assert not Queue.objects.exists()
    assert not AuditEntry.objects.exists()


def test_a_bad_option_refuses_the_create(operator):
    expected = api_error({"queue": "fresh", "options": {"ttl": "1h"}})
    answer = operator.post(CREATE, {"name": "fresh", "option-ttl": "1h"})
    assert answer.status_code == 422
    assert f"Not created: {expected}" in answer.content.decode()
    assert not Queue.objects.exists()


def test_creating_a_queue_that_exists_is_refused_and_changes_nothing(operator, q):
    before = options_of()
    answer = operator.post(CREATE, {"name": "q", "option-leaseTime": "1"})
    body = answer.content.decode()
    assert answer.status_code == 422
    assert "queue q already exists" in body
    assert 'href="/queues/q/">Open it' in body
    assert options_of() == before
    assert not AuditEntry.objects.exists()


def test_queue_configure_refuses_to_make_what_exists_and_to_change_what_does_not():
    from queenadmin.errors import QueueExists, QueueNotFound

    request = queues.ConfigureRequest("q2")
    with pytest.raises(QueueNotFound):
        queues.queue_configure(request=request, exists=True)
    assert queues.queue_configure(request=request, exists=False).created
    with pytest.raises(QueueExists):
        queues.queue_configure(request=request, exists=False)
    assert not queues.queue_configure(request=request, exists=True).created


def test_a_queue_named_new_keeps_its_own_page(viewer):
    configure("new")
    assert viewer.get("/queues/new/").status_code == 200


# -- push ------------------------------------------------------------------------


def test_an_operator_pushes_a_message_stamped_with_their_name(operator, q):
    form = operator.get(PUSH, headers={"HX-Request": "true"}).content.decode()
    assert 'name="payload"' in form
    assert 'value="Default"' in form
    answer = operator.post(
        PUSH,
        {"payload": '{"order": 42,\n "lines": [1, 2]}', "partition": "eu", "transactionId": "t-42", "reason": "resend"},
    )
    assert answer.status_code == 303
    assert answer["Location"] == "/queues/q/#queue-messages"
    message = Message.objects.get()
    entry = AuditEntry.objects.get()
    assert entry.actor.startswith("operator")
    assert (message.partition.name, message.transaction_id, message.producer_sub) == ("eu", "t-42", entry.actor)
    assert json.loads(message.payload) == {"order": 42, "lines": [1, 2]}
    assert (entry.action, entry.target, entry.reason, entry.via) == ("queue.push", "q", "resend", "dashboard")
    assert message.message_id in entry.after
    assert "transactionId t-42" in entry.after
    # The consumer sees who pushed it.
    claim = queues.queue_claim(request=queues.PopRequest(queue="q"))
    assert [m.producer_sub for m in claim.messages] == [entry.actor]


def test_a_push_through_htmx_says_where_it_went_and_a_repeat_is_a_duplicate(operator, q):
    first = operator.post(PUSH, {"payload": "[1]", "transactionId": "dup"}, headers=HTMX)
    body = first.content.decode()
    assert first.status_code == 200
    assert "Pushed to" in body
    assert 'partition <span class="mono">Default</span>' in body
    assert re.search(r'id="queue-messages"[^>]*hx-swap-oob="true"', body)
    again = operator.post(PUSH, {"payload": "[2]", "transactionId": "dup"}, headers=HTMX)
    assert again.status_code == 200
    assert "Not pushed: a duplicate" in again.content.decode()
    assert Message.objects.count() == 1
    assert AuditEntry.objects.count() == 1


@pytest.mark.parametrize("payload", ["{", "{'a': 1}", "", "NaN-ish"])
def test_a_payload_that_is_not_json_is_refused_beside_it(operator, q, payload):
    answer = operator.post(PUSH, {"payload": payload}, headers=HTMX)
    body = answer.content.decode()
    assert answer.status_code == 422
    assert 'id="push-payload-error">payload is not JSON: ' in body
    assert not Message.objects.exists()
    assert not AuditEntry.objects.exists()


def test_nan_parses_but_is_refused_by_the_apis_check(operator, q):
    """Python reads ``NaN``; the push parser's JSON writer refuses it, as for a client."""
    answer = operator.post(PUSH, {"payload": "NaN"})
    assert answer.status_code == 422
    assert 'id="push-payload-error">payload is not JSON<' in answer.content.decode()
    assert not Message.objects.exists()


@pytest.mark.parametrize(
    ("field", "value"), [("partition", "a\u202eb"), ("partition", "p" * 512), ("transactionId", "t" * 65536)]
)
def test_a_bad_partition_or_transaction_id_gets_the_apis_refusal(operator, q, field, value):
    expected = api_error({"items": [{"queue": "q", "payload": 1, field: value}]}, "/push")
    answer = operator.post(PUSH, {"payload": "1", field: value})
    body = answer.content.decode()
    assert answer.status_code == 422
    wanted = expected.removeprefix("items[0].")
    assert f"Not pushed: {wanted}" in body
    assert re.search(rf'-error">{re.escape(wanted)}<', body)
    assert not Message.objects.exists()


def test_a_full_queue_refuses_the_push(operator):
    configure("q", maxSize=1)
    push("q", 1)
    answer = operator.post(PUSH, {"payload": "{}"})
    assert answer.status_code == 422
    assert "would exceed max capacity (1)" in answer.content.decode()
    assert Message.objects.count() == 1
    assert not AuditEntry.objects.exists()
