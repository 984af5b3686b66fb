"""/timers/ at scale in a real browser: filter by a due range, jump, read the
total and the chart, then cancel and move everything the filter selects,
checked through the API afterwards (issue 26 item 4)."""

from __future__ import annotations

import base64
import re
from datetime import datetime, timedelta

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import api, shot

pytestmark = pytest.mark.live

QUEUE = "bulk-browser"


def _schedule_many(server, queue: str, count: int) -> list[dict]:
    """``count`` timers ``b00``.. of ``queue``, due one a minute from a minute on."""
    ops = [
        {
            "op": "schedule",
            "queue": queue,
            "timerKey": f"b{i:02d}",
            "txn": f"tx-{queue}-{i}",
            "delayMs": (i + 1) * 60_000,
            "payload": base64.b64encode(b'{"n": 1}').decode(),
        }
        for i in range(count)
    ]
    with api(server) as client:
        answer = client.post("/api/v1/timers", json={"operations": ops})
    assert answer.status_code == 200, answer.text
    return answer.json()["results"]


def _peek(server, queue: str, key: str) -> dict:
    with api(server) as client:
        return client.get(f"/api/v1/timers/{queue}/{key}").json()


def _when(iso: str) -> datetime:
    return datetime.fromisoformat(iso.replace("Z", "+00:00"))


def _typed(iso: str) -> str:
    """A due time as an operator types it (UTC, no zone), to the microsecond."""
    return _when(iso).strftime("%Y-%m-%d %H:%M:%S.%f")


def test_filter_jump_then_bulk_cancel_and_move_what_the_filter_selects(dash, login):
    scheduled = _schedule_many(dash, QUEUE, 40)
    _schedule_many(dash, f"{QUEUE}-other", 5)
    page = login(dash, "otto")
    page.goto(f"{dash.url}/timers/")
    form = page.locator("form.filters")
    form.get_by_label("Queue").fill(QUEUE)
    form.get_by_label("Due from").fill(_typed(scheduled[10]["deliverAt"]))
    form.get_by_label("Due before").fill(_typed(scheduled[30]["deliverAt"]))
    form.get_by_role("button", name="Filter").click()
    region = page.locator("#timers-pending")
    expect(region).to_contain_text("20 pending timers match this filter")
    expect(region.locator("svg.chart")).to_be_visible()
    expect(page.locator("tr[data-timer]").first).to_have_attribute("data-timer", f"{QUEUE}/b10")
    # Bookmarkable: the filter is in the address.
    assert "due_from=" in page.url
    assert "due_to=" in page.url
    filtered_url = page.url
    shot(page, "timers-filtered")

    form.get_by_label("Jump to due time").fill(_typed(scheduled[25]["deliverAt"]))
    form.get_by_role("button", name="Filter").click()
    expect(page.locator("tr[data-timer]").first).to_have_attribute("data-timer", f"{QUEUE}/b25")
    expect(region).to_contain_text("Timers 16\u201320 of 20")

    page.goto(filtered_url)
    buckets = region.locator("details.timers-buckets")
    buckets.locator("summary").click()
    buckets.get_by_role("link").nth(5).click()
    expect(page.locator("tr[data-timer]").first).to_have_attribute("data-timer", f"{QUEUE}/b15")
    expect(region).to_contain_text("Timers 6\u201320 of 20")

    page.goto(filtered_url)
    region.get_by_role("link", name="Cancel all 20…").click()
    expect(page.locator("h1")).to_have_text("Cancel 20 timers?")
    page.get_by_label("Reason").fill("campaign withdrawn")
    shot(page, "timers-bulk-cancel-confirm")
    page.get_by_role("button", name="Cancel 20 timers").click()
    expect(page.locator(".flash-success")).to_contain_text("Cancelled 20 timers")
    expect(region).to_contain_text("No pending timer matches this filter")
    shot(page, "timers-bulk-cancel-done")
    for i in (9, 30, 39):
        assert _peek(dash, QUEUE, f"b{i:02d}")["found"] is True
    for i in (10, 20, 29):
        assert _peek(dash, QUEUE, f"b{i:02d}")["found"] is False
    assert _peek(dash, f"{QUEUE}-other", "b04")["found"] is True

    page.goto(f"{dash.url}/timers/?queue={QUEUE}")
    expect(region).to_contain_text("20 pending timers match this filter")
    region.get_by_role("link", name="Move all 20…").click()
    expect(page.locator("h1")).to_have_text("Move 20 timers?")
    page.get_by_role("button", name="+1h").click()
    expect(page.locator("input[name=shift]")).to_have_value("+1h")
    page.get_by_role("button", name="Move 20 timers").click()
    expect(page.locator(".flash-success")).to_contain_text("Moved 20 timers by +1h")
    for i in (0, 9, 30, 39):
        after = _peek(dash, QUEUE, f"b{i:02d}")
        assert _when(after["deliverAt"]) - _when(scheduled[i]["deliverAt"]) == timedelta(hours=1)
    assert _when(_peek(dash, f"{QUEUE}-other", "b00")["deliverAt"]) < _when(scheduled[5]["deliverAt"])

    page.goto(f"{dash.url}/audit/")
    expect(page.locator("table.audit")).to_contain_text("timer.bulk_cancel")
    expect(page.locator("table.audit")).to_contain_text("timer.bulk_move")


def test_a_bad_due_time_is_a_form_error_and_a_viewer_gets_no_bulk_action(dash, login):
    _schedule_many(dash, f"{QUEUE}-view", 3)
    page = login(dash, "vera")
    answer = page.goto(f"{dash.url}/timers/?due_from=next+tuesday")
    assert answer is not None
    assert answer.status == 400
    expect(page.locator("#timers-pending .callout.bad")).to_contain_text("is not a time")
    page.goto(f"{dash.url}/timers/?queue={QUEUE}-view")
    expect(page.locator("#timers-pending")).to_contain_text("3 pending timers match this filter")
    expect(page.get_by_role("link", name=re.compile("all 3"))).to_have_count(0)
    refused = page.goto(f"{dash.url}/timers/bulk/cancel/?queue={QUEUE}-view")
    assert refused is not None
    assert refused.status == 403


def test_an_open_count_table_is_not_redrawn_shut_by_a_push(dash, login):
    """The list is held while the operator uses it (data-hold-while-used): a
    timer scheduled meanwhile does not close the counts they opened; the
    next push after they close it brings the list up to date."""
    queue = f"{QUEUE}-held"
    _schedule_many(dash, queue, 3)
    page = login(dash, "otto")
    page.goto(f"{dash.url}/timers/?queue={queue}")
    expect(page.locator("#live-badge")).to_have_text("live")
    buckets = page.locator("#timers-pending details.timers-buckets")
    buckets.locator("summary").click()
    expect(buckets).to_have_attribute("open", "")
    rows = page.locator("#timers-pending tbody tr[data-timer]")
    before = rows.count()
    with api(dash) as client:
        op = {"op": "schedule", "queue": queue, "timerKey": "late", "txn": f"tx-{queue}-late", "delayMs": 3_600_000,
              "payload": base64.b64encode(b"{}").decode()}  # fmt: skip
        assert client.post("/api/v1/timers", json={"operations": [op]}).status_code == 200
    page.wait_for_timeout(1500)
    expect(buckets).to_have_attribute("open", "")
    assert rows.count() == before
    buckets.locator("summary").click()
    with api(dash) as client:
        op["timerKey"], op["txn"] = "later", f"tx-{queue}-later"
        assert client.post("/api/v1/timers", json={"operations": [op]}).status_code == 200
    expect(rows).to_have_count(before + 2)
