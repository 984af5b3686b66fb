"""The overview, queue list and queue pages in a real browser: live depth
after pushes through the API, DLQ replay and purge from the UI checked
through the API, and screenshots of every page of this half."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import api, shot

pytestmark = pytest.mark.live


def _push(server, queue: str, n: int, partition: str = "Default") -> None:
    with api(server) as client:
        items = [{"queue": queue, "partition": partition, "payload": {"i": i}} for i in range(n)]
        answer = client.post("/api/v1/push", json={"items": items})
        assert answer.status_code == 201, answer.text


def _dead_letters(server, queue: str, n: int) -> None:
    """``n`` messages of ``queue`` sent to its DLQ by a ``failed`` ack (retryLimit 0)."""
    with api(server) as client:
        assert client.post("/api/v1/configure", json={"queue": queue, "options": {"retryLimit": 0}}).status_code == 200
        _push(server, queue, n, "p-dead")
        body = client.get(f"/api/v1/pop/queue/{queue}/partition/p-dead", params={"wait": "false", "batch": n}).json()
        acks = [
            {"transactionId": m["transactionId"], "partitionId": m["partitionId"], "status": "failed",
             "leaseId": body["leaseId"], "error": f"boom {i}"}
            for i, m in enumerate(body["messages"])
        ]  # fmt: skip
        results = client.post("/api/v1/ack/batch", json={"acknowledgments": acks, "consumerGroup": None}).json()
        assert [r["dlq"] for r in results] == [True] * n


def _dlq(server, queue: str) -> dict:
    with api(server) as client:
        return client.get("/api/v1/dlq", params={"queue": queue}).json()


def test_overview_and_queue_page_follow_pushes_without_reload(dash, login):
    _push(dash, "live-q", 2)
    page = login(dash, "vera")
    expect(page.locator("#live-badge")).to_have_text("live")
    row = page.locator("#overview-body tr", has=page.locator('a[href="/queues/live-q/"]'))
    expect(row.locator("td").nth(1)).to_have_text("2")
    _push(dash, "live-q", 3)
    expect(row.locator("td").nth(1)).to_have_text("5")

    page.goto(f"{dash.url}/queues/live-q/")
    expect(page.locator("#live-badge")).to_have_text("live")
    claimable = page.locator("#queue-summary .qa-tile").first.locator(".qa-tile-value")
    expect(claimable).to_have_text("5")
    loaded = page.evaluate("performance.timeOrigin")
    _push(dash, "live-q", 4)
    expect(claimable).to_have_text("9")
    expect(page.locator("#queue-messages tbody tr")).to_have_count(9)
    assert page.evaluate("performance.timeOrigin") == loaded, "the page reloaded"


def test_replay_one_dead_letter_from_the_ui(dash, login):
    _dead_letters(dash, "replay-q", 3)
    before = _dlq(dash, "replay-q")
    assert before["total"] == 3
    page = login(dash, "otto")
    page.goto(f"{dash.url}/queues/replay-q/")
    rows = page.locator("#queue-dlq tbody tr")
    expect(rows).to_have_count(3)
    chosen = rows.filter(has_text="boom 1")
    message_id = chosen.locator("td.qa-id").inner_text().strip()
    chosen.locator("input[name=ids]").check()
    page.locator("#queue-dlq").get_by_text("Replay selected…").click()
    page.locator("#queue-dlq input[name=reason]").first.fill("fixed the bug")
    page.locator("#queue-dlq").get_by_role("button", name="Replay selected").click()
    expect(page.locator("#dlq-outcome")).to_contain_text(
        "Replayed 1 dead letter of replay-q, for the group that failed each only (transactionId dlq:<id>)."
    )
    expect(rows).to_have_count(2)
    expect(page.locator("#queue-summary .qa-tile-value.tone-dlq")).to_have_text("2")
    after = _dlq(dash, "replay-q")
    assert after["total"] == 2
    assert message_id not in {m["id"] for m in after["messages"]}
    # The copy is a new message in the same partition, claimable again.
    with api(dash) as client:
        body = client.get("/api/v1/pop/queue/replay-q/partition/p-dead", params={"wait": "false"}).json()
    assert [m["data"] for m in body["messages"]] == [{"i": 1}]
    shot(page, "queue-after-replay")


def test_purge_needs_the_typed_name(dash, login):
    _dead_letters(dash, "purge-q", 2)
    page = login(dash, "otto")
    page.goto(f"{dash.url}/queues/purge-q/")
    dlq = page.locator("#queue-dlq")
    dlq.get_by_text("Purge all that match…").click()
    form = dlq.locator("form", has=page.get_by_role("button", name="Purge", exact=True))
    form.locator("input[name=confirm]").fill("purge-Q")
    form.get_by_role("button", name="Purge", exact=True).click()
    expect(page.locator("#dlq-outcome")).to_contain_text("type the queue name (purge-q) to confirm")
    assert _dlq(dash, "purge-q")["total"] == 2
    dlq.get_by_text("Purge all that match…").click()
    form.locator("input[name=confirm]").fill("purge-q")
    shot(page, "queue-purge-confirmation")
    form.get_by_role("button", name="Purge", exact=True).click()
    outcome = page.locator("#dlq-outcome")
    expect(outcome).to_contain_text("Purged 2 dead letters of purge-q.")
    expect(dlq.locator("tbody tr td.empty")).to_have_text("No dead letters.")
    # The socket's push that follows re-draws the region, not the outcome.
    page.wait_for_timeout(1000)
    expect(outcome).to_contain_text("Purged 2 dead letters of purge-q.")
    assert _dlq(dash, "purge-q") == {"messages": [], "total": 0}


def test_screenshots_of_the_queue_half(dash, login, seen):
    _push(dash, "shots-q", 7)
    _dead_letters(dash, "shots-q", 2)
    page = login(dash, "otto")
    for name, path in [
        ("overview", "/"),
        ("queues", "/queues/"),
        ("queue", "/queues/shots-q/"),
        ("search", "/search/?q=shots"),
    ]:
        page.goto(f"{dash.url}{path}")
        expect(page.locator("main h1, main h2").first).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280, f"{path} scrolls sideways"
        page.wait_for_timeout(300)
        shot(page, f"operator-{name}")
        seen.keep(page)
    assert re.search(r"shots-q", seen.texts[-1])


def test_the_dlq_page_replays_a_signature_into_another_queue(dash, login):
    """Filter by an error signature, tick every row with the header's box,
    and replay them into another queue; the page fits a phone."""
    _dead_letters(dash, "sig-q", 3)
    page = login(dash, "otto")
    page.goto(f"{dash.url}/dlq/?queue=sig-q")
    signature = page.locator("#dlq-signatures li", has_text="boom <n>")
    expect(signature.locator(".qa-sig-count")).to_have_text("3")
    for width in (390, 1440):
        page.set_viewport_size({"width": width, "height": 844})
        assert page.evaluate("document.scrollingElement.scrollWidth") <= width
        shot(page, f"dlq-{width}")
    signature.locator("a").click()
    page.wait_for_url(re.compile(r"sig=boom"))
    rows = page.locator("#dlq-table tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.first.locator("td.qa-id a")).to_have_attribute("href", re.compile(r"^/queues/sig-q/messages/"))
    page.locator("#dlq-table input[data-select-all]").check()
    expect(page.locator("#dlq-table input[name=ids]:checked")).to_have_count(3)
    table = page.locator("#dlq-table")
    table.get_by_text("Replay selected…").click()
    table.locator("input[name=dest_queue]").first.fill("sig-q-retry")
    table.locator("input[name=reason]").first.fill("boom fixed")
    table.get_by_role("button", name="Replay selected", exact=True).click()
    expect(page.locator("#dlq-outcome")).to_contain_text(
        "Replayed 3 dead letters, into queue sig-q-retry (transactionId dlq:<id>)."
    )
    expect(rows).to_have_count(1)  # "No dead letters match."
    assert _dlq(dash, "sig-q")["total"] == 0
    with api(dash) as client:
        body = client.get("/api/v1/pop/queue/sig-q-retry", params={"wait": "false", "batch": 10}).json()
    assert sorted(m["data"]["i"] for m in body["messages"]) == [0, 1, 2]
    shot(page, "dlq-after-replay")
