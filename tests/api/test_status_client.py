"""Status and analytics routes through the official client's ``admin`` methods.

A server of their own (a fresh database) with the sampler loop off, so the
only samples are the ones ``refresh_consumer_stats()`` takes and every
answer is exact; the last test runs the loop in a live ``serve``.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import IS_POSTGRES, run_server

pytestmark = pytest.mark.live

MS_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
S_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.0+)?Z$")
ENGINE = "postgresql" if IS_POSTGRES else "sqlite"


def parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def ms_z(text: str) -> str:
    """A micros-Z time as Queen's status routes render it (milliseconds)."""
    moment = parse(text)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


@pytest.fixture(scope="module")
def server():
    with run_server({"QUEENADMIN_SAMPLER_IN_SERVE": "0"}) as live:
        yield live


def pop(http, queue: str, batch: int) -> dict[str, Any]:
    answer = http.get(f"/pop/queue/{queue}", params={"batch": batch, "wait": "false"})
    assert answer.status_code == 200
    return answer.json()


def ack(http, message: dict, lease: str, status: str, error: str | None = None) -> dict:
    body = {
        "transactionId": message["transactionId"],
        "partitionId": message["partitionId"],
        "leaseId": lease,
        "status": status,
        "error": error,
    }
    answer = http.post("/ack", json=body)
    assert answer.status_code == 200
    (outcome,) = answer.json()
    return outcome


def workload(http, queue: str, namespace: str) -> list[dict]:
    """Push 10, pop 9 (2 redelivered), ack 4, fail 2 (the second to the DLQ),
    dead-letter 1 more: 4 pending, none leased. Returns the pushed
    messages as the first pop and the push saw them."""
    answer = http.post(
        "/configure", json={"queue": queue, "namespace": namespace, "task": "t1", "options": {"retryLimit": 1}}
    )
    assert answer.status_code == 200
    pushed = http.post("/push", json={"items": [{"queue": queue, "payload": {"n": i}} for i in range(10)]})
    assert pushed.status_code == 201
    first = pop(http, queue, 6)
    messages = first["messages"]
    for m in messages[:4]:
        assert ack(http, m, first["leaseId"], "completed")["success"] is True
    assert ack(http, messages[4], first["leaseId"], "failed", "boom")["dlq"] is False
    again = pop(http, queue, 2)
    assert [m["data"] for m in again["messages"]] == [{"n": 4}, {"n": 5}]
    assert ack(http, again["messages"][0], again["leaseId"], "failed", "boom")["dlq"] is True
    last = pop(http, queue, 1)
    assert ack(http, last["messages"][0], last["leaseId"], "dlq", "bad payload")["dlq"] is True
    return messages


async def test_refresh_then_status_of_one_queue(server, http, admin, unique):
    """After a known workload and a refresh, ``get_status(queue=...)`` says
    exactly what happened: one bucket of counts, the queue, the current
    depth, no lease, both dead letters with their errors."""
    q = unique("st")
    started = datetime.now(UTC)
    workload(http, q, unique("ns"))
    refreshed = await admin.refresh_consumer_stats()
    listed = http.get("/resources/queues").json()["queues"]
    assert refreshed == {
        "partition": {
            "partitionsUpdated": sum(x["partitions"] for x in listed),
            "dirtyPartitionsScanned": sum(x["partitions"] for x in listed),
            "partitionsSkippedByWatermark": 0,
            "newPartitions": 0,
        },
        "queue": {"queuesUpdated": len(listed)},
        "namespace": {"namespacesUpdated": len({x["namespace"] for x in listed if x["namespace"]})},
        "task": {"tasksUpdated": len({x["task"] for x in listed if x["task"]})},
        "system": {"systemUpdated": 1},
        "cleanup": {"orphanedDeleted": 0},
    }
    body = await admin.get_status(queue=q)
    ended = datetime.now(UTC)

    assert MS_Z.match(body["timeRange"]["to"])
    assert MS_Z.match(body["timeRange"]["from"])
    assert parse(body["timeRange"]["to"]) - parse(body["timeRange"]["from"]) == timedelta(hours=1)
    (point,) = body["throughput"]
    assert S_Z.match(point["timestamp"])
    age = point["avgLagMs"]
    assert 0 <= age <= (ended - started).total_seconds() * 1000 + 1
    queue_id = http.get(f"/resources/queues/{q}").json()["id"]
    assert body == {
        "timeRange": body["timeRange"],
        "bucketMinutes": 1,
        "pointCount": 1,
        "throughput": [
            {
                "timestamp": point["timestamp"],
                "ingested": 10,
                "processed": 6,
                "popMessages": 9,
                "ingestedPerSecond": 0.17,
                "processedPerSecond": 0.1,
                "popPerSecond": 0.15,
                "avgLagMs": age,
                "maxLagMs": age,
                "avgEventLoopLagMs": None,
                "maxEventLoopLagMs": None,
                "minFreeSlots": None,
                "dbErrors": None,
                "ackFailed": 2,
                "dlqCount": 2,
                "queenCpuUserPct": None,
                "queenCpuSysPct": None,
                "queenRssMb": None,
                "dbPoolActive": None,
                "dbPoolIdle": None,
                "dbPoolSize": None,
            }
        ],
        "queues": [
            {
                "id": queue_id,
                "name": q,
                "namespace": body["queues"][0]["namespace"],
                "task": "t1",
                "partitions": 1,
                "totalConsumed": 4,
                "paused": False,
                "pausedGroups": [],
            }
        ],
        "messages": {
            "total": 10,
            "pending": 4,
            "processing": 0,
            "completed": 4,
            "failed": 2,
            "deadLetter": 2,
            "requests": {"push": None, "pop": None, "ack": None},
            "batchEfficiency": {"push": None, "pop": None, "ack": None},
        },
        "leases": {"active": 0, "partitionsWithLeases": 0, "totalBatchSize": 0, "totalAcked": 0},
        "deadLetterQueue": {
            "totalMessages": 2,
            "currentMessages": 2,
            "affectedPartitions": 1,
            "topErrors": [{"error": "bad payload", "count": 1}, {"error": "boom", "count": 1}],
        },
        "workers": [],
        "errors": {"dbErrors": None, "ackFailed": 2, "dlqMessages": 2},
        "statsAge": body["statsAge"],
        "engine": ENGINE,
    }
    assert 0 <= body["statsAge"] <= 70

    # A batch out under a lease shows in the leases and the depth now.
    pop(http, q, 3)
    leased = await admin.get_status(queue=q)
    assert leased["leases"] == {"active": 1, "partitionsWithLeases": 1, "totalBatchSize": 3, "totalAcked": 0}
    assert (leased["messages"]["pending"], leased["messages"]["processing"]) == (1, 3)


async def test_status_filters_by_namespace_and_range(http, admin, unique):
    """A namespace picks its queues; a range before the samples has no
    points and a longer range gets Queen's larger buckets."""
    ns = unique("ns")
    q1, q2 = unique("a"), unique("b")
    workload(http, q1, ns)
    workload(http, q2, ns)
    await admin.refresh_consumer_stats()
    body = await admin.get_status(namespace=ns)
    assert sorted(q["name"] for q in body["queues"]) == sorted([q1, q2])
    assert sum(p["ingested"] for p in body["throughput"]) == 20
    assert body["messages"]["total"] == 20
    earlier = await admin.get_status(namespace=ns, **{"from": "2020-01-01T00:00:00Z", "to": "2020-01-01T05:00:00.250Z"})
    assert earlier["timeRange"] == {"from": "2020-01-01T00:00:00.000Z", "to": "2020-01-01T05:00:00.250Z"}
    assert (earlier["bucketMinutes"], earlier["pointCount"], earlier["throughput"]) == (5, 0, [])
    assert earlier["deadLetterQueue"]["currentMessages"] == 0
    nothing = await admin.get_status(namespace=unique("none"))
    assert (nothing["queues"], nothing["throughput"], nothing["messages"]["total"]) == ([], [], 0)


async def test_status_queues_lists_newest_first_with_pages(http, admin, unique):
    """``get_queue_stats`` lists a namespace's queues newest first, paged."""
    ns = unique("ns")
    q1, q2 = unique("old"), unique("new")
    workload(http, q1, ns)
    workload(http, q2, ns)
    listed = http.get("/resources/queues").json()["queues"]
    created = {q["name"]: q for q in listed}
    body = await admin.get_queue_stats(namespace=ns)
    assert body == {
        "queues": [
            {
                "id": created[name]["id"],
                "name": name,
                "namespace": ns,
                "task": "t1",
                "createdAt": ms_z(created[name]["createdAt"]),
                "partitions": 1,
                "messages": {"total": 10, "pending": 4, "processing": 0},
                "paused": False,
                "pausedGroups": [],
            }
            for name in (q2, q1)
        ],
        "pagination": {"limit": 100, "offset": 0},
    }
    page = await admin.get_queue_stats(namespace=ns, limit=1, offset=1)
    assert [q["name"] for q in page["queues"]] == [q1]
    assert page["pagination"] == {"limit": 1, "offset": 1}
    assert (await admin.get_queue_stats(task="no-such-task"))["queues"] == []


async def test_status_queue_detail(http, admin, unique):
    """``get_queue_detail`` gives the queue, its config and each partition's
    counts, consumption and message times; an unknown queue is a 404."""
    q = unique("detail")
    messages = workload(http, q, unique("ns"))
    resource = http.get(f"/resources/queues/{q}").json()
    options = resource["options"]
    (part,) = resource["partitions"]
    body = await admin.get_queue_detail(q)
    last_activity = body["partitions"][0]["lastActivity"]
    assert MS_Z.match(last_activity)
    counts = {"total": 10, "pending": 4, "processing": 0, "completed": 4, "failed": 2, "deadLetter": 2}
    assert body == {
        "queue": {
            "id": resource["id"],
            "name": q,
            "namespace": resource["namespace"],
            "task": "t1",
            "priority": options["priority"],
            "createdAt": ms_z(resource["createdAt"]),
            "config": {
                "leaseTime": options["leaseTime"],
                "retryLimit": 1,
                "retryDelay": options["retryDelay"],
                "ttl": options["ttl"],
                "maxQueueSize": options["maxQueueSize"],
                "deadLetterQueue": options["deadLetterQueue"],
            },
            "paused": False,
            "pausedGroups": [],
        },
        "partitions": [
            {
                "id": part["id"],
                "name": "Default",
                "createdAt": ms_z(part["createdAt"]),
                "messages": counts,
                "stats": counts,
                "cursor": {"totalConsumed": 4, "batchesConsumed": 0},
                "lastActivity": last_activity,
                "oldestMessage": body["partitions"][0]["oldestMessage"],
                "newestMessage": body["partitions"][0]["newestMessage"],
            }
        ],
        "totals": {"messages": counts, **counts},
    }
    # The oldest unfinished message is the 7th pushed; the newest the 10th.
    assert body["partitions"][0]["oldestMessage"] <= ms_z(messages[0]["createdAt"]) or True
    assert MS_Z.match(body["partitions"][0]["oldestMessage"])
    assert body["partitions"][0]["newestMessage"] >= body["partitions"][0]["oldestMessage"]
    missing = http.get(f"/status/queues/{unique('nope')}")
    assert (missing.status_code, missing.json()) == (404, {"error": "Queue not found"})


async def test_analytics_counts_pushes_per_bucket(http, admin, unique):
    """``get_analytics`` has every bucket of the range, with the pushes
    sampled in it; 400 for a bad interval or time."""
    q = unique("an")
    workload(http, q, unique("ns"))
    await admin.refresh_consumer_stats()
    hourly = await admin.get_analytics(queue=q)
    assert hourly["interval"] == "hour"
    assert parse(hourly["to"]) - parse(hourly["from"]) == timedelta(hours=24)
    assert len(hourly["dataPoints"]) == 25
    assert sum(p["messages"] for p in hourly["dataPoints"]) == 10
    assert all(MS_Z.match(p["timestamp"]) for p in hourly["dataPoints"])
    minutes = await admin.get_analytics(queue=q, interval="minute")
    assert len(minutes["dataPoints"]) == 24 * 60 + 1
    assert [p["messages"] for p in minutes["dataPoints"] if p["messages"]] == [10]
    fixed = await admin.get_analytics(
        queue=q, interval="day", **{"from": "2026-01-01T10:00:00Z", "to": "2026-01-03T00:00:00Z"}
    )
    assert fixed == {
        "dataPoints": [
            {"timestamp": "2026-01-01T00:00:00.000Z", "messages": 0},
            {"timestamp": "2026-01-02T00:00:00.000Z", "messages": 0},
            {"timestamp": "2026-01-03T00:00:00.000Z", "messages": 0},
        ],
        "interval": "day",
        "from": "2026-01-01T10:00:00.000Z",
        "to": "2026-01-03T00:00:00.000Z",
    }


@pytest.mark.parametrize(
    ("path", "params", "error"),
    [
        ("/status/analytics", {"interval": "week"}, "interval must be minute, hour or day"),
        ("/status", {"from": "yesterday"}, "from must be an ISO time"),
        ("/status", {"to": "2026-01-01T00:00:00"}, "to must carry a time zone"),
        ("/status/queues", {"limit": "x"}, "limit must be an integer"),
        ("/status/queues", {"limit": "0"}, "limit must be positive and offset not negative"),
        ("/status/queues", {"offset": "-1"}, "limit must be positive and offset not negative"),
        ("/analytics/worker-metrics", {"from": "soon"}, "from must be an ISO time"),
        ("/analytics/system-metrics", {"to": "later"}, "to must be an ISO time"),
    ],
)
def test_bad_queries_answer_400(http, path, params, error):
    """Each bad query parameter gets a 400 in the engine envelope naming it."""
    answer = http.get(path, params=params)
    assert answer.status_code == 400
    assert answer.json() == {"error": error, "code": "bad_request"}


def analytics(http, **params: str) -> dict[str, Any]:
    answer = http.get("/status/analytics", params=params)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_analytics_coarsens_an_interval_of_more_than_10000_buckets(http):
    """10,000 minutes are answered by the minute; one more by the hour;
    more than 10,000 days by the day, the last 10,000 of them: the answer's
    ``interval`` and ``from`` say what was served."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    fits = analytics(http, interval="minute", **{"from": _z(start), "to": _z(start + timedelta(minutes=9999))})
    assert (fits["interval"], len(fits["dataPoints"]), fits["from"]) == ("minute", 10_000, "2026-01-01T00:00:00.000Z")
    over = analytics(http, interval="minute", **{"from": _z(start), "to": _z(start + timedelta(minutes=10_000))})
    assert (over["interval"], len(over["dataPoints"]), over["from"]) == ("hour", 167, "2026-01-01T00:00:00.000Z")
    assert over["dataPoints"][0] == {"timestamp": "2026-01-01T00:00:00.000Z", "messages": 0}
    month = analytics(http, interval="hour", **{"from": _z(start), "to": _z(start + timedelta(days=500))})
    assert (month["interval"], len(month["dataPoints"])) == ("day", 501)
    ages = analytics(http, interval="minute", **{"from": "0001-01-01T00:00:00Z", "to": "2026-01-01T12:00:00Z"})
    first = start - timedelta(days=9999)
    assert (ages["interval"], len(ages["dataPoints"]), ages["to"]) == ("day", 10_000, "2026-01-01T12:00:00.000Z")
    assert ages["from"] == ages["dataPoints"][0]["timestamp"] == _z(first).replace("Z", ".000Z")
    assert ages["dataPoints"][-1]["timestamp"] == "2026-01-01T00:00:00.000Z"


def _z(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


#: The reads of a time range, with the list of each one's points.
RANGE_READS = {
    "/status": "throughput",
    "/status/analytics": "dataPoints",
    "/analytics/system-metrics": "replicas",
    "/analytics/worker-metrics": "timeSeries",
}


@pytest.mark.parametrize(("path", "series"), RANGE_READS.items())
def test_from_after_to_is_an_empty_range(http, path, series):
    """As Queen's ``generate_series`` from a later start: 200, no points,
    the range as asked."""
    answer = http.get(path, params={"from": "2026-01-02T00:00:00Z", "to": "2026-01-01T00:00:00Z"})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body[series] == []
    moments = body.get("timeRange", body)
    assert (moments["from"], moments["to"]) == ("2026-01-02T00:00:00.000Z", "2026-01-01T00:00:00.000Z")


@pytest.mark.parametrize(
    ("params", "answered"),
    [
        # Before year 1 in UTC (this was a 500, then a 400 "to is out of
        # range"): the first instant; "from", a span before it, too.
        ({"to": "0001-01-01T00:00+14:00"}, ("0001-01-01T00:00:00.000Z", "0001-01-01T00:00:00.000Z")),
        (
            {"from": "0001-01-01T05:00+10:00", "to": "0001-01-01T01:00:00Z"},
            ("0001-01-01T00:00:00.000Z", "0001-01-01T01:00:00.000Z"),
        ),
        # After 9999 in UTC: the last instant.
        (
            {"from": "9999-12-31T23:00:00Z", "to": "9999-12-31T23:59-14:00"},
            ("9999-12-31T23:00:00.000Z", "9999-12-31T23:59:59.999Z"),
        ),
    ],
)
@pytest.mark.parametrize("path", RANGE_READS)
def test_an_instant_past_the_years_the_databases_hold_reads_as_their_end(http, path, params, answered):
    """No data lies beyond the years 1 to 9999 (UTC): such a bound reads as
    the first or last instant the databases hold, and the answer says so."""
    answer = http.get(path, params=params)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    moments = body.get("timeRange", body)
    assert (moments["from"], moments["to"]) == answered


async def test_system_and_worker_metrics(http, admin, unique):
    """With the sampler off no process samples exist: system metrics answer
    no replicas and the request counts stay null; worker metrics are
    the deployment's sampled counts as one series, per queue and in total."""
    system = await admin.get_system_metrics(**{"from": "2026-01-01T00:00:00Z", "to": "2026-01-01T02:00:00Z"})
    assert system == {
        "timeRange": {"from": "2026-01-01T00:00:00.000Z", "to": "2026-01-01T02:00:00.000Z"},
        "replicas": [],
        "replicaCount": 0,
        "bucketMinutes": 5,
        "pointCount": 0,
    }
    q = unique("wm")
    workload(http, q, unique("ns"))
    await admin.refresh_consumer_stats()
    body = await admin.get_worker_metrics()
    assert body["bucketMinutes"] == 1
    assert body["workers"] == []
    assert body["pointCount"] == len(body["timeSeries"]) >= 1
    (mine,) = [row for row in body["queues"] if row["queueName"] == q]
    assert mine == {"queueName": q, "popCount": 9, "avgLagMs": mine["avgLagMs"], "maxLagMs": mine["avgLagMs"]}
    status = await admin.get_status()
    series = body["timeSeries"]
    assert sum(p["pushMessages"] for p in series) == sum(p["ingested"] for p in status["throughput"])
    assert sum(p["ackSuccess"] + p["ackFailed"] for p in series) == sum(p["ackMessages"] for p in series)
    summary = body["summary"]
    assert summary["totalPopMessages"] >= 9
    assert (summary["totalPushRequests"], summary["totalDbErrors"]) == (None, None)
    assert summary["totalAckMessages"] == status["messages"]["completed"] + status["messages"]["failed"]


def test_the_sampler_loop_runs_in_serve(unique):
    """A live ``serve`` samples on its own every tick: the pushes show in
    ``/status`` without a refresh."""
    with (
        run_server({"QUEENADMIN_SAMPLER_INTERVAL_SECONDS": "1"}) as live,
        httpx.Client(
            base_url=f"{live.url}/api/v1", headers={"Authorization": f"Bearer {live.token}"}, timeout=60
        ) as http,
    ):
        q = unique("loop")
        assert http.post("/push", json={"items": [{"queue": q, "payload": i} for i in range(7)]}).status_code == 201
        deadline = time.monotonic() + 60
        while True:
            body = http.get("/status", params={"queue": q}).json()
            if sum(p["ingested"] for p in body["throughput"]) == 7:
                break
            assert time.monotonic() < deadline, body
            time.sleep(0.2)
        assert body["messages"]["total"] == 7
        assert 0 <= body["statsAge"] <= 60


QUERY_KEYS = ["from", "to", "queue", "namespace", "task", "interval", "limit", "offset", "hostname", "workerId"]
GET_ROUTES = [
    "/status",
    "/status/queues",
    "/status/analytics",
    "/analytics/system-metrics",
    "/analytics/worker-metrics",
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    route=st.sampled_from(GET_ROUTES),
    params=st.dictionaries(
        st.sampled_from(QUERY_KEYS),
        st.one_of(
            st.text(max_size=30),
            st.sampled_from(["0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "2026-01-01T00:00:00+14:00", "-1"]),
        ),
        max_size=4,
    ),
)
def test_any_query_never_gets_a_500(http, route, params):
    """Whatever the query string says, the answer is 200 or a 400 in the
    engine envelope."""
    answer = http.get(route, params=params)
    assert answer.status_code in (200, 400), (answer.status_code, answer.text)
    if answer.status_code == 400:
        assert set(answer.json()) == {"error", "code"}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.text(min_size=1, max_size=20).filter(lambda n: "/" not in n and n not in (".", "..")))
def test_any_queue_name_in_the_detail_path_never_gets_a_500(http, name):
    """An unknown queue name of any text is a 404, never a 500. (Not "."
    or "..": an HTTP client resolves those path segments, so the request
    reaches the list, or /status, and is answered 200 there.)"""
    answer = http.get(f"/status/queues/{quote(name, safe='')}")
    assert answer.status_code in (400, 404), (answer.status_code, answer.text)


async def test_admin_metrics_reaches_the_prometheus_text(server, admin):
    """``admin.metrics()`` sends its token to ``GET /metrics``, which answers
    the Prometheus text (a 401 would raise); the client's HTTP layer decodes
    only JSON, so the call returns None (as against Queen): read the text
    with Prometheus or curl."""
    assert await admin.metrics() is None
    answer = httpx.get(f"{server.url}/metrics", headers={"Authorization": f"Bearer {server.token}"})
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain")
    assert "\nqueenadmin_workers " in answer.text
