"""Recovering a stalled queue from the dashboard: a consumer group's seek,
reset and delete, a queue purge, DLQ replay to the failed group or every
group, and the DLQ page across queues."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from queenadmin.dashboard.views import deadletters
from queenadmin.domain import queues
from queenadmin.domain.queues import board
from queenadmin.models import AuditEntry, DeadLetter, Message
from tests.dashboard_ops.conftest import ack, claim, dead_letter, push

pytestmark = pytest.mark.django_db

RECOVER = "/queues/q/groups/recover/"


@pytest.fixture
def stalled():
    """Queue q: groups a and b read 4 messages; a dead-lettered the last."""
    push("q", 4)
    a = claim("q", group="a", batch=4)
    items = [
        queues.AckItem(i, m.transaction_id, str(m.partition_id), "completed" if i < 3 else "dlq", a.lease_id, "x", "a")
        for i, m in enumerate(a.messages)
    ]
    queues.queue_ack(items=items)
    ack(claim("q", group="b", batch=4))


def lag(group: str, queue: str = "q") -> int:
    qb = board.queue_board(name=queue)
    assert qb is not None
    return next(g.lag for g in qb.groups if g.name == group)


# -- who may ---------------------------------------------------------------------


def test_a_viewer_gets_no_recovery_buttons_and_403(viewer, stalled):
    page = viewer.get("/queues/q/").content.decode()
    assert "Seek, reset, delete" not in page
    assert "Purge the queue" not in page
    assert viewer.get(f"{RECOVER}?group=a").status_code == 403
    assert viewer.post(RECOVER, {"group": "a", "do": "seek-start"}).status_code == 403
    assert viewer.get("/queues/q/purge/").status_code == 403
    assert viewer.post("/queues/q/purge/", {"confirm": "q"}).status_code == 403
    assert Message.objects.count() == 4
    assert not AuditEntry.objects.exists()


def test_an_operator_gets_the_buttons(operator, stalled):
    page = operator.get("/queues/q/").content.decode()
    assert page.count("Seek, reset, delete…") == 2
    assert "Purge the queue…" in page


def test_csrf_is_enforced_on_recovery(make_client, stalled):
    strict = make_client("operator", csrf=True)
    assert strict.post(RECOVER, {"group": "a", "do": "seek-start"}).status_code == 403
    assert strict.post("/queues/q/purge/", {"confirm": "q"}).status_code == 403
    assert Message.objects.count() == 4


# -- a group ---------------------------------------------------------------------


def test_the_confirmation_names_each_choice_and_its_effect(operator, stalled):
    page = operator.get(f"{RECOVER}?group=a").content.decode()
    for label in ("Seek to the start", "Seek to a time", "Seek to the end", "Reset", "Delete the group"):
        assert label in page
    assert "ends its leases now" in page
    fragment = operator.get(f"{RECOVER}?group=a", headers={"HX-Request": "true"}).content.decode()
    assert "<html" not in fragment
    assert 'id="dialog-title"' in fragment


def test_seek_to_the_start_moves_the_group_and_audits(operator, stalled):
    response = operator.post(RECOVER, {"group": "b", "do": "seek-start", "reason": "re-read"})
    assert response.status_code == 303
    assert response["Location"] == "/queues/q/#queue-summary"
    assert lag("b") == 4
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.target, entry.reason, entry.actor) == (
        "queue.group_seek",
        "q/b",
        "re-read",
        "operator1",
    )
    assert '<a href="/queues/q/">q/b</a>' in operator.get("/audit/").content.decode()


def test_an_htmx_action_answers_its_outcome_and_fresh_regions(operator, stalled):
    response = operator.post(
        RECOVER,
        {"group": "b", "do": "seek-end"},
        headers={"HX-Request": "true", "HX-Current-URL": "http://testserver/queues/q/"},
    )
    assert response.status_code == 200
    body = response.content.decode()
    assert "Seek to the end" in body
    assert 'id="queue-summary" hx-swap-oob="true"' in body


def test_seek_to_a_time_needs_a_time(operator, stalled):
    response = operator.post(RECOVER, {"group": "b", "do": "seek-time", "at": "yesterday"})
    assert response.status_code == 422
    assert "Give the time to seek to" in response.content.decode()
    response = operator.post(RECOVER, {"group": "b", "do": "seek-time", "at": "2000-01-01T00:00"})
    assert response.status_code == 303
    assert lag("b") == 4


def test_delete_needs_the_group_name_typed(operator, stalled):
    response = operator.post(RECOVER, {"group": "a", "do": "delete"})
    assert response.status_code == 422
    assert "type the group" in response.content.decode()
    assert not AuditEntry.objects.exists()
    response = operator.post(RECOVER, {"group": "a", "do": "delete", "confirm": "a"})
    assert response.status_code == 303
    qb = board.queue_board(name="q")
    assert qb is not None
    assert [g.name for g in qb.groups] == ["b"]
    assert AuditEntry.objects.get().action == "queue.group_delete"


def test_bad_input_is_4xx(operator, stalled):
    assert operator.post(RECOVER, {"group": "a", "do": "explode"}).status_code == 422
    assert operator.post(RECOVER, {"group": "nobody", "do": "seek-end"}).status_code == 404
    assert operator.get(f"{RECOVER}?group=nobody").status_code == 404
    assert operator.post("/queues/nope/groups/recover/", {"group": "a", "do": "seek-end"}).status_code == 404
    assert operator.post("/queues/nope/purge/", {"confirm": "nope"}).status_code == 404
    assert operator.delete(RECOVER).status_code == 405
    assert not AuditEntry.objects.exists()


# -- purge -----------------------------------------------------------------------


def test_purge_needs_the_name_typed_then_deletes_every_message(operator, stalled):
    assert "Deletes every message stored in the queue" in operator.get("/queues/q/purge/").content.decode()
    response = operator.post("/queues/q/purge/", {"confirm": "Q"})
    assert response.status_code == 422
    assert Message.objects.count() == 4
    response = operator.post("/queues/q/purge/", {"confirm": "q", "reason": "poison"}, follow=True)
    assert response.status_code == 200
    assert "Purged 4 messages of q." in response.content.decode()
    assert not Message.objects.exists()
    assert DeadLetter.objects.count() == 1
    assert (lag("a"), lag("b")) == (0, 0)
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.target, entry.reason) == ("queue.purge", "q", "poison")
    trail = operator.get("/audit/?kind=queue").content.decode()
    assert "queue.purge" in trail
    assert '<a href="/queues/q/">q</a>' in trail


# -- DLQ replay from the queue page ----------------------------------------------


def test_the_replay_confirmation_says_who_gets_the_copy_and_its_transaction_id(operator, stalled):
    page = operator.get("/queues/q/").content.decode()
    assert "The group that failed it, only" in page
    assert "Every consumer group of the queue" in page
    assert "dlq:&lt;dead letter id&gt;" in page


def test_a_replay_goes_to_the_failed_group_by_default(operator, stalled):
    dead = DeadLetter.objects.get()
    response = operator.post("/queues/q/dlq/replay/", {"ids": [str(dead.pk)]}, follow=True)
    note = "Replayed 1 dead letter of q, for the group that failed each only (transactionId dlq:&lt;id&gt;)."
    assert note in response.content.decode()
    copy = Message.objects.get(transaction_id=f"dlq:{dead.pk}")
    assert copy.for_group == "a"
    assert claim("q", group="b").messages == ()
    assert [m.transaction_id for m in claim("q", group="a").messages] == [f"dlq:{dead.pk}"]


def test_a_replay_to_every_group(operator, stalled):
    dead = DeadLetter.objects.get()
    response = operator.post("/queues/q/dlq/replay/", {"ids": [str(dead.pk)], "target": "all"}, follow=True)
    assert "for every consumer group (transactionId dlq:&lt;id&gt;)" in response.content.decode()
    assert Message.objects.get(transaction_id=f"dlq:{dead.pk}").for_group is None
    assert len(claim("q", group="b").messages) == 1


def test_a_replay_with_an_unknown_target_replays_nothing(operator, stalled):
    response = operator.post("/queues/q/dlq/replay/", {"all": "1", "target": "someone"}, follow=True)
    assert "Not replayed: choose who gets the copies" in response.content.decode()
    assert DeadLetter.objects.count() == 1
    assert not AuditEntry.objects.exists()


# -- the DLQ page ----------------------------------------------------------------


@pytest.fixture
def spread():
    dead_letter("q1", 3)
    dead_letter("q2", 2, "p")


def test_the_dlq_page_lists_every_queue_newest_first_and_filters(viewer, spread):
    page = viewer.get("/dlq/").content.decode()
    assert '<a href="/dlq/" aria-current="page">DLQ</a>' in page
    assert page.index("/queues/q2/#queue-dlq") < page.index("/queues/q1/#queue-dlq")
    assert page.count("<tr>") == 1 + 5
    assert 'name="ids"' not in page
    only = viewer.get("/dlq/?queue=q1").content.decode()
    assert "/queues/q2/" not in only
    assert only.count("<tr>") == 1 + 3
    none = viewer.get("/dlq/?group=nobody").content.decode()
    assert "No dead letters match." in none
    assert viewer.get("/dlq/?before=abc&upto=-1").status_code == 200
    assert viewer.post("/dlq/replay/", {"all": "1", "queue": "q1"}).status_code == 403
    assert viewer.post("/dlq/purge/", {"all": "1", "queue": "q1", "confirm": "q1"}).status_code == 403
    assert DeadLetter.objects.count() == 5


def test_the_dlq_page_pages_by_id_with_flat_queries(viewer, spread, monkeypatch, django_assert_num_queries):
    monkeypatch.setattr(deadletters, "PAGE", 2)
    first = viewer.get("/dlq/").content.decode()
    ids = list(DeadLetter.objects.order_by("-id").values_list("id", flat=True))
    assert f"before={ids[1]}" in first
    second = viewer.get(f"/dlq/?before={ids[1]}").content.decode()
    assert f'value="{ids[2]}"' not in first
    assert second.count("<tr>") == 1 + 2
    with CaptureQueriesContext(connection) as small:
        viewer.get("/dlq/")
    dead_letter("q3", 30)
    with django_assert_num_queries(len(small.captured_queries)):
        viewer.get("/dlq/")


def test_replay_selected_across_queues_and_purge_needs_a_queue(operator, spread):
    ids = list(DeadLetter.objects.order_by("id").values_list("id", flat=True))
    response = operator.post("/dlq/replay/", {"ids": [str(ids[0]), str(ids[-1])], "reason": "fixed"}, follow=True)
    assert "Replayed 2 dead letters, for the group that failed each only" in response.content.decode()
    assert set(AuditEntry.objects.values_list("target", flat=True)) == {"q1", "q2"}
    response = operator.post("/dlq/purge/", {"ids": [str(ids[1])], "confirm": "q1"}, follow=True)
    assert "filter by one queue and type its name" in response.content.decode()
    assert DeadLetter.objects.count() == 3
    response = operator.post("/dlq/purge/", {"ids": [str(ids[1])], "queue": "q1", "confirm": "q1"}, follow=True)
    assert "Purged 1 dead letter." in response.content.decode()
    assert DeadLetter.objects.count() == 2


def test_replay_all_that_match_of_one_queue_and_group(operator, spread):
    response = operator.post("/dlq/replay/", {"all": "1", "queue": "q2", "target": "all"})
    assert response.status_code == 303
    assert response["Location"] == "/dlq/?queue=q2"
    assert list(DeadLetter.objects.values_list("queue__name", flat=True).distinct()) == ["q1"]
    assert Message.objects.filter(transaction_id__startswith="dlq:", for_group__isnull=True).count() == 2
    response = operator.post("/dlq/replay/", {"all": "1"}, follow=True)
    assert "Nothing to replay" in response.content.decode()


def test_an_htmx_replay_on_the_dlq_page_answers_the_table_and_its_outcome(operator, spread):
    ids = list(DeadLetter.objects.filter(queue__name="q2").values_list("id", flat=True))
    response = operator.post(
        "/dlq/replay/", {"ids": [str(i) for i in ids], "queue": "q2"}, headers={"HX-Request": "true"}
    )
    assert response.status_code == 200
    body = response.content.decode()
    assert '<section id="dlq-table"' in body
    assert "<html" not in body
    assert "No dead letters match." in body
    assert '<div id="dlq-outcome" hx-swap-oob="true">' in body
    assert "Replayed 2 dead letters, for the group that failed each only" in body
    refused = operator.post("/dlq/purge/", {"ids": [str(ids[0])]}, headers={"HX-Request": "true"})
    assert refused.status_code == 200
    assert "Not purged: filter by one queue" in refused.content.decode()


@pytest.mark.parametrize(
    "url",
    [
        "/queues/q%00/groups/recover/?group=a",
        "/queues/q/groups/recover/?group=a%00",
        "/queues/q%00/purge/",
        "/dlq/?queue=q%00",
        "/dlq/?group=a%00&before=99999999999999999999",
    ],
)
def test_a_nul_or_an_overlong_number_finds_nothing_instead_of_failing(operator, stalled, url):
    """PostgreSQL refuses a NUL in a query: every page answers it 400
    before reading (``RefuseUnstorable``), on both databases."""
    assert operator.get(url).status_code == 400
    assert operator.get("/dlq/?before=99999999999999999999").status_code == 200


def test_posts_with_a_nul_are_refused_without_failing(operator, stalled):
    """A form field holding NUL is refused 400 before the action runs."""
    assert operator.post(RECOVER, {"group": "a\x00", "do": "seek-end"}).status_code == 400
    assert operator.post("/queues/q/purge/", {"confirm": "q\x00"}).status_code == 400
    assert operator.post("/dlq/replay/", {"all": "1", "queue": "q\x00"}).status_code == 400
    assert operator.post("/dlq/purge/", {"all": "1", "queue": "q\x00", "confirm": "q\x00"}).status_code == 400
    assert operator.post("/queues/q/dlq/replay/", {"all": "1", "dlq_group": "a\x00"}).status_code == 400
    assert DeadLetter.objects.count() == 1
    assert Message.objects.count() == 4
