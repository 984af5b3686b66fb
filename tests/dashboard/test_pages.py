"""The dashboard's pages: who may see them, what they show, how they page,
and how many queries they cost (not more with more data)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from queenadmin.domain import kv, locks, timers
from queenadmin.models import AuditEntry

pytestmark = pytest.mark.django_db

PAGES = ["/locks/", "/timers/", "/kv/", "/kv/config/", "/kv/config/key/feature.x", "/audit/"]


@pytest.mark.parametrize("path", PAGES)
def test_anonymous_users_go_to_the_login_page(client_for, path):
    response = client_for(None).get(path)
    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=")


@pytest.mark.parametrize("path", PAGES)
def test_signed_in_users_who_are_not_staff_are_refused(client_for, outsider, path):
    assert client_for(outsider).get(path).status_code == 403


@pytest.mark.parametrize("path", PAGES)
def test_staff_without_view_permission_are_refused(client_for, db, path):
    from django.contrib.auth.models import User

    staff = User.objects.create_user("sam", password="pw", is_staff=True)
    assert client_for(staff).get(path).status_code == 403


@pytest.mark.parametrize("path", PAGES)
def test_viewers_see_every_page_live_and_without_buttons(client_for, viewer, path):
    kv.kv_put(namespace="config", key="feature.x", value={"on": True}, ttl=None)
    locks.lock_acquire(name="jobs.nightly", ttl=60, owner="w1")
    timers.timer_schedule(queue="mail", timer_key="welcome-1", payload={"to": 1}, delay=timedelta(minutes=5))
    response = client_for(viewer).get(path)
    html = response.content.decode()
    assert response.status_code == 200
    assert 'id="live"' in html
    assert "ws-connect=" in html
    assert "read-only" in html
    for button in ("Force release", ">Cancel<", ">Move<", "Fire now", ">Edit<", ">Delete<", ">Revert<"):
        assert button not in html


def test_the_header_has_the_environment_nav_search_and_user(client_for, operator, settings):
    settings.QUEENADMIN_ENVIRONMENT_NAME = "production"
    html = client_for(operator).get("/locks/").content.decode()
    assert 'class="env env-production"' in html
    for href in ('href="/"', 'href="/locks/"', 'href="/timers/"', 'href="/kv/"', 'href="/queues/"', 'href="/audit/"'):
        assert href in html
    assert 'href="/admin/"' in html
    assert 'href="/api/v1/docs"' in html
    assert '<form class="search" action="/search/"' in html
    assert 'name="q"' in html
    assert 'id="server-clock"' in html
    assert 'id="live-badge"' in html
    assert "otto" in html
    assert 'action="/logout/"' in html
    assert "htmx-2.min.js" in html
    assert "hx-ws-2.min.js" in html
    assert "https://" not in html.split("<body")[0], "no asset from a CDN"


def test_login_and_logout(client_for, operator):
    client = client_for(None)
    page = client.get("/login/")
    assert page.status_code == 200
    response = client.post("/login/", {"username": "otto", "password": "pw", "next": "/locks/"})
    assert response.status_code == 302
    assert response["Location"] == "/locks/"
    assert client.get("/locks/").status_code == 200
    assert client.post("/logout/").status_code == 302
    assert client.get("/locks/").status_code == 302


def test_locks_page_masks_owners_and_tokens(client_for, operator, pages, distinct_tokens):
    owner = "billing-worker-7:pid-31337"
    got = locks.lock_acquire(name="billing.close", ttl=90, owner=owner, limit=3)
    again = locks.lock_acquire(name="billing.close", ttl=90, owner="billing-worker-8:pid-4", limit=3)
    html = client_for(operator).get("/locks/?prefix=billing").content.decode()
    assert html.count('data-lock="billing.close#') == 2
    assert "Force release" in html
    from queenadmin.domain.masking import mask_token

    assert mask_token(owner) in html
    assert mask_token(got.token) in html
    pages.assert_free_of(owner, "billing-worker-8:pid-4")
    pages.assert_free_of(str(got.token), str(again.token))


def test_locks_page_filters_by_name_prefix_and_pages_by_cursor(client_for, operator, settings):
    settings.QUEENADMIN_DASHBOARD_PAGE_SIZE = 2
    for name in ("a.one", "a.two", "a.three", "b.one"):
        locks.lock_acquire(name=name, ttl=60, owner="o")
    client = client_for(operator)
    first = client.get("/locks/?prefix=a.").content.decode()
    assert 'data-lock="a.one#0"' in first
    assert 'data-lock="a.three#0"' in first
    assert "b.one" not in first
    assert 'rel="next"' in first
    next_href = first.split('rel="next"')[0].rsplit('href="', 1)[1].split('"')[0]
    second = client.get(next_href.replace("&amp;", "&")).content.decode()
    assert 'data-lock="a.two#0"' in second
    assert "a.one" not in second
    assert 'rel="next"' not in second


def test_an_htmx_request_gets_only_the_region_it_targets(client_for, operator):
    locks.lock_acquire(name="solo", ttl=60, owner="o")
    response = client_for(operator).get("/locks/", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="locks-holders")
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<div id="locks-holders"')
    assert "<html" not in html
    assert 'data-lock="solo#0"' in html


def test_timers_page_shows_pending_timers_by_due_time_with_filters(client_for, operator):
    timers.timer_schedule(queue="mail", timer_key="late", payload=1, delay=timedelta(hours=2))
    timers.timer_schedule(queue="mail", timer_key="soon", payload=1, delay=timedelta(minutes=1))
    timers.timer_schedule(queue="sms", timer_key="soon-sms", payload=1, delay=timedelta(minutes=2))
    client = client_for(operator)
    html = client.get("/timers/").content.decode()
    assert (
        html.index('data-timer="mail/soon"')
        < html.index('data-timer="sms/soon-sms"')
        < html.index('data-timer="mail/late"')
    )
    only_mail = client.get("/timers/?queue=mail&prefix=so").content.decode()
    assert 'data-timer="mail/soon"' in only_mail
    assert "sms/soon-sms" not in only_mail
    assert "mail/late" not in only_mail
    assert "data-local" in html
    assert " UTC" in html
    assert "/timers/move/?" in html
    assert "/timers/cancel/?" in html
    assert "/timers/fire/?" in html


def test_kv_pages_list_namespaces_keys_and_a_key(client_for, operator):
    kv.kv_put(namespace="config", key="feature.x", value={"on": True}, ttl=None)
    kv.kv_put(namespace="config", key="feature.y", value="text", ttl=300)
    kv.kv_put(namespace="other", key="k", value=1, ttl=None)
    client = client_for(operator)
    index = client.get("/kv/").content.decode()
    assert 'href="/kv/config/"' in index
    assert 'href="/kv/other/"' in index
    keys = client.get("/kv/config/?prefix=feature.y").content.decode()
    assert 'data-key="feature.y"' in keys
    assert 'data-key="feature.x"' not in keys
    assert "data-countdown" in keys
    detail = client.get("/kv/config/key/feature.x")
    assert detail.status_code == 200
    assert "&quot;on&quot;: true" in detail.content.decode()
    assert client.get("/kv/config/key/nope").status_code == 404
    assert client.get("/kv/Bad%20NS/").status_code == 404


def test_lock_rows_in_the_kv_pages_link_to_locks_and_hide_credentials(client_for, operator, pages, distinct_tokens):
    owner = "secret-owner-42:pid-9"
    got = locks.lock_acquire(name="reports", ttl=60, owner=owner)
    client = client_for(operator)
    html = client.get(f"/kv/{kv.LOCKS_NAMESPACE}/").content.decode()
    assert 'href="/locks/?name=reports"' in html
    assert "/kv/queen-locks/edit/" not in html
    assert "/kv/queen-locks/delete/" not in html
    detail = client.get(f"/kv/{kv.LOCKS_NAMESPACE}/key/reports%230")
    assert detail.status_code == 302
    assert detail["Location"] == "/locks/?name=reports"
    edit = client.get(f"/kv/{kv.LOCKS_NAMESPACE}/edit/?key=reports%230")
    assert edit.status_code == 404
    pages.assert_free_of(owner, str(got.token))


def test_audit_page_filters_and_pages_newest_first(client_for, operator, settings):
    from django.db import transaction

    from queenadmin.domain.audit import Who
    from queenadmin.domain.clock import now

    settings.QUEENADMIN_DASHBOARD_PAGE_SIZE = 2
    with transaction.atomic():
        for i in range(3):
            Who("ann", f"r{i}").record_in_txn(now=now(), action="timer.cancel", target=f"q/k{i}")
        Who("bob").record_in_txn(now=now(), action="lock.release", target="l#0")
    client = client_for(operator)
    first = client.get("/audit/?actor=ann").content.decode()
    assert "q/k2" in first
    assert "q/k1" in first
    assert "q/k0" not in first
    assert "l#0" not in first
    older = first.split('rel="next"')[0].rsplit('href="', 1)[1].split('"')[0].replace("&amp;", "&")
    second = client.get(older).content.decode()
    assert "q/k0" in second
    assert "q/k2" not in second
    assert AuditEntry.objects.count() == 4


def _queries(client, path: str) -> int:
    with CaptureQueriesContext(connection) as seen:
        assert client.get(path).status_code == 200
    return len(seen.captured_queries)


@pytest.mark.parametrize(
    ("path", "grow"),
    [
        ("/locks/", lambda i: locks.lock_acquire(name=f"grow.{i}", ttl=60, owner=f"o{i}", limit=2)),
        ("/locks/?prefix=grow.", lambda i: locks.lock_acquire(name=f"grow.{i}", ttl=60, owner=f"o{i}")),
        (
            "/timers/",
            lambda i: timers.timer_schedule(
                queue=f"q{i % 3}", timer_key=f"k{i}", payload=i, delay=timedelta(minutes=i + 1)
            ),
        ),
        ("/kv/", lambda i: kv.kv_put(namespace=f"ns{i}", key=f"k{i}", value=i, ttl=None)),
        ("/kv/grow/", lambda i: kv.kv_put(namespace="grow", key=f"k{i}", value={"i": i}, ttl=60)),
        ("/audit/", lambda i: kv.kv_put(namespace="x", key=f"k{i}", value=i, ttl=None)),
    ],
)
def test_query_count_does_not_grow_with_the_data(client_for, operator, settings, django_assert_num_queries, path, grow):
    """A page costs the same number of queries with 3 rows as with 60 (more
    than a page of them)."""
    settings.QUEENADMIN_DASHBOARD_PAGE_SIZE = 25
    client = client_for(operator)
    for i in range(3):
        grow(i)
    few = _queries(client, path)
    for i in range(3, 60):
        grow(i)
    with django_assert_num_queries(few):
        client.get(path)


def test_no_raw_owner_or_token_in_any_page_partial_form_or_outcome(
    client_for, operator, viewer, pages, distinct_tokens
):
    """Every page, region, confirmation and outcome a lock can appear on,
    for an operator and a viewer, is free of its raw owner and tokens."""
    owners = ["grep-owner-a:pid-111", "grep-owner-b:pid-222"]
    got = [locks.lock_acquire(name="grep.lock", ttl=120, owner=o, limit=2) for o in owners]
    renewed = locks.lock_renew(name="grep.lock", token=got[0].token, ttl=timedelta(seconds=120), slot=got[0].slot)
    tokens = [str(g.token) for g in got] + [str(renewed.token)]
    for user in (operator, viewer):
        client = client_for(user)
        for path in ("/locks/", "/locks/?prefix=grep", "/locks/?name=grep.lock", "/kv/", f"/kv/{kv.LOCKS_NAMESPACE}/"):
            client.get(path)
        client.get("/locks/", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="locks-holders")
        client.get(f"/kv/{kv.LOCKS_NAMESPACE}/", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="kv-keys")
    client = client_for(operator)
    from queenadmin.domain.locks.operator import lease_mark

    holder = locks.lock_holders(name="grep.lock").holders[0]
    form = {"name": "grep.lock", "slot": holder.slot, "lease": lease_mark(owner=holder.owner, since=holder.since)}
    client.get("/locks/release/", form, HTTP_HX_REQUEST="true")
    client.post("/locks/release/", form | {"lease": "stale"}, HTTP_HX_REQUEST="true")
    client.post("/locks/release/", form, HTTP_HX_REQUEST="true")
    client.get("/audit/")
    assert len(pages.seen) >= 16
    pages.assert_free_of(*owners, *tokens)


def test_the_queue_page_shows_priority_and_each_groups_conflation_policy(client_for, viewer):
    """The queue page says the queue's priority and, per consumer group, its stored delivery policy."""
    from queenadmin.domain import queues

    options = queues.QueueOptions((("priority", 7),))
    queues.queue_configure(request=queues.ConfigureRequest("prio.q", options=options))
    queues.queue_push(items=[queues.PushItem("prio.q", "Default", "1"), queues.PushItem("prio.q", "Default", "2")])
    queues.queue_claim(request=queues.PopRequest(queue="prio.q", group="latest", conflation=True))
    queues.queue_claim(request=queues.PopRequest(queue="prio.q", group="every"))
    html = client_for(viewer).get("/queues/prio.q/").content.decode()
    assert '<span class="mono" id="queue-priority">7</span>' in html
    rows = {row.split("</td>")[0].rsplit(">", 1)[-1]: row for row in html.split('<td class="mono">')[1:]}
    assert "newest only (conflation)" in rows["latest"]
    assert "every message" in rows["every"]
    assert "newest only" not in rows["every"]
