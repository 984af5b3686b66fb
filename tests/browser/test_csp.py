"""The Content-Security-Policy in a real browser (server/csp.py): the live
dashboard works under it (the websocket connects, pushes and htmx swaps are
drawn, dialogs open and submit), the admin's scripted pages too, and the
folder's watch (``conftest.CspWatch``) does see a violation when there is
one. Every test of this folder fails on a violation (``_no_csp_violations``)."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import api, shot

pytestmark = pytest.mark.live

BOSS = """
from django.contrib.auth.models import User
User.objects.create_superuser("csp-boss", password="pw")
"""


def _policy(response: Any) -> dict[str, str]:
    value = response.headers["content-security-policy"]
    return dict(part.strip().split(None, 1) for part in value.split(";") if part.strip())


def test_the_live_page_works_under_the_policy(dash, login):
    """The badge goes live over the socket, a pushed lock appears, the
    force-release dialog opens, submits and swaps its answer, all under the
    enforced policy; htmx injected no <style> and evaluates nothing."""
    page = login(dash, "otto")
    response = page.goto(f"{dash.url}/locks/")
    assert _policy(response)["connect-src"] == "'self'"
    assert "content-security-policy-report-only" not in response.headers
    expect(page.locator("#live-badge")).to_have_text("live")
    assert page.evaluate(
        "[htmx.config.includeIndicatorStyles, htmx.config.allowEval, htmx.config.allowScriptTags]"
    ) == [
        False,
        False,
        False,
    ]
    assert page.evaluate("document.querySelectorAll('style, [style]').length") == 0
    with api(dash) as client:
        body = {"operations": [{"op": "acquire", "name": "csp.live", "ttlSeconds": 60, "owner": "csp-worker"}]}
        assert client.post("/api/v1/locks", json=body).json()["results"][0]["acquired"]
    row = page.locator('tr[data-lock="csp.live#0"]')
    expect(row).to_have_count(1)
    row.get_by_role("link", name="Force release").click()
    expect(page.locator("#dialog")).to_contain_text("fencing token dies")
    page.locator("#dialog button[type=submit]").click()
    expect(page.locator("#dialog")).to_contain_text("Released")
    expect(row).to_have_count(0)
    shot(page, "csp-live-locks")


def test_the_kv_open_form_works_without_an_inline_handler(dash, login):
    with api(dash) as client:
        client.put("/api/v1/kv/csp-ns/flag", json={"value": 1, "forever": True})
    page = login(dash, "otto")
    page.goto(f"{dash.url}/kv/")
    page.fill("form[data-kv-open] input[name=ns]", "csp-ns")
    page.fill("form[data-kv-open] input[name=prefix]", "fl")
    page.locator("form[data-kv-open] button[type=submit]").click()
    page.wait_for_url(f"{dash.url}/kv/csp-ns/?prefix=fl")
    expect(page.locator('tr[data-key="flag"]')).to_have_count(1)


def test_the_admins_scripted_pages_work_under_the_policy(dash, browser):
    """Log in, the theme toggle, a change list with its actions, the group
    form's two-box permission picker and the user form's related-object
    links: Django 5.2's admin keeps to the policy."""
    dash.manage("shell", "-c", BOSS)
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        page = context.new_page()
        page.set_default_timeout(15_000)
        response = page.goto(f"{dash.url}/admin/login/?next=/admin/")
        assert _policy(response)["script-src"] == "'self'"
        page.fill("input[name=username]", "csp-boss")
        page.fill("input[name=password]", "pw")
        page.click("input[type=submit]")
        page.wait_for_url(f"{dash.url}/admin/")
        page.locator("button.theme-toggle").first.click()
        page.goto(f"{dash.url}/admin/auth/user/")
        page.locator("#action-toggle").check()
        expect(page.locator(".action-counter")).to_contain_text("selected")
        page.goto(f"{dash.url}/admin/auth/group/add/")
        # SelectFilter2 builds its two boxes and filter from the plain select.
        expect(page.locator("#id_permissions_from")).to_be_attached()
        page.fill("#id_permissions_input", "lock")
        page.goto(f"{dash.url}/admin/auth/user/1/change/")
        expect(page.locator("#id_groups_from")).to_be_attached()
        # The "+" beside a relation opens the add form in a popup, whose
        # answer (popup_response.html) hands the new row back to this page.
        with page.expect_popup() as opened:
            page.locator("#add_id_groups").click()
        popup = opened.value
        popup.fill("input[name=name]", "csp-popup-group")
        with popup.expect_event("close"):
            popup.locator("input[name=_save]").click()
        expect(page.locator("#id_groups_to option", has_text="csp-popup-group")).to_be_attached()
        shot(page, "csp-admin-user")
    finally:
        context.close()


def test_the_watch_sees_violations(dash, browser):
    """Not a vacuous check: an inline style attribute, an inline script and
    an image from another host are each refused and seen."""
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(f"{dash.url}/login/")
        page.evaluate(
            """() => {
                document.body.insertAdjacentHTML("beforeend", '<p style="color: red">styled</p>');
                const script = document.createElement("script");
                script.textContent = "window.ranInline = true";
                document.body.append(script);
                document.body.append(Object.assign(new Image(), {src: "http://elsewhere.invalid/x.png"}));
            }"""
        )
        expect(page.locator("p", has_text="styled")).to_be_attached()
        page.wait_for_timeout(500)
        assert page.evaluate("window.ranInline") is None
        found, browser.violations[:] = list(browser.violations), []
        for directive in ("style-src-attr", "script-src-elem", "img-src"):
            assert any(directive in text for text in found), (directive, found)
    finally:
        context.close()
