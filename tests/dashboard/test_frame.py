"""What every page's frame gives (titles, skip link, theme toggle), the
small things an operator trips over (lock filter, search, semaphores, audit
times), and the 403, 404 and 500 pages drawn in that frame."""

from __future__ import annotations

import html
import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client

from queenadmin.dashboard.views import errors
from queenadmin.domain import kv, locks, timers
from queenadmin.domain.audit import Who
from queenadmin.domain.kv.operator import kv_operator_edit
from queenadmin.domain.search import LIMIT
from queenadmin.templatetags.dashboard import with_times

pytestmark = pytest.mark.django_db

PAGES = [
    "/",
    "/queues/",
    "/locks/",
    "/timers/",
    "/kv/",
    "/kv/config/",
    "/kv/config/key/feature.x",
    "/audit/",
    "/ephemeral/",
    "/consumers/",
    "/attention/thresholds/",
    "/search/?q=feature",
]


def _title(page: str) -> str:
    found = re.search(r"<title>(.*?)</title>", page, re.S)
    assert found, "no <title>"
    return html.unescape(found.group(1)).strip()


@pytest.mark.parametrize("path", PAGES)
def test_every_page_names_the_product_once_in_its_title(client_for, operator, settings, path):
    settings.QUEENADMIN_ENVIRONMENT_NAME = "staging"
    kv.kv_put(namespace="config", key="feature.x", value=1, ttl=None)
    title = _title(client_for(operator).get(path).content.decode())
    assert title.count("queenadmin") == 1, title
    assert title.endswith(" · queenadmin · staging"), title
    assert not title.startswith("·"), title


def test_the_login_page_names_the_product_once_too(client_for):
    assert _title(client_for(None).get("/login/").content.decode()) == "Log in · queenadmin · development"


def test_the_first_thing_to_tab_to_skips_to_the_main_content(client_for, operator):
    page = client_for(operator).get("/locks/").content.decode()
    body = page[page.index("<body") :]
    first_link = re.search(r"<a [^>]*>", body)
    assert first_link is not None
    assert 'href="#main"' in first_link.group(), first_link.group()
    assert '<main id="main" tabindex="-1">' in page


def test_the_theme_toggle_is_the_admins_so_the_choice_is_shared(client_for, operator):
    """Django admin's theme.js keeps the choice in localStorage "theme"; the
    dashboard loads the same script, in <head> so no page flashes light."""
    page = client_for(operator).get("/").content.decode()
    head = page[: page.index("</head>")]
    assert re.search(r'<script src="[^"]*admin/js/theme\.js">', head)
    assert '<button type="button" class="theme-toggle"' in page
    for mode in ("auto", "light", "dark"):
        assert f"Toggle theme (current theme: {mode})" in page


def test_the_lock_filter_shows_the_name_a_link_arrived_with(client_for, operator):
    locks.lock_acquire(name="jobs.nightly", ttl=60, owner="w1")
    page = client_for(operator).get("/locks/", {"name": "jobs.nightly"}).content.decode()
    assert '<input type="search" name="prefix" value="jobs.nightly"' in page


def test_the_lock_filter_keeps_a_typed_prefix(client_for, operator):
    page = client_for(operator).get("/locks/", {"prefix": "jobs."}).content.decode()
    assert '<input type="search" name="prefix" value="jobs."' in page


def _permits_cell(page: str, name: str) -> str:
    row = re.search(rf'<tr data-lock="{re.escape(name)}#\d+">(.*?)</tr>', page, re.S)
    assert row, f"no row of {name}"
    cell = re.search(r"<td[^>]*data-permits>(.*?)</td>", row.group(1), re.S)
    assert cell, "no permits cell"
    return re.sub(r"<[^>]+>", "", cell.group(1)).strip()


def test_a_semaphore_row_shows_its_limit_as_far_as_its_slots_show(client_for, operator):
    for owner in ("r1", "r2", "r3"):
        assert locks.lock_acquire(name="report.render", ttl=60, owner=owner, limit=3).acquired
    locks.lock_acquire(name="jobs.nightly", ttl=60, owner="w1")
    page = client_for(operator).get("/locks/").content.decode()
    assert _permits_cell(page, "report.render") == "3 · limit ≥3"
    assert _permits_cell(page, "jobs.nightly") == "1"


def test_a_kv_search_result_opens_the_key(client_for, viewer):
    kv.kv_put(namespace="config", key="feature x/1", value=1, ttl=None)
    page = client_for(viewer).get("/search/", {"q": "feature"}).content.decode()
    assert 'href="/kv/config/key/feature%20x~2F1"' in page
    assert "?prefix=" not in page


def test_search_results_cut_at_the_limit_say_so(client_for, viewer):
    kv.kv_call([kv.KVPut("config", f"feature.{i:02d}", "1", None) for i in range(LIMIT + 3)])
    page = client_for(viewer).get("/search/", {"q": "feature."}).content.decode()
    assert page.count('href="/kv/config/key/feature.') == LIMIT
    notice = re.search(r'<tr class="capped" data-capped="kv">(.*?)</tr>', page, re.S)
    assert notice, "no notice that more may match"
    assert f"The first {LIMIT} KV keys are shown; more may match." in notice.group(1)


def test_search_results_under_the_limit_say_nothing_more(client_for, viewer):
    kv.kv_call([kv.KVPut("config", f"feature.{i:02d}", "1", None) for i in range(LIMIT - 1)])
    page = client_for(viewer).get("/search/", {"q": "feature."}).content.decode()
    assert page.count('href="/kv/config/key/feature.') == LIMIT - 1
    assert 'class="capped"' not in page


# -- audit times ----------------------------------------------------------------------


def test_instants_in_text_show_as_utc_times_and_the_rest_is_escaped():
    shown = with_times("due 2026-11-30T19:04:42.123456Z, <b>message</b> m-1 at 2026-11-30T20:00:00+01:00")
    assert shown == (
        'due <time datetime="2026-11-30T19:04:42.123Z">2026-11-30 19:04:42 UTC</time>, '
        "&lt;b&gt;message&lt;/b&gt; m-1 at "
        '<time datetime="2026-11-30T19:00:00.000Z">2026-11-30 19:00:00 UTC</time>'
    )


def test_text_without_instants_is_only_escaped():
    assert with_times("released; the <token> is dead") == "released; the &lt;token&gt; is dead"
    assert with_times("2026-13-45T99:00:00Z") == "2026-13-45T99:00:00Z"


def test_the_audit_trail_shows_a_keys_expiry_as_a_time(client_for, operator):
    kv.kv_put(namespace="config", key="feature.x", value=1, ttl=None)
    version = kv.kv_get(namespace="config", key="feature.x").version
    assert kv_operator_edit(
        namespace="config", key="feature.x", value=2, expect=version, expiry=timedelta(hours=2), who=Who("otto")
    ).applied
    page = client_for(operator).get("/audit/").content.decode()
    after = re.search(r'until <time datetime="([^"]+)">([^<]+)</time>', page)
    assert after, "the expiry is not shown as a time"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", after.group(2))
    assert not re.search(r"until \d{4}-\d\d-\d\dT", page)


def test_the_audit_trail_shows_a_timer_moves_due_time_as_a_time(client_for, operator):
    from queenadmin.domain.timers.operator import SeenTimer, timer_operator_action

    timers.timer_schedule(queue="mail", timer_key="welcome-1", payload={"to": 1}, delay=timedelta(minutes=5))
    (row,) = timers.timers_pending(queue="mail").rows
    seen = SeenTimer(
        queue="mail", timer_key="welcome-1", message_id=row.message_id, txn=row.txn, partition=row.partition
    )
    assert timer_operator_action(verb="move", seen=seen, who=Who("otto"), by=timedelta(minutes=15)).done
    page = client_for(operator).get("/audit/").content.decode()
    cells = re.search(r'<tr data-entry="\d+">(.*?)</tr>', page, re.S)
    assert cells
    assert re.search(r'due <time datetime="[^"]+">\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC</time>', cells.group(1))


# -- error pages ------------------------------------------------------------------------


def test_a_signed_in_user_who_is_not_staff_gets_an_explanation_and_a_log_out(client_for, outsider):
    response = client_for(outsider).get("/")
    page = response.content.decode()
    assert response.status_code == 403
    assert 'class="topbar"' in page
    assert "which is not a staff account" in page
    assert re.search(r'<form method="post" action="/logout/">\s*<input type="hidden" name="csrfmiddlewaretoken"', page)
    assert _title(page) == "Not allowed · queenadmin · development"


def test_staff_without_the_permission_are_told_which_one(client_for, db):
    staff = User.objects.create_user("sam", password="pw", is_staff=True)
    response = client_for(staff).get("/locks/")
    page = response.content.decode()
    assert response.status_code == 403
    assert "lacks the permission" in page
    assert "queenadmin.view_kventry" in page


def test_an_action_refused_to_an_anonymous_user_offers_the_login_page(client_for):
    response = client_for(None).post("/locks/release/", {"name": "x", "slot": "0"})
    page = response.content.decode()
    assert response.status_code == 403
    assert 'href="/login/?next=/locks/release/"' in page


def test_a_missing_queue_is_a_styled_404_that_says_what_is_missing(client_for, viewer):
    response = client_for(viewer).get("/queues/nosuchqueue/")
    page = response.content.decode()
    assert response.status_code == 404
    assert 'class="topbar"' in page
    assert "Nothing here" in page
    assert "no queue nosuchqueue" in page
    assert 'action="/search/"' in page


def test_an_unknown_path_is_a_styled_404_without_the_url_patterns(client_for, viewer):
    response = client_for(viewer).get("/no/such/page/")
    page = response.content.decode()
    assert response.status_code == 404
    assert "Nothing here" in page
    assert "/no/such/page/" in page
    assert "tried" not in page
    assert "dashboard:" not in page


def test_api_errors_keep_their_json_envelope(client_for, viewer):
    response = client_for(viewer).get("/api/v1/no/such/route")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["code"] == "no_such_route"


def test_a_crash_is_a_styled_500(monkeypatch, viewer):
    from queenadmin.dashboard.views import search

    def broken(**kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(search, "search", broken)
    client = Client(raise_request_exception=False)
    client.force_login(viewer)
    response = client.get("/search/", {"q": "x"})
    page = response.content.decode()
    assert response.status_code == 500
    assert 'class="topbar"' in page
    assert "Something failed on the server" in page
    assert "boom" not in page


def test_a_crash_under_api_keeps_djangos_plain_500(rf):
    response = errors.server_error(rf.get("/api/v1/kv"))
    assert response.status_code == 500
    assert 'class="topbar"' not in response.content.decode()


def test_the_404_and_403_pages_leave_api_paths_alone(rf):
    from django.core.exceptions import PermissionDenied
    from django.http import Http404

    assert 'class="topbar"' not in errors.not_found(rf.get("/api/v1/x"), Http404("x")).content.decode()
    assert 'class="topbar"' not in errors.forbidden(rf.get("/api/v1/x"), PermissionDenied()).content.decode()
