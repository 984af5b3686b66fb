"""Process metrics through the official client: ``admin.get_system_metrics``
and the request counts of ``admin.get_worker_metrics``.

A live ``serve`` (one worker) sampling every second: its own rows, read
back per replica, must name its process and carry plausible CPU, memory
and request numbers.
"""

from __future__ import annotations

import os
import socket
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.conftest import IS_POSTGRES, run_server

pytestmark = pytest.mark.live


def _z(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@pytest.fixture(scope="module")
def server():
    with run_server({"QUEENADMIN_SAMPLER_INTERVAL_SECONDS": "1"}) as live:
        yield live


def _serve_pids(server) -> set[int]:
    """The serve process and its children (the worker answering requests)."""
    pids = {server.process.pid}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if parent == server.process.pid:
                pids.add(int(entry))
    return pids


def _work(http, queue: str, rounds: int) -> None:
    for i in range(rounds):
        assert http.post("/push", json={"items": [{"queue": queue, "payload": {"i": i}}]}).status_code == 201
        popped = http.get(f"/pop/queue/{queue}", params={"autoAck": "true", "wait": "false"})
        assert popped.status_code in (200, 204), popped.text


async def _replica_with_cpu(admin, **params: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Wait for a point whose CPU was measured (a row with one before it)."""
    deadline = time.monotonic() + 60
    while True:
        body = await admin.get_system_metrics(**params)
        for replica in body["replicas"]:
            for point in replica["timeSeries"]:
                if point["metrics"]["cpu"]["user_us"] is not None and point["metrics"]["process"]["requests"] > 0:
                    return body, replica
        assert time.monotonic() < deadline, body
        time.sleep(0.5)


async def test_each_replica_is_a_serving_process_with_its_cpu_and_memory(server, http, admin, unique):
    """admin.get_system_metrics() answers one replica, the serving process (pid, host, port), with plausible CPU, memory and threads."""
    _work(http, unique("sm"), 30)
    body, replica = await _replica_with_cpu(admin)
    assert body["replicaCount"] == len(body["replicas"]) == 1
    assert body["bucketMinutes"] == 1
    assert body["pointCount"] == sum(len(r["timeSeries"]) for r in body["replicas"]) >= 1
    assert replica["pid"] in _serve_pids(server)
    assert replica["workerId"] == str(replica["pid"])
    assert replica["hostname"] == socket.gethostname()
    assert replica["port"] == int(server.url.rsplit(":", 1)[1])
    stamps = [p["timestamp"] for p in replica["timeSeries"]]
    assert stamps == sorted(stamps)
    last = replica["timeSeries"][-1]["metrics"]
    # A Python process has used some CPU and holds tens of megabytes.
    assert last["cpu"]["user_seconds"] > 0
    assert 10 * 2**20 < last["memory"]["rss_bytes"]["last"] < 4 * 2**30
    assert last["memory"]["virtual_bytes"]["last"] >= last["memory"]["rss_bytes"]["last"]
    assert last["process"]["threads"]["last"] >= 2
    assert last["database"] == {"pool_size": None, "pool_idle": None, "pool_active": None}
    cpu = [p["metrics"]["cpu"]["user_us"] for p in replica["timeSeries"] if p["metrics"]["cpu"]["user_us"]]
    # Percent of one core times 100: above 0 under this load, at most all cores.
    assert max(c["max"] for c in cpu) > 0
    assert all(0 <= c["min"] <= c["avg"] <= c["max"] <= 10000 * os.cpu_count() for c in cpu)


async def test_the_time_range_picks_the_samples(server, http, admin):
    """from/to pick the samples (and the bucket size); hostname and workerId filter the replicas."""
    await _replica_with_cpu(admin)
    now = datetime.now(UTC)
    past = await admin.get_system_metrics(**{"from": "2026-01-01T00:00:00Z", "to": "2026-01-01T02:00:00Z"})
    assert (past["replicas"], past["replicaCount"], past["pointCount"], past["bucketMinutes"]) == ([], 0, 0, 5)
    recent = await admin.get_system_metrics(**{"from": _z(now - timedelta(minutes=5)), "to": _z(now)})
    (replica,) = recent["replicas"]
    assert all(_z(now - timedelta(minutes=6)) <= p["timestamp"] <= _z(now) for p in replica["timeSeries"])
    # Samples are at least a second apart: 3 seconds hold at most 4.
    narrow = await admin.get_system_metrics(**{"from": _z(now - timedelta(seconds=3)), "to": _z(now)})
    assert 1 <= sum(p["sampleCount"] for p in narrow["replicas"][0]["timeSeries"]) <= 4
    wide = await admin.get_system_metrics(**{"from": _z(now - timedelta(days=2)), "to": _z(now)})
    assert wide["bucketMinutes"] == 60
    assert sum(p["sampleCount"] for p in wide["replicas"][0]["timeSeries"]) >= sum(
        p["sampleCount"] for p in replica["timeSeries"]
    )
    # A range from the year 1 looks no further back than it can.
    ancient = http.get("/analytics/system-metrics", params={"from": "0001-01-01T00:00:00Z", "to": _z(now)})
    assert ancient.status_code == 200, ancient.text
    assert ancient.json()["replicaCount"] == 1
    by_host = http.get("/analytics/system-metrics", params={"hostname": replica["hostname"]}).json()
    assert by_host["replicaCount"] == 1
    other = http.get("/analytics/system-metrics", params={"hostname": "elsewhere"}).json()
    assert (other["replicas"], other["replicaCount"], other["pointCount"]) == ([], 0, 0)
    assert http.get("/analytics/system-metrics", params={"workerId": "1"}).json()["replicas"] == []
    by_worker = http.get("/analytics/system-metrics", params={"workerId": replica["workerId"]}).json()
    assert [r["pid"] for r in by_worker["replicas"]] == [replica["pid"]]


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"from": "yesterday"}, "from must be an ISO time"),
        ({"to": "2026-01-01T00:00:00"}, "to must carry a time zone"),
        ({"hostname": "a\x00b"}, "hostname must not contain NUL"),
    ],
)
def test_bad_ranges_answer_400(http, params, error):
    """Each bad range or filter gets a 400 in the engine envelope naming it."""
    answer = http.get("/analytics/system-metrics", params=params)
    assert (answer.status_code, answer.json()) == (400, {"error": error, "code": "bad_request"})


async def test_worker_metrics_count_the_requests(server, http, admin, unique):
    """Worker metrics' push/pop/ack request counts come from the process samples."""
    q = unique("wr")
    _work(http, q, 12)
    assert (
        http.post(
            "/ack",
            json={
                "transactionId": "00000000-0000-7000-8000-000000000000",
                "partitionId": "00000000-0000-7000-8000-000000000000",
                "status": "completed",
                "consumerGroup": "__QUEUE_MODE__",
            },
        ).status_code
        < 500
    )
    await admin.refresh_consumer_stats()
    deadline = time.monotonic() + 60
    while True:
        body = await admin.get_worker_metrics()
        summary = body["summary"]
        if (summary["totalPushRequests"] or 0) >= 12 and (summary["totalAckRequests"] or 0) >= 1:
            break
        assert time.monotonic() < deadline, summary
        await admin.refresh_consumer_stats()
        time.sleep(0.5)
    assert summary["totalPopRequests"] >= 12
    counted = [p for p in body["timeSeries"] if p["pushRequests"] is not None]
    assert counted
    assert sum(p["pushRequests"] for p in counted) <= summary["totalPushRequests"]
    assert all(p["popRequests"] >= 0 and p["ackRequests"] >= 0 for p in counted)
    assert summary["totalDbErrors"] is None


@pytest.mark.skipif(not IS_POSTGRES, reason="SQLite is served by one process")
async def test_every_worker_is_a_replica():
    """Two workers of one ``serve``: two replicas, their own pids, one port."""
    from queen import Queen

    with run_server({"QUEENADMIN_SAMPLER_INTERVAL_SECONDS": "1"}, workers=2) as live:
        client = Queen(url=live.url, bearer_token=live.token, retry_attempts=1)
        try:
            deadline = time.monotonic() + 60
            while True:
                body = await client.admin.get_system_metrics()
                if body["replicaCount"] == 2:
                    break
                assert time.monotonic() < deadline, body
                time.sleep(0.5)
        finally:
            await client.close()
        pids = [r["pid"] for r in body["replicas"]]
        assert len(set(pids)) == 2
        assert set(pids) <= _serve_pids(live)
        assert {r["port"] for r in body["replicas"]} == {int(live.url.rsplit(":", 1)[1])}
