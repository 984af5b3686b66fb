"""What every page's frame gives (titles, skip link, theme toggle), and the
403, 404 and 500 pages drawn in that frame."""

from __future__ import annotations

import html
import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

from queenadmin.dashboard.views import errors
from queenadmin.domain import kv

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
