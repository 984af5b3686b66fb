"""The dashboard in a real browser against a real ``serve``: live updates,
actions through the UI checked through the API, CAS conflicts, viewers,
and the connection badge across a server restart."""

from __future__ import annotations

import base64
import json
import re
from datetime import datetime, timedelta

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import add_users, api, restarted, shot, start_dashboard_server

pytestmark = pytest.mark.live


def _acquire(server, name: str, owner: str, ttl: int = 30) -> dict:
    body = {"operations": [{"op": "acquire", "name": name, "ttlSeconds": ttl, "owner": owner}]}
    with api(server) as client:
        answer = client.post("/api/v1/locks", json=body)
    assert answer.status_code == 200, answer.text
    (result,) = answer.json()["results"]
    assert result["acquired"] is True
    return result


def _schedule(server, queue: str, key: str, minutes: int) -> dict:
    payload = base64.b64encode(json.dumps({"key": key}).encode()).decode()
    op = {
        "op": "schedule",
        "queue": queue,
        "timerKey": key,
        "txn": f"tx-{key}",
        "delayMs": minutes * 60_000,
        "payload": payload,
    }
    with api(server) as client:
        answer = client.post("/api/v1/timers", json={"operations": [op]})
    assert answer.status_code == 200, answer.text
    return answer.json()["results"][0]


def _peek(server, queue: str, key: str) -> dict:
    with api(server) as client:
        return client.get(f"/api/v1/timers/{queue}/{key}").json()


def _when(iso: str) -> datetime:
    return datetime.fromisoformat(iso.replace("Z", "+00:00"))


def test_log_in_and_watch_a_lock_appear_and_count_down(dash, login, seen):
    page = login(dash, "otto")
    page.goto(f"{dash.url}/locks/")
    expect(page.locator("#live-badge")).to_have_text("live")
    row = page.locator('tr[data-lock="browser.watch#0"]')
    expect(row).to_have_count(0)
    owner = "watch-worker:pid-4242"
    got = _acquire(dash, "browser.watch", owner, ttl=45)
    expect(row).to_have_count(1)
    countdown = row.locator("time[data-countdown]")
    expect(countdown).to_have_text(re.compile(r"^\d+s$"))
    first = countdown.inner_text()
    expect(countdown).not_to_have_text(first)
    assert int(countdown.inner_text().rstrip("s")) < int(first.rstrip("s"))
    expect(row.locator("[data-lease-state]")).to_have_text("held")
    shot(page, "locks-live")
    row.get_by_role("link", name="Force release").click()
    expect(page.locator("#dialog")).to_contain_text("fencing token dies")
    shot(page, "locks-force-release-confirm")
    page.locator("#dialog button[type=submit]").click()
    expect(page.locator("#dialog")).to_contain_text("Released")
    expect(row).to_have_count(0)
    shot(page, "locks-force-release-done")
    seen.keep(page)
    seen.assert_free_of(owner, str(got["token"]))


def test_cancel_a_timer_and_move_another_then_verify_through_the_api(dash, login):
    _schedule(dash, "browser-q", "cancel-me", 30)
    moved = _schedule(dash, "browser-q", "move-me", 40)
    page = login(dash, "otto")
    page.goto(f"{dash.url}/timers/?queue=browser-q")
    expect(page.locator("#live-badge")).to_have_text("live")
    shot(page, "timers")
    page.locator('tr[data-timer="browser-q/cancel-me"]').get_by_role("link", name="Cancel", exact=True).click()
    expect(page.locator("#dialog")).to_contain_text("its message is never appended")
    page.locator("#dialog button[type=submit]").click()
    expect(page.locator("#dialog")).to_contain_text("Cancelled")
    page.locator("#dialog").get_by_role("button", name="Close").click()
    expect(page.locator('tr[data-timer="browser-q/cancel-me"]')).to_have_count(0)
    page.locator('tr[data-timer="browser-q/move-me"]').get_by_role("link", name="Move", exact=True).click()
    page.locator("#dialog").get_by_role("button", name="+15m").click()
    expect(page.locator("#dialog input[name=when]")).to_have_value("+15m")
    shot(page, "timers-move-confirm")
    page.locator("#dialog").get_by_role("button", name="Move the timer").click()
    expect(page.locator("#dialog")).to_contain_text("it is now due")
    shot(page, "timers-move-done")
    assert _peek(dash, "browser-q", "cancel-me")["found"] is False
    after = _peek(dash, "browser-q", "move-me")
    assert _when(after["deliverAt"]) - _when(moved["deliverAt"]) == timedelta(minutes=15)


def test_edit_a_kv_value_and_lose_a_cas_race_visibly(dash, login):
    with api(dash) as client:
        client.put("/api/v1/kv/browser/greeting", json={"value": {"text": "hello"}, "forever": True})
    page = login(dash, "otto")
    page.goto(f"{dash.url}/kv/browser/")
    expect(page.locator("#live-badge")).to_have_text("live")
    page.locator('tr[data-key="greeting"]').get_by_role("link", name="Edit", exact=True).click()
    editor = page.locator("#dialog textarea[name=value]")
    editor.fill('{"text": "bonjour"}')
    with api(dash) as client:
        client.put("/api/v1/kv/browser/greeting", json={"value": {"text": "hola"}, "forever": True})
    page.locator("#dialog button[type=submit]").click()
    expect(page.locator("#dialog")).to_contain_text("the key moved")
    expect(page.locator("#dialog [data-current-value]")).to_contain_text("hola")
    shot(page, "kv-cas-conflict")
    with api(dash) as client:
        assert client.get("/api/v1/kv/browser/greeting").json()["value"] == {"text": "hola"}
    page.locator("#dialog").get_by_role("button", name=re.compile("Save mine over version")).click()
    expect(page.locator("#dialog")).to_contain_text("Saved")
    with api(dash) as client:
        assert client.get("/api/v1/kv/browser/greeting").json()["value"] == {"text": "bonjour"}
    page.goto(f"{dash.url}/audit/")
    expect(page.locator("table.audit")).to_contain_text("kv.edit")
    shot(page, "audit")


def test_every_page_looks_right_to_an_operator(dash, login, seen):
    owner = "shot-worker:pid-1"
    got = _acquire(dash, "shots.lock", owner, ttl=600)
    _schedule(dash, "shots", "reminder-1", 5)
    with api(dash) as client:
        client.put("/api/v1/kv/shots/config", json={"value": {"on": True, "rollout": 0.5}, "forever": True})
    page = login(dash, "otto")
    for name, path in [
        ("locks", "/locks/"),
        ("timers", "/timers/"),
        ("kv", "/kv/"),
        ("kv-namespace", "/kv/shots/"),
        ("kv-key", "/kv/shots/key/config"),
        ("kv-lock-permits", "/kv/queen-locks/"),
        ("audit", "/audit/"),
    ]:
        page.goto(f"{dash.url}{path}")
        expect(page.locator("main h1")).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280, f"{path} scrolls sideways"
        page.wait_for_timeout(300)
        shot(page, f"operator-{name}")
        seen.keep(page)
    page.goto(f"{dash.url}/kv/shots/")
    page.locator('tr[data-key="config"]').get_by_role("link", name="Edit", exact=True).click()
    expect(page.locator("#dialog textarea[name=value]")).to_be_visible()
    shot(page, "kv-edit-dialog")
    seen.assert_free_of(owner, str(got["token"]))


def test_a_viewer_has_no_buttons(dash, login):
    _acquire(dash, "viewer.lock", "v-owner", ttl=600)
    _schedule(dash, "viewer-q", "t", 10)
    with api(dash) as client:
        client.put("/api/v1/kv/viewer/k", json={"value": 1, "forever": True})
    page = login(dash, "vera")
    for name, path in [("locks", "/locks/"), ("timers", "/timers/"), ("kv", "/kv/viewer/"), ("audit", "/audit/")]:
        page.goto(f"{dash.url}{path}")
        expect(page.locator("#live-badge")).to_have_text("live")
        expect(page.locator(".role")).to_have_text("read-only")
        # A visible row: /timers/ has its chart's counts in a closed <details> before the list.
        expect(page.locator("main tbody tr >> visible=true").first).to_be_visible()
        expect(page.locator("main .btn-danger, main td.actions a, main td.actions button")).to_have_count(0)
        shot(page, f"viewer-{name}")
    answer = page.request.post(f"{dash.url}/locks/release/", form={"name": "viewer.lock", "slot": "0"})
    assert answer.status == 403


def test_the_badge_goes_to_reconnecting_when_the_server_stops_and_back_to_live(login, seen):
    with start_dashboard_server() as server:
        add_users(server)
        page = login(server, "otto")
        # A clock the test can move: "stale since" comes after 30 s down.
        page.clock.install()
        page.goto(f"{server.url}/locks/")
        badge = page.locator("#live-badge")
        expect(badge).to_have_text("live")
        server.process.terminate()
        server.process.wait(timeout=15)
        expect(badge).to_have_attribute("data-state", "reconnecting")
        expect(badge).to_have_text(re.compile("reconnecting"))
        shot(page, "badge-reconnecting")
        page.clock.fast_forward("00:31")
        expect(badge).to_have_attribute("data-state", "stale")
        expect(badge).to_have_text(re.compile(r"^stale since \d\d:\d\d:\d\d UTC$"))
        shot(page, "badge-stale")
        with restarted(server):
            # The socket's next retry is up to 4 s away on the page's clock:
            # run the clock to it instead of waiting.
            page.clock.fast_forward("00:05")
            expect(badge).to_have_text("live", timeout=30_000)
            owner = "after-restart:pid-9"
            _acquire(server, "after.restart", owner)
            expect(page.locator('tr[data-lock="after.restart#0"]')).to_have_count(1)
            shot(page, "badge-live-again")
            seen.keep(page)
        seen.assert_free_of(owner)
