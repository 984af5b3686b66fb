"""A queue's settings, a new queue and a pushed message, in a real browser
on a phone: the forms in the page's dialog, a refusal beside its field (and
still no axe finding), each effect checked through the API afterwards."""

from __future__ import annotations

import os
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import api, shot
from tests.browser.test_every_page import AXE, SIZES, _violations

pytestmark = pytest.mark.live


def _phone(browser: Any, server: Any, user: str) -> tuple[Any, Any]:
    context = browser.new_context(viewport=SIZES["phone"], timezone_id="Europe/Paris")
    if AXE.exists():
        context.add_init_script(path=str(AXE))
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.goto(f"{server.url}/login/")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", "pw")
    page.click("button[type=submit]")
    page.wait_for_url(f"{server.url}/")
    return context, page


def _fits(page: Any) -> None:
    scroll, width = page.evaluate("[document.documentElement.scrollWidth, innerWidth]")
    assert scroll <= width, f"{scroll} px wide in a {width} px window"
    if AXE.exists() or os.environ.get("CI"):
        assert _violations(page) == []


def test_edit_a_queues_settings_on_a_phone(browser, dash):
    with api(dash) as client:
        assert (
            client.post("/api/v1/configure", json={"queue": "set-q", "options": {"retryLimit": 7}}).status_code == 200
        )
    context, page = _phone(browser, dash, "otto")
    try:
        page.goto(f"{dash.url}/queues/set-q/")
        expect(page.locator('#queue-settings tr[data-option="retryLimit"][data-differs]')).to_be_attached()
        page.locator("#queue-settings").get_by_text("Edit settings…").click()
        dialog = page.locator("#dialog")
        expect(dialog.locator("#dialog-title")).to_contain_text("Settings of set-q")
        dialog.locator("input[name=option-leaseTime]").fill("soon")
        dialog.locator("textarea[name=reason]").fill("slow renderer")
        dialog.get_by_role("button", name="Apply to set-q").click()
        error = dialog.locator("#option-leaseTime-error")
        expect(error).to_have_text("option leaseTime must be an integer")
        expect(dialog.locator("input[name=option-leaseTime]")).to_have_attribute("aria-invalid", "true")
        shot(page, "queue-settings-refused-phone")
        _fits(page)
        dialog.locator("input[name=option-leaseTime]").fill("45")
        # Replace: what is left blank goes back to its default.
        dialog.locator("input[name=option-retryLimit]").fill("")
        dialog.get_by_label("Replace").check()
        dialog.get_by_role("button", name="Apply to set-q").click()
        expect(dialog.locator("#action-outcome")).to_contain_text("Changed 2 settings (replaced")
        # The table behind the dialog is current without a reload.
        expect(page.locator('#queue-settings tr[data-option="leaseTime"][data-differs]')).to_contain_text("45")
        expect(page.locator('#queue-settings tr[data-option="retryLimit"]:not([data-differs])')).to_be_attached()
    finally:
        context.close()
    with api(dash) as client:
        options = client.get("/api/v1/resources/queues/set-q").json()["options"]
    assert (options["leaseTime"], options["retryLimit"]) == (45, 3)


def test_create_a_queue_then_push_a_message_into_it(browser, dash):
    context, page = _phone(browser, dash, "otto")
    try:
        page.goto(f"{dash.url}/queues/")
        page.get_by_text("Create a queue…").click()
        dialog = page.locator("#dialog")
        dialog.locator("input[name=name]").fill("made-here")
        dialog.locator("input[name=option-priority]").fill("5")
        dialog.get_by_role("button", name="Create the queue").click()
        expect(dialog.locator("#action-outcome")).to_contain_text("Created made-here")
        expect(page.locator("#queue-table")).to_contain_text("made-here")
        page.goto(f"{dash.url}/queues/made-here/")
        page.get_by_text("Push a message…").click()
        dialog.locator("textarea[name=payload]").fill('{"order": 42')
        dialog.get_by_role("button", name="Push to made-here").click()
        expect(dialog.locator("#push-payload-error")).to_contain_text("payload is not JSON")
        _fits(page)
        dialog.locator("textarea[name=payload]").fill('{"order": 42}')
        dialog.locator("input[name=transactionId]").fill("from-the-dashboard")
        dialog.get_by_role("button", name="Push to made-here").click()
        expect(dialog.locator("#action-outcome")).to_contain_text("Pushed to made-here")
        shot(page, "queue-push-done-phone")
        expect(page.locator("#queue-messages")).to_contain_text("from-the-dashboard")
    finally:
        context.close()
    with api(dash) as client:
        assert client.get("/api/v1/resources/queues/made-here").json()["options"]["priority"] == 5
        body = client.get("/api/v1/pop/queue/made-here", params={"wait": "false"}).json()
    (message,) = body["messages"]
    assert (message["data"], message["transactionId"], message["producerSub"]) == (
        {"order": 42},
        "from-the-dashboard",
        "otto",
    )
