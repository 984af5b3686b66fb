"""The nav is the page registry (``pages.NAV``): each page it declares, in
its order, under its title, for whoever may see it, and nothing else."""

from __future__ import annotations

import html
import re

import pytest
from django.urls import reverse

from queenadmin.dashboard.pages import NAV, PAGES
from queenadmin.dashboard.permissions import VIEW

pytestmark = pytest.mark.django_db


def nav_of(page: str) -> list[tuple[str, str, bool]]:
    """The nav's links: (href, text, marked current)."""
    found = re.search(r'<nav class="nav" aria-label="Sections">(.*?)</nav>', page, re.DOTALL)
    assert found, "no nav on the page"
    return [
        (html.unescape(href), html.unescape(text), bool(current))
        for href, current, text in re.findall(r'<a href="([^"]*)"( aria-current="page")?>([^<]*)</a>', found.group(1))
    ]


def registry_for(user) -> list[tuple[str, str]]:
    return [
        (reverse(page.url_name), page.title)
        for page in NAV
        if page.permission is None or user.has_perm(VIEW[page.permission])
    ]


def test_an_operator_sees_every_page_of_the_registry(client_for, operator):
    """An operator's nav is every page of the registry, in its order."""
    links = nav_of(client_for(operator).get("/").content.decode())
    assert [(href, text) for href, text, _ in links] == [(reverse(p.url_name), p.title) for p in NAV]


def test_a_viewer_sees_the_registrys_pages_it_may_view(client_for, viewer):
    """A viewer's nav is the registry less the pages it lacks the permission
    for (API tokens)."""
    links = nav_of(client_for(viewer).get("/").content.decode())
    assert [(href, text) for href, text, _ in links] == registry_for(viewer)
    assert reverse("dashboard:tokens") not in [href for href, _, _ in links]


def test_someone_signed_out_sees_only_the_pages_without_a_permission(client_for):
    """The login page's nav holds only the pages that ask for no permission."""
    links = nav_of(client_for(None).get(reverse("dashboard:login")).content.decode())
    assert [(href, text) for href, text, _ in links] == [
        (reverse(p.url_name), p.title) for p in NAV if p.permission is None
    ]


@pytest.mark.parametrize("nav_page", [p for p in NAV if p.url_name.startswith("dashboard:")], ids=lambda p: p.title)
def test_each_page_marks_itself_current_and_nothing_else(client_for, operator, nav_page):
    """On each page of the nav, its own link and no other is the current one."""
    response = client_for(operator).get(reverse(nav_page.url_name))
    assert response.status_code == 200
    current = [text for _, text, marked in nav_of(response.content.decode()) if marked]
    assert current == [nav_page.title]


def test_the_registry_declares_each_page_once_with_a_known_permission():
    """Each page of the nav is declared once, reverses, and needs a view
    permission of ``permissions.VIEW`` (or none)."""
    assert len({page.url_name for page in NAV}) == len(NAV)
    assert len({page.key for page in NAV}) == len(NAV)
    for page in NAV:
        assert reverse(page.url_name)
        assert page.permission is None or page.permission in VIEW, page


def test_every_live_page_marks_a_page_of_the_nav():
    """A live page marks the nav entry it belongs to (``page.nav``, else its
    permission), and a page of the nav that is live needs the nav's
    permission."""
    keys = {page.key: page for page in NAV}
    for live_page in PAGES.values():
        assert (live_page.nav or live_page.permission) in keys, live_page.name
        if live_page.name in keys:
            assert keys[live_page.name].permission == live_page.permission, live_page.name
