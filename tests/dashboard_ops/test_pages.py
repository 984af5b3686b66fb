"""The overview, queue and search pages: access, partials, actions, query counts, masking."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from queenadmin.domain import clock, ephemeral, locks, timers
from queenadmin.domain.attention import Override, attention_thresholds_set
from queenadmin.domain.audit import Who
from queenadmin.domain.kv import kv_put
from queenadmin.domain.queues import history
from queenadmin.models import AuditEntry, DeadLetter, Message
from tests.dashboard_ops.conftest import ack, claim, configure, dead_letter, push
from tests.supervised import write_beat

pytestmark = pytest.mark.django_db

PAGES = ["/", "/queues/", "/queues/q/", "/search/?q=q", "/ephemeral/", "/consumers/"]
OWNER = "owner-secret-7f3a9c"


@pytest.fixture
def data():
    """A little of everything: queues with dead letters, a lock, a timer, KV keys."""
    configure("q", delayedProcessing=0)
    push("q", 5, "p1")
    dead_letter("q", 3, "p2")
    claim("q", partition="p1", batch=2)
    grant = locks.lock_acquire(name="nightly-report", ttl=60, owner=OWNER)
    assert grant.acquired
    timers.timer_schedule(queue="q", timer_key="reminder-1", payload={"a": 1}, delay=timedelta(minutes=5))
    kv_put(namespace="app", key="feature-x", value={"on": True}, ttl=None)
    ephemeral.eph_push(queue="eph", partition="p1", payloads=['{"owner": "not a lock"}'])
    return grant


# -- access ---------------------------------------------------------------------


@pytest.mark.parametrize("url", PAGES)
def test_anonymous_goes_to_the_login_page(client, url, data):
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=")


@pytest.mark.parametrize("url", PAGES)
@pytest.mark.parametrize("role", ["user", "staff"])
def test_without_staff_or_view_permission_is_forbidden(make_client, url, role, data):
    assert make_client(role).get(url).status_code == 403


@pytest.mark.parametrize("url", PAGES)
def test_viewer_sees_every_page(viewer, url, data):
    assert viewer.get(url).status_code == 200


def test_viewer_sees_no_action_buttons_and_is_refused_on_post(viewer, data):
    page = viewer.get("/queues/q/").content.decode()
    assert "Replay" not in page
    assert "Purge" not in page
    assert 'name="ids"' not in page
    for action in ("replay", "purge"):
        response = viewer.post(f"/queues/q/dlq/{action}/", {"all": "1", "confirm": "q"})
        assert response.status_code == 403
    assert DeadLetter.objects.count() == 3
    assert not AuditEntry.objects.exists()


def test_operator_sees_the_actions(operator, data):
    page = operator.get("/queues/q/").content.decode()
    assert "Replay all that match" in page
    assert "Purge all that match" in page
    assert page.count('name="ids"') == 3


@pytest.mark.parametrize("action", ["replay", "purge"])
def test_csrf_is_enforced_on_actions(make_client, action, data):
    operator = make_client("operator", csrf=True)
    response = operator.post(f"/queues/q/dlq/{action}/", {"all": "1", "confirm": "q"})
    assert response.status_code == 403
    assert DeadLetter.objects.count() == 3
    # With the page's token the same post goes through.
    page = operator.get("/queues/q/")
    token = page.cookies["csrftoken"].value
    response = operator.post(f"/queues/q/dlq/{action}/", {"all": "1", "confirm": "q", "csrfmiddlewaretoken": token})
    assert response.status_code == 303
    assert DeadLetter.objects.count() == 0


def test_get_on_an_action_leads_to_its_confirmation_and_does_nothing(operator, viewer, client, data):
    """As every dashboard action (``views.access.staff_action``): GET asks first
    (here: the DLQ section's confirmations), needs the action's permission,
    and an anonymous caller gets 403, not the login page."""
    for action in ("replay", "purge"):
        response = operator.get(f"/queues/q/dlq/{action}/?dlq_group=g1")
        assert response.status_code == 303
        assert response["Location"] == "/queues/q/?dlq_group=g1#queue-dlq"
        assert viewer.get(f"/queues/q/dlq/{action}/").status_code == 403
        assert client.post(f"/queues/q/dlq/{action}/", {"all": "1", "confirm": "q"}).status_code == 403
    assert operator.delete("/queues/q/dlq/replay/").status_code == 405
    assert DeadLetter.objects.count() == 3


def test_unknown_queue_is_404(operator, data):
    assert operator.get("/queues/nope/").status_code == 404
    assert operator.post("/queues/nope/dlq/replay/", {"all": "1"}).status_code == 404


# -- pages ------------------------------------------------------------------------


def test_overview_shows_counts_and_the_timer_chart(viewer, data):
    history.stats_step()  # the KV tile shows the sampler's count
    page = viewer.get("/").content.decode()
    assert "development" in page  # the environment name
    assert 'href="/queues/q/"' in page
    assert "<svg" in page
    assert "Timers due per minute" in page
    assert 'href="/kv/app/"' in page
    assert "Lock permits held" in page


def test_queue_page_shows_partitions_groups_messages_and_dlq(viewer, data):
    page = viewer.get("/queues/q/").content.decode()
    assert "p1" in page
    assert "p2" in page
    assert "queue mode" in page
    assert "boom" in page  # the dead letters' error
    # The queue's charts wait for the statistics sampler: none are drawn.
    assert "Pushed and acked per" not in page


def test_find_a_message_on_the_queue_page(viewer, data):
    mid = Message.objects.filter(partition__name="p1", offset=4).values_list("message_id", flat=True).get()
    page = viewer.get("/queues/q/", {"find": mid}).content.decode()
    assert mid in page
    assert "Messages whose id or transactionId is" in page


def test_message_pages_go_back_by_offset(viewer, data):
    push("q", 120, "p1")
    first = viewer.get("/queues/q/", {"partition": "p1"}).content.decode()
    assert "before=100" in first  # 124 down to 100 on the first page
    second = viewer.get("/queues/q/", {"partition": "p1", "before": "100"}).content.decode()
    assert "before=75" in second


@pytest.mark.parametrize(
    ("url", "target", "partial_id"),
    [
        ("/", "overview-body", "overview-body"),
        ("/queues/", "queue-table", "queue-table"),
        ("/queues/q/", "queue-summary", "queue-summary"),
        ("/queues/q/", "queue-messages", "queue-messages"),
        ("/queues/q/", "queue-dlq", "queue-dlq"),
        ("/search/?q=q", None, "search-results"),
    ],
)
def test_htmx_requests_get_the_partial(viewer, url, target, partial_id, data):
    headers = {"HX-Request": "true"}
    if target:
        headers["HX-Target"] = target
    page = viewer.get(url, headers=headers).content.decode()
    assert page.lstrip().startswith(("<div", "<section"))
    assert f'id="{partial_id}"' in page
    assert "<html" not in page


# -- actions ------------------------------------------------------------------------


def test_operator_replays_selected_dead_letters(operator, data):
    ids = list(DeadLetter.objects.order_by("id").values_list("id", flat=True))
    response = operator.post("/queues/q/dlq/replay/", {"ids": [str(ids[0])], "reason": "retry one"}, follow=True)
    assert response.status_code == 200
    note = "Replayed 1 dead letter of q, for the group that failed each only (transactionId dlq:&lt;id&gt;)."
    assert note in response.content.decode()
    assert sorted(DeadLetter.objects.values_list("id", flat=True)) == ids[1:]
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.target, entry.reason, entry.actor) == ("dlq.replay", "q", "retry one", "operator1")


def test_replaying_the_selected_again_on_the_queue_page_counts_duplicates(operator, data):
    ids = [str(i) for i in DeadLetter.objects.order_by("id").values_list("id", flat=True)[:2]]
    operator.post("/queues/q/dlq/replay/", {"ids": ids, "target": "all"}, follow=True)
    response = operator.post("/queues/q/dlq/replay/", {"ids": ids, "target": "all"}, follow=True)
    page = response.content.decode()
    assert "Replayed 0 dead letters of q" in page
    assert "2 were duplicates: replayed before (transactionId dlq:&lt;id&gt;)" in page
    assert "already gone" not in page
    assert AuditEntry.objects.filter(action="dlq.replay").count() == 1


def test_replay_all_matching_crosses_batches(operator, data, monkeypatch):
    from queenadmin.domain.queues import operator as queue_operator
    from queenadmin.domain.queues.operator import dlq

    monkeypatch.setattr(dlq, "DLQ_BATCH", 2)
    defaults = {"ids": None, "batch": 2, "now": None}
    monkeypatch.setattr(queue_operator.queue_dlq_action.__wrapped__, "__kwdefaults__", defaults)  # type: ignore[attr-defined]
    upto = DeadLetter.objects.order_by("-id").values_list("id", flat=True)[0]
    response = operator.post("/queues/q/dlq/replay/", {"all": "1", "upto": str(upto)})
    assert response.status_code == 303
    assert not DeadLetter.objects.exists()
    assert AuditEntry.objects.filter(action="dlq.replay").count() == 2


def test_a_replay_into_a_full_queue_says_so_and_changes_nothing(operator, data):
    """maxSize refuses the replayed copies: the page says why, no dead letter
    goes, no message is appended, no audit entry is written."""
    configure("q", maxSize=5)  # 5 pushed to p1 are still pending
    before = DeadLetter.objects.count()
    response = operator.post("/queues/q/dlq/replay/", {"all": "1"}, follow=True)
    assert response.status_code == 200
    assert "Stopped after 0 dead letters: Queue &#x27;q&#x27; would exceed max capacity" in response.content.decode()
    assert DeadLetter.objects.count() == before
    assert not AuditEntry.objects.exists()


def test_nothing_chosen_replays_nothing(operator, data):
    response = operator.post("/queues/q/dlq/replay/", {}, follow=True)
    assert "Nothing to replay" in response.content.decode()
    assert DeadLetter.objects.count() == 3


def test_purge_needs_the_typed_queue_name(operator, data):
    response = operator.post("/queues/q/dlq/purge/", {"all": "1", "confirm": "Q"}, follow=True)
    assert "type the queue name" in response.content.decode()
    assert DeadLetter.objects.count() == 3
    assert not AuditEntry.objects.exists()
    response = operator.post("/queues/q/dlq/purge/", {"all": "1", "confirm": "q", "reason": "junk"}, follow=True)
    assert "Purged 3 dead letters of q." in response.content.decode()
    assert not DeadLetter.objects.exists()
    assert AuditEntry.objects.get().action == "dlq.purge"


def test_htmx_action_answers_the_dlq_partial(operator, data):
    response = operator.post(
        "/queues/q/dlq/purge/", {"all": "1", "confirm": "q"}, headers={"HX-Request": "true", "HX-Target": "queue-dlq"}
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert page.lstrip().startswith('<section id="queue-dlq"')
    assert "Purged 3 dead letters" in page
    # The tiles follow out of band: no dead letter left.
    assert '<div id="queue-summary" hx-swap-oob="true">' in page
    assert 'Dead letters</span><span class="qa-tile-value tone-dlq">0<' in page


# -- search ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("q", "expected"),
    [
        ("q", 'href="/queues/q/"'),
        ("nightly", 'href="/locks/?prefix=nightly-report"'),
        ("feature", 'href="/kv/app/key/feature-x"'),
        ("app/feature-x", 'href="/kv/app/key/feature-x"'),
        ("remind", 'href="/timers/?queue=q&amp;prefix=reminder-1"'),
    ],
)
def test_search_finds_each_kind(viewer, q, expected, data):
    page = viewer.get("/search/", {"q": q}).content.decode()
    assert expected in page


def test_search_finds_a_message_by_id_and_transaction_id(viewer, data):
    pushed = push("q", 1, "p9")[0]
    for text in (pushed.message_id, pushed.transaction_id):
        page = viewer.get("/search/", {"q": text}).content.decode()
        assert f'href="/queues/q/messages/{pushed.message_id}/"' in page


def test_search_leaves_out_what_the_user_may_not_see(make_client, data):
    from django.contrib.auth.models import Permission, User

    client = make_client("staff")
    user = User.objects.get(username="staff1")
    user.user_permissions.add(Permission.objects.get(codename="view_queue"))
    page = client.get("/search/", {"q": "nightly"}).content.decode()
    assert "/locks/" not in page
    page = client.get("/search/", {"q": "q"}).content.decode()
    assert 'href="/queues/q/"' in page


def test_search_finds_nothing_plainly(viewer, data):
    page = viewer.get("/search/", {"q": "zzz"}).content.decode()
    assert "Nothing is named" in page


# -- masking --------------------------------------------------------------------------


@pytest.mark.parametrize("url", [*PAGES, "/search/?q=nightly"])
def test_no_raw_lock_owner_or_value_anywhere(viewer, url, data):
    page = viewer.get(url).content.decode()
    assert OWNER not in page
    assert '"owner"' not in page


# -- query counts ---------------------------------------------------------------------


def _more_data(n: int) -> None:
    push("q", n, "p1")
    dead_letter("q", n // 10, "p3")
    for i in range(n // 10):
        kv_put(namespace="app", key=f"k{i}", value=i, ttl=None)
        timers.timer_schedule(queue="q", timer_key=f"t{i}", payload=i, delay=timedelta(minutes=1 + i % 50))
    for i in range(5):
        locks.lock_acquire(name=f"lock-{i}", ttl=60, owner=f"o{i}")
    for i in range(n // 10):
        ephemeral.eph_push(queue=f"eph-{i}", partition=f"p{i % 3}", payloads=[str(i)])
    # More queues, groups, samples, heartbeats (some malformed) and
    # thresholds: the attention list, the rates and the consumers grow.
    for i in range(n // 30):
        push(f"more-{i}", 3, f"p{i % 2}")
        ack(claim(f"more-{i}", group=f"g{i % 3}", batch=1))
        write_beat(now=clock.now(), application=f"app-{i}", queue=f"more-{i}", group=f"g{i % 3}")
        write_beat(now=clock.now(), application=f"bad-{i}", head={"format": i})
        attention_thresholds_set(queue=f"more-{i}", override=Override(max_lag=i + 1), who=Who("otto"))
    history.stats_refresh()


@pytest.mark.parametrize("url", [*PAGES, "/search/?q=k1", "/queues/q/?partition=p1&before=3"])
def test_query_count_does_not_grow_with_the_data(viewer, url, data, django_assert_num_queries, monkeypatch):
    """The same queries, in number, before and after the data grows past every count's cap."""
    from queenadmin.domain import overview
    from queenadmin.domain.queues import board

    for module, name in [
        (board, "DLQ_COUNT_CAP"),
        (board, "DLQ_DETAIL_CAP"),
        (overview, "LOCK_COUNT_CAP"),
        (overview, "TIMER_COUNT_CAP"),
        (overview, "TIMER_WINDOW_CAP"),
    ]:
        monkeypatch.setattr(module, name, 5)
    # The rates, the attention list and the consumers read samples and
    # heartbeats: some from the start, many more after.
    history.stats_refresh()
    write_beat(now=clock.now(), queue="q")
    viewer.get(url)  # warm the session and permission caches
    with CaptureQueriesContext(connection) as small:
        assert viewer.get(url).status_code == 200
    _more_data(300)
    with django_assert_num_queries(len(small.captured_queries)):
        assert viewer.get(url).status_code == 200


def test_operator_purges_selected_dead_letters_with_the_typed_name(operator, data):
    page = operator.get("/queues/q/").content.decode()
    assert "Purge selected" in page
    ids = list(DeadLetter.objects.order_by("id").values_list("id", flat=True))
    refused = operator.post("/queues/q/dlq/purge/", {"ids": [str(ids[1])], "confirm": ""}, follow=True)
    assert "type the queue name" in refused.content.decode()
    response = operator.post("/queues/q/dlq/purge/", {"ids": [str(ids[1])], "confirm": "q"}, follow=True)
    assert "Purged 1 dead letter of q." in response.content.decode()
    assert sorted(DeadLetter.objects.values_list("id", flat=True)) == [ids[0], ids[2]]
    assert "ids " + str(ids[1]) in AuditEntry.objects.get().before


def test_the_queue_page_numbers_offsets_from_0(viewer):
    """Three messages are offsets 0..2 (the last offset 2); a partition with
    no message (a timer's dead letter made it) has no last offset: a dash."""
    import re

    from django.db import transaction

    from queenadmin.domain import clock, queues

    push("zero", 3, "p")
    with transaction.atomic():
        queues.queue_dead_letter_in_txn(
            queue="zero",
            partition="empty",
            group="__timer__",
            transaction_id="t",
            message_id=queues.uuid7(),
            payload_json="{}",
            error="gave up",
            retry_count=5,
            now=clock.now(),
        )
    page = viewer.get("/queues/zero/", {"partition": "p"}).content.decode()

    def cells(name: str) -> list[str]:
        row = re.search(
            rf'<tr>\s*<td class="key"><a href="\?partition={name}#queue-messages">{name}</a></td>(.*?)</tr>', page, re.S
        )
        assert row is not None, name
        return re.findall(r'<td class="num">([^<]*)</td>', row.group(1))

    assert cells("p")[0] == "2"
    assert cells("empty")[0] == "—"
    offsets = re.findall(r'<td class="mono">p</td>\s*<td class="num">(\d+)</td>', page)
    assert offsets == ["2", "1", "0"]
