"""The Django admin in a real browser against a real ``serve``: log in,
cancel a timer, replay a dead letter and revoke a token, each checked
through the API afterwards."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import api, shot
from tests.conftest import LiveServer

pytestmark = pytest.mark.live


@pytest.fixture
def server(dash: LiveServer) -> LiveServer:
    return dash


def _admin_login(browser: Any, server: Any, user: str) -> Any:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.goto(f"{server.url}/admin/login/?next=/admin/")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", "pw")
    page.click("input[type=submit]")
    page.wait_for_url(f"{server.url}/admin/")
    shot(page, "admin-index")
    return page


def _act(page: Any, row_text: str, action: str, reason: str, **fields: str) -> None:
    """Tick the row showing ``row_text``, run ``action``, give the reason."""
    page.locator("#result_list tr", has_text=row_text).locator("input.action-select").check()
    page.select_option("select[name=action]", action)
    page.click("button[name=index]")
    page.fill("textarea[name=reason]", reason)
    for name, value in fields.items():
        page.fill(f"input[name={name}]", value)
    shot(page, f"admin-{action}-confirm")
    page.click("input[name=apply]")


def test_cancel_a_timer_from_the_admin(server, browser):
    payload = base64.b64encode(json.dumps({"k": 1}).encode()).decode()
    op = {"op": "schedule", "queue": "adm-q", "timerKey": "adm-cancel", "txn": "tx-adm", "delayMs": 600_000}
    with api(server) as client:
        assert client.post("/api/v1/timers", json={"operations": [{**op, "payload": payload}]}).status_code == 200
    page = _admin_login(browser, server, "otto")
    page.goto(f"{server.url}/admin/queenadmin/timer/?q=adm-cancel")
    _act(page, "adm-cancel", "cancel_timers", "no longer needed")
    expect(page.locator("ul.messagelist")).to_contain_text("Cancelled 1 row.")
    shot(page, "admin-timer-cancelled")
    with api(server) as client:
        assert client.get("/api/v1/timers/adm-q/adm-cancel").json()["found"] is False


def test_replay_a_dead_letter_from_the_admin(server, browser):
    queue = "adm-dlq"
    with api(server) as client:
        assert client.post("/api/v1/configure", json={"queue": queue, "options": {"retryLimit": 0}}).status_code == 200
        assert client.post("/api/v1/push", json={"items": [{"queue": queue, "payload": {"n": 7}}]}).status_code == 201
        popped = client.get(f"/api/v1/pop/queue/{queue}", params={"wait": "false"}).json()
        (message,) = popped["messages"]
        ack = {
            "transactionId": message["transactionId"],
            "partitionId": message["partitionId"],
            "status": "failed",
            "leaseId": popped["leaseId"],
            "error": "boom",
        }
        assert client.post("/api/v1/ack/batch", json={"acknowledgments": [ack]}).json()[0]["dlq"] is True
        assert client.get("/api/v1/dlq", params={"queue": queue}).json()["total"] == 1
    page = _admin_login(browser, server, "otto")
    page.goto(f"{server.url}/admin/queenadmin/deadletter/?queue={queue}")
    _act(page, "boom", "replay", "the bug is fixed")
    expect(page.locator("ul.messagelist")).to_contain_text(
        "Replayed 1 dead letters, for the group that failed each only (transactionId dlq:<id>)."
    )
    with api(server) as client:
        assert client.get("/api/v1/dlq", params={"queue": queue}).json()["total"] == 0
        again = client.get(f"/api/v1/pop/queue/{queue}", params={"wait": "false"}).json()
    assert [m["data"] for m in again["messages"]] == [{"n": 7}]


def test_revoke_a_token_from_the_admin(server, browser):
    page = _admin_login(browser, server, "otto")
    page.goto(f"{server.url}/admin/queenadmin/apitoken/add/")
    page.fill("input[name=name]", "adm-svc")
    # An operator's token names what it reaches (the whole store is a superuser's).
    page.fill("textarea[name=grants]", "queue:adm.*=write")
    page.fill("textarea[name=reason]", "browser test")
    page.click("input[name=_save]")
    secret = page.locator("#new-token").inner_text()
    shot(page, "admin-token-created")
    headers = {"Authorization": f"Bearer {secret}"}
    assert httpx.get(f"{server.url}/api/v1/resources/queues", headers=headers).status_code == 200
    page.goto(f"{server.url}/admin/queenadmin/apitoken/?q=adm-svc")
    assert secret not in page.content()
    _act(page, "adm-svc", "revoke", "rotated")
    expect(page.locator("ul.messagelist")).to_contain_text("Revoked 1 row.")
    shot(page, "admin-token-revoked")
    # A revocation in another process takes effect within the token cache's time.
    deadline = 0
    while httpx.get(f"{server.url}/api/v1/resources/queues", headers=headers).status_code != 401:
        deadline += 1
        assert deadline < 100, "the revoked token still works"
        page.wait_for_timeout(100)
