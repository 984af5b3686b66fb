"""A stalled queue's recovery in a real browser: a consumer group's seek from
its dialog, the queue purge with its typed name, and a replay to every group
from the DLQ page; each effect checked through the API afterwards."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import api, shot

pytestmark = pytest.mark.live


def _read_all(server, queue: str, group: str, n: int) -> None:
    """``n`` messages pushed to ``queue``, popped and acked by ``group``."""
    with api(server) as client:
        items = [{"queue": queue, "payload": {"i": i}} for i in range(n)]
        assert client.post("/api/v1/push", json={"items": items}).status_code == 201
        body = client.get(f"/api/v1/pop/queue/{queue}", params={"consumerGroup": group, "wait": "false", "batch": n})
        messages = body.json()["messages"]
        acks = [
            {"transactionId": m["transactionId"], "partitionId": m["partitionId"], "status": "completed",
             "leaseId": body.json()["leaseId"]}
            for m in messages
        ]  # fmt: skip
        answer = client.post("/api/v1/ack/batch", json={"acknowledgments": acks, "consumerGroup": group})
        assert answer.status_code == 200, answer.text


def _pop(server, queue: str, group: str) -> list:
    with api(server) as client:
        body = client.get(f"/api/v1/pop/queue/{queue}", params={"consumerGroup": group, "wait": "false", "batch": 50})
        return body.json()["messages"] if body.status_code == 200 else []


def test_seek_a_group_to_the_start_from_its_dialog(dash, login):
    _read_all(dash, "seek-q", "workers", 4)
    viewer = login(dash, "vera")
    viewer.goto(f"{dash.url}/queues/seek-q/")
    expect(viewer.locator("#queue-summary")).to_be_visible()
    expect(viewer.get_by_text("Seek, reset, delete…")).to_have_count(0)
    page = login(dash, "otto")
    page.goto(f"{dash.url}/queues/seek-q/")
    row = page.locator("#queue-summary tr", has_text="workers")
    row.get_by_text("Seek, reset, delete…").click()
    dialog = page.locator("#dialog")
    expect(dialog.locator("#dialog-title")).to_contain_text("Recover consumer group workers")
    dialog.get_by_label("Seek to the start").check()
    dialog.locator("textarea[name=reason]").fill("re-read after the fix")
    shot(page, "queue-group-recover")
    dialog.get_by_role("button", name="Apply to workers").click()
    expect(dialog.locator("#action-outcome")).to_contain_text("lag 0 → 4 messages")
    assert len(_pop(dash, "seek-q", "workers")) == 4


def test_purge_a_queue_with_its_name_typed(dash, login):
    _read_all(dash, "purge-all-q", "workers", 3)
    with api(dash) as client:
        items = [{"queue": "purge-all-q", "payload": {"i": i}} for i in range(5)]
        assert client.post("/api/v1/push", json={"items": items}).status_code == 201
    page = login(dash, "otto")
    page.goto(f"{dash.url}/queues/purge-all-q/")
    page.get_by_text("Purge the queue…").click()
    dialog = page.locator("#dialog")
    dialog.locator("input[name=confirm]").fill("purge-all")
    dialog.get_by_role("button", name="Purge purge-all-q").click()
    expect(dialog.locator(".callout.bad").first).to_contain_text("type the queue's name")
    dialog.locator("input[name=confirm]").fill("purge-all-q")
    dialog.get_by_role("button", name="Purge purge-all-q").click()
    expect(dialog.locator("#action-outcome")).to_contain_text("Deleted 8 messages.")
    assert _pop(dash, "purge-all-q", "workers") == []
    expect(page.locator("#queue-summary .qa-tile-value.tone-ready")).to_have_text("0")


def test_replay_to_every_group_from_the_dlq_page(dash, login):
    _read_all(dash, "every-q", "billing", 3)
    with api(dash) as client:
        assert (
            client.post("/api/v1/configure", json={"queue": "every-q", "options": {"retryLimit": 0}}).status_code == 200
        )
        body = client.get(
            "/api/v1/pop/queue/every-q", params={"consumerGroup": "shipping", "wait": "false", "batch": 3}
        )
        acks = [
            {"transactionId": m["transactionId"], "partitionId": m["partitionId"], "status": "failed",
             "leaseId": body.json()["leaseId"], "error": "no address"}
            for m in body.json()["messages"][-1:]
        ]  # fmt: skip
        done = client.post("/api/v1/ack/batch", json={"acknowledgments": acks, "consumerGroup": "shipping"}).json()
        assert done[0]["dlq"] is True
    page = login(dash, "otto")
    page.goto(f"{dash.url}/dlq/?queue=every-q")
    rows = page.locator("#dlq-table tbody tr")
    expect(rows).to_have_count(1)
    rows.first.locator("input[name=ids]").check()
    page.get_by_text("Replay selected…").click()
    page.get_by_label("Every consumer group of the queue").first.check()
    page.locator("#dlq-table input[name=reason]").first.fill("address fixed")
    page.get_by_role("button", name="Replay selected").click()
    expect(page.locator("#dlq-outcome")).to_contain_text("Replayed 1 dead letter, for every consumer group")
    expect(rows.first).to_contain_text("No dead letters match.")
    shot(page, "dlq-after-replay")
    for group in ("shipping", "billing"):
        got = _pop(dash, "every-q", group)
        assert [m["transactionId"].startswith("dlq:") for m in got] == [True], group
