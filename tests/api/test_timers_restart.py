"""Timers survive a crash: ``serve`` killed with SIGKILL while timers fire,
restarted on the same data, delivers every timer exactly once.

600 timers over six seconds at ``QA_SCALE=full``; 300 over three at ``ci``
(tests/scale.py).
"""

from __future__ import annotations

import base64
import json
import time
from collections import Counter
from datetime import datetime
from typing import Any

import httpx
import pytest

from tests.conftest import LiveServer, run_server
from tests.scale import scaled, sized

pytestmark = [pytest.mark.live, scaled]

QUEUE = "restart"
TIMERS, DUE_WITHIN_MS = sized(ci=(300, 3000), full=(600, 6000))


def _headers(server: LiveServer) -> dict[str, str]:
    return {"Authorization": f"Bearer {server.token}"}


def _schedule(server: LiveServer, count: int, within_ms: int) -> dict[str, dict[str, Any]]:
    """Schedule ``count`` timers over HTTP, due over the next ``within_ms``; by txn."""
    ops = [
        {
            "op": "schedule",
            "queue": QUEUE,
            "timerKey": f"k{i}",
            "delayMs": within_ms * i // count,
            "txn": f"restart-{i}",
            "payload": base64.b64encode(json.dumps({"i": i}).encode()).decode(),
            "partition": f"p{i % 2}",
        }
        for i in range(count)
    ]
    out: dict[str, dict[str, Any]] = {}
    for first in range(0, count, 256):
        answer = httpx.post(
            f"{server.url}/api/v1/timers", json={"operations": ops[first : first + 256]}, headers=_headers(server)
        )
        assert answer.status_code == 200, answer.text
        for result in answer.json()["results"]:
            assert result["status"] == "scheduled"
            out[result["txn"]] = result
    return out


def _pending(server: LiveServer) -> int:
    answer = httpx.get(f"{server.url}/api/v1/timers/{QUEUE}", params={"mode": "count"}, headers=_headers(server))
    assert answer.status_code == 200, answer.text
    return int(answer.json()["count"])


def _pop_all(server: LiveServer) -> list[dict[str, Any]]:
    """Every message of the queue, popped once by a group of its own."""
    messages: list[dict[str, Any]] = []
    while True:
        answer = httpx.get(
            f"{server.url}/api/v1/pop/queue/{QUEUE}",
            params={
                "batch": 1000,
                "wait": "false",
                "autoAck": "true",
                "consumerGroup": "audit",
                "subscriptionMode": "all",
            },
            headers=_headers(server),
        )
        if answer.status_code == 204:
            return messages
        assert answer.status_code == 200, answer.text
        messages.extend(answer.json()["messages"])


def _wait_until(condition: Any, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {seconds} s for {what}")
        time.sleep(0.05)


def test_a_server_killed_while_timers_fire_delivers_each_once_after_a_restart():
    """600 timers due over six seconds (at full size); the server is killed (SIGKILL) once
    some have fired and restarted on the same data: every timer is
    delivered exactly once, with its promised id, never early."""
    with run_server() as first:
        scheduled = _schedule(first, TIMERS, within_ms=DUE_WITHIN_MS)
        _wait_until(lambda: _pending(first) <= TIMERS * 3 // 4, 60, "a quarter of the timers to fire")
        at_kill = _pending(first)
        first.process.kill()
        first.process.wait()
        same = {"QUEENADMIN_DATA_DIR": first.env["QUEENADMIN_DATA_DIR"]}
        if "DATABASE_URL" in first.env:
            same["DATABASE_URL"] = first.env["DATABASE_URL"]
        with run_server(extra_env=same) as second:
            _wait_until(lambda: _pending(second) == 0, 60, "every timer to fire after the restart")
            messages = _pop_all(second)

    # The kill came mid-stream: some timers fired before it, some after.
    assert 0 < at_kill < TIMERS
    counts = Counter(m["transactionId"] for m in messages)
    assert set(counts) == set(scheduled)
    assert set(counts.values()) == {1}
    for message in messages:
        promised = scheduled[message["transactionId"]]
        assert message["id"] == promised["messageId"]
        assert datetime.fromisoformat(message["createdAt"]) >= datetime.fromisoformat(promised["deliverAt"])
