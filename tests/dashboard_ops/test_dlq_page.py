"""``/dlq/``: dead letters grouped by error signature, searched by error
text, linked to their message, and replayed (the selected, or all that
match a filter, in bounded batches) into their own queue or another one,
each batch audited with the operator and the reason."""

from __future__ import annotations

import pytest

from queenadmin.dashboard.views import deadletters
from queenadmin.domain import queues
from queenadmin.domain.queues import operator as queue_operator
from queenadmin.models import AuditEntry, DeadLetter, Message
from queenadmin.plumbing.db import json_text
from tests.dashboard_ops.conftest import ack, claim, dead_letter

pytestmark = pytest.mark.django_db


@pytest.fixture
def failures():
    dead_letter("q1", 3, error="timeout after 3000 ms")
    dead_letter("q2", 2, "p", error="timeout after 15 ms")
    dead_letter("q2", 1, "p", error="card 8f3a2c1d9b declined")


def test_the_page_groups_dead_letters_by_signature_with_counts(viewer, failures):
    page = viewer.get("/dlq/").content.decode()
    assert "Errors by signature" in page
    assert "6 dead letters counted." in page
    timeouts = page.index("timeout after &lt;n&gt; ms")
    cards = page.index("card &lt;id&gt; declined")
    assert timeouts < cards  # the most frequent first
    assert '<span class="qa-sig-count">5</span>' in page[:timeouts][-200:]
    assert "/dlq/?sig=timeout%20after%20%3Cn%3E%20ms" in page


def test_a_signature_and_an_error_text_filter_the_table(viewer, failures):
    page = viewer.get("/dlq/", {"sig": "timeout after <n> ms"}).content.decode()
    table = page[page.index('id="dlq-table"') :]
    assert table.count("<tr>") == 1 + 5
    assert "declined" not in table
    assert "every signature" in page
    page = viewer.get("/dlq/", {"error": "DECLINED"}).content.decode()
    table = page[page.index('id="dlq-table"') :]
    assert table.count("<tr>") == 1 + 1
    assert "card 8f3a2c1d9b declined" in table
    # The counts follow the other filters.
    assert "1 dead letter counted." in page


def test_ids_link_to_the_message_and_operators_get_select_all(operator, failures):
    page = operator.get("/dlq/").content.decode()
    dead = DeadLetter.objects.filter(queue__name="q1").first()
    assert f'<a href="/queues/q1/messages/{dead.message_id}/">' in page
    assert f'<td class="num mono">{dead.pk}</td>' in page
    assert 'data-select-all="ids"' in page
    assert 'name="dest_queue"' in page


def test_each_dead_letter_names_who_pushed_it(viewer):
    """The message's ``producerSub``, kept with its dead letter: a JWT's
    ``sub`` or a token's name, shown as text; a dash when nobody was named."""
    queues.queue_push(items=[queues.PushItem("who", "p", json_text({"n": 1}))], producer_sub="billing-<svc>")
    queues.queue_push(items=[queues.PushItem("who", "p", json_text({"n": 2}))])
    ack(claim("who", batch=2), "dlq", "boom")
    page = viewer.get("/dlq/").content.decode()
    table = page[page.index('id="dlq-table"') :]
    assert "<th>Pushed by</th>" in table
    cells = table.split('<td class="mono" data-producer-sub>')[1:]
    # Newest first: the anonymous message, then billing's.
    assert [cell[: cell.index("</td>")] for cell in cells] == ["—", "billing-&lt;svc&gt;"]


def test_replay_selected_into_another_queue_is_audited(operator, failures):
    ids = list(DeadLetter.objects.filter(queue__name="q1").values_list("id", flat=True))
    response = operator.post(
        "/dlq/replay/",
        {"ids": [str(i) for i in ids[:2]], "dest_queue": "retry", "dest_partition": "p9", "reason": "timeouts fixed"},
        follow=True,
    )
    assert "Replayed 2 dead letters, into queue retry, partition p9 (transactionId dlq:&lt;id&gt;)." in (
        response.content.decode()
    )
    copies = Message.objects.filter(partition__queue__name="retry", partition__name="p9")
    assert sorted(copies.values_list("transaction_id", flat=True)) == sorted(f"dlq:{i}" for i in ids[:2])
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.target, entry.reason, entry.actor, entry.via) == (
        "dlq.replay",
        "q1",
        "timeouts fixed",
        "operator1",
        "dashboard",
    )
    assert "into queue retry, partition p9" in entry.after


def test_replay_all_that_match_an_error_across_queues_in_bounded_batches(operator, failures, monkeypatch):
    """Every queue holding a match, at most MAX_BATCHES_PER_REQUEST batches a
    request (each its own transaction and audit entry); the outcome says to
    go on, and sending it again finishes."""
    defaults = {**queue_operator.queue_dlq_action.__wrapped__.__kwdefaults__, "batch": 2}  # type: ignore[attr-defined]
    monkeypatch.setattr(queue_operator.queue_dlq_action.__wrapped__, "__kwdefaults__", defaults)  # type: ignore[attr-defined]
    monkeypatch.setattr(deadletters, "MAX_BATCHES_PER_REQUEST", 2)
    upto = DeadLetter.objects.order_by("-id").values_list("id", flat=True)[0]
    form = {"all": "1", "error": "timeout", "upto": str(upto), "dest_queue": "retry", "reason": "fixed"}
    first = operator.post("/dlq/replay/", form, follow=True).content.decode()
    # q1's 3 in two batches; q2 waits for the next request.
    assert "Replayed 3 dead letters, into queue retry" in first
    assert "More match: send the same action again to go on." in first
    second = operator.post("/dlq/replay/", form, follow=True).content.decode()
    assert "Replayed 2 dead letters, into queue retry" in second
    assert "More match" not in second
    assert list(DeadLetter.objects.values_list("error", flat=True)) == ["card 8f3a2c1d9b declined"]
    assert Message.objects.filter(partition__queue__name="retry").count() == 5
    entries = AuditEntry.objects.filter(action="dlq.replay")
    assert entries.count() == 3
    assert set(entries.values_list("reason", flat=True)) == {"fixed"}
    assert {e.target for e in entries} == {"q1", "q2"}


def test_replay_all_of_a_signature_into_their_own_queue(operator, failures):
    response = operator.post("/dlq/replay/", {"all": "1", "sig": "card <id> declined", "target": "all"})
    assert response.status_code == 303
    assert response["Location"] == "/dlq/?sig=card+%3Cid%3E+declined"
    assert not DeadLetter.objects.filter(error__contains="declined").exists()
    assert DeadLetter.objects.count() == 5
    assert Message.objects.filter(partition__queue__name="q2", transaction_id__startswith="dlq:").count() == 1


def test_a_bad_destination_replays_nothing(operator, failures):
    ids = [str(i) for i in DeadLetter.objects.values_list("id", flat=True)]
    response = operator.post("/dlq/replay/", {"ids": ids, "dest_queue": "bad\tname"}, follow=True)
    assert "Not replayed: queue must not contain control characters." in response.content.decode()
    assert DeadLetter.objects.count() == 6
    assert not AuditEntry.objects.exists()


def test_replaying_the_selected_again_counts_them_as_duplicates(operator, failures):
    """The second replay of the same selection appends nothing, says the
    dead letters were replayed before (duplicates, not "gone"), and writes
    no audit entry; naming another destination changes nothing."""
    ids = [str(i) for i in DeadLetter.objects.filter(queue__name="q1").values_list("id", flat=True)]
    operator.post("/dlq/replay/", {"ids": ids[:2], "dest_queue": "retry"}, follow=True)
    page = operator.post("/dlq/replay/", {"ids": ids, "dest_queue": "third"}, follow=True).content.decode()
    assert "Replayed 1 dead letter, into queue third (transactionId dlq:&lt;id&gt;)." in page
    assert (
        " 2 were duplicates: replayed before (transactionId dlq:&lt;id&gt;), their copy is where that replay put"
        " it; nothing appended again." in page
    )
    assert "already gone" not in page
    assert Message.objects.filter(partition__queue__name="retry").count() == 2
    assert Message.objects.filter(partition__queue__name="third").count() == 1
    assert AuditEntry.objects.filter(action="dlq.replay").count() == 2
    page = operator.post("/dlq/replay/", {"ids": ids[:1]}, follow=True).content.decode()
    assert "Replayed 0 dead letters" in page
    assert "1 was a duplicate: replayed before" in page
    assert AuditEntry.objects.filter(action="dlq.replay").count() == 2


def test_a_copy_already_there_keeps_its_dead_letter_and_says_so(operator, failures):
    dead = DeadLetter.objects.filter(queue__name="q1").first()
    queues.queue_push(items=[queues.PushItem("q1", queues.DEFAULT_PARTITION, "1", f"dlq:{dead.pk}")])
    response = operator.post("/dlq/replay/", {"ids": [str(dead.pk)], "target": "all"}, follow=True)
    note = "1 was not replayed: the destination already held their copy (transactionId dlq:&lt;id&gt;)"
    assert note in response.content.decode()
    assert DeadLetter.objects.filter(pk=dead.pk).exists()


def test_an_htmx_replay_redraws_the_table_and_the_signatures(operator, failures):
    ids = [str(i) for i in DeadLetter.objects.filter(queue__name="q2").values_list("id", flat=True)]
    response = operator.post("/dlq/replay/", {"ids": ids}, headers={"HX-Request": "true"})
    body = response.content.decode()
    assert body.lstrip().startswith('<section id="dlq-table"')
    assert '<section id="dlq-signatures" class="panel" hx-swap-oob="true"' in body
    # Counted again: q1's 3 are left.
    assert "3 dead letters counted." in body
    assert "card &lt;id&gt; declined" not in body
