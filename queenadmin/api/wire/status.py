"""Status and analytics on the wire: query parsing and Queen's answer shapes.

Shapes follow Queen's ``status.cpp`` routes (``get_status_v3``,
``get_status_queues_v2``, ``get_queue_detail_v2``, ``get_analytics_v1``,
``get_system_metrics_v1``, ``get_worker_metrics_timeseries_v1``,
``refresh_all_stats_v1``) and protocol.md section 11.5. Numbers Queen
takes from measurements this broker does not keep answer ``null``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from queenadmin.api.wire.fields import TEXT, Field, Param, Query
from queenadmin.api.wire.queues import EARLIEST, engine_bad, time_param
from queenadmin.domain import clock, procmetrics, queues
from queenadmin.domain.queues import history, status
from queenadmin.plumbing import db

Params = Mapping[str, str]
Interval = Literal["minute", "hour", "day"]
INTERVALS: dict[str, timedelta] = {
    "minute": timedelta(minutes=1),
    "hour": timedelta(hours=1),
    "day": timedelta(days=1),
}
#: An analytics answer has at most this many points (a minute interval over
#: about a week); a finer interval is coarsened (``analytics_series``) rather
#: than answered slowly.
MAX_ANALYTICS_POINTS = 10_000
DEFAULT_LIMIT = 100


def seconds_z(moment: datetime) -> str:
    # strftime's %Y drops the zero padding of years before 1000.
    m = moment.astimezone(UTC)
    return f"{m.year:04d}-{m.month:02d}-{m.day:02d}T{m.hour:02d}:{m.minute:02d}:{m.second:02d}Z"


# --------------------------------------------------------------------------
# The query parameters of each route, declared once: ``read`` reads them and
# the document shows them (``openapi.parameters``). An empty one reads as
# absent; a NUL is refused before any route (``envelope.unstorable_parameter``).


#: ``from`` and ``to`` (``to`` is read first): ``read`` fills in the defaults.
#: Any instant is a bound: past the years the databases hold (1 to 9999 in
#: UTC) it reads as their first or last instant, as no data lies beyond; a
#: ``from`` after ``to`` is an empty range (docs/reference.md, status reads).
_BEYOND = "; an instant before year 1 or after 9999 in UTC reads as the first or last one"
RANGE = {
    "to": time_param("to", "ISO 8601 with a zone; default: now" + _BEYOND, clamp=True),
    "from": time_param(
        "from",
        "ISO 8601 with a zone; default: a span before to; after to: an empty range" + _BEYOND,
        clamp=True,
    ),
}
STATUS = Query({**RANGE, "queue": TEXT, "namespace": TEXT, "task": TEXT})
ANALYTICS = Query(
    {
        **STATUS.params,
        "interval": Param(
            Field(
                "string",
                choices=tuple(INTERVALS),
                default="hour",
                falsy_is_absent=True,
                refusal="interval must be minute, hour or day",
                doc=(
                    f"a bucket's width; a range of more than {MAX_ANALYTICS_POINTS} buckets is answered "
                    "with the next coarser interval that fits (the answer's interval), and one of more "
                    f"than {MAX_ANALYTICS_POINTS} days with its last {MAX_ANALYTICS_POINTS} (the answer's from)"
                ),
            )
        ),
    }
)
_PAGE_BOUNDS = "limit must be positive and offset not negative"
STATUS_QUEUES = Query(
    {
        "limit": Param(Field("integer", ge=1, default=DEFAULT_LIMIT, refusal=_PAGE_BOUNDS), "an integer"),
        "offset": Param(Field("integer", ge=0, default=0, refusal=_PAGE_BOUNDS), "an integer"),
        "namespace": TEXT,
        "task": TEXT,
    }
)
SYSTEM_METRICS = Query({**RANGE, "hostname": TEXT, "workerId": TEXT})
WORKER_METRICS = Query(RANGE)


def read(
    query: Query, params: Params, *, now: datetime | None = None, span: timedelta = timedelta(hours=1)
) -> dict[str, Any]:
    """The parameters ``query`` declares, by name, in its order; ``from`` and
    ``to`` (where declared) are the range, by default the ``span`` up to ``now``."""
    got = {}
    for name, param in query.params.items():
        got[name] = param.read(params, name, engine_bad)
        if name == "from":
            got["to"] = until = got["to"] or now or clock.now()
            got["from"] = got["from"] or _before(until, span)
    return got


def _before(moment: datetime, span: timedelta) -> datetime:
    """``span`` before ``moment``, or the first instant the databases hold."""
    try:
        return moment - span
    except OverflowError:
        return EARLIEST


def _time_range(since: datetime, until: datetime) -> dict[str, str]:
    return {"from": clock.iso_millis_z(since), "to": clock.iso_millis_z(until)}


def _rate(count: int, minutes: int) -> float:
    return round(count / (minutes * 60), 2)


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def _engine() -> str:
    return "postgresql" if db.is_postgres() else "sqlite"


# --------------------------------------------------------------------------
# GET /status


def render_status(
    since: datetime,
    until: datetime,
    *,
    minutes: int,
    buckets: Sequence[status.Bucket],
    matched: Sequence[status.QueueRow],
    counters: Mapping[str, queues.QueueCounters],
    leases: status.LeaseSummary,
    dead: status.DeadLetterSummary,
    latest: datetime | None,
    now: datetime,
) -> dict[str, Any]:
    throughput = [
        {
            "timestamp": seconds_z(b.at),
            "ingested": b.pushed,
            "processed": b.acked + b.failed,
            "popMessages": b.popped,
            "ingestedPerSecond": _rate(b.pushed, minutes),
            "processedPerSecond": _rate(b.acked + b.failed, minutes),
            "popPerSecond": _rate(b.popped, minutes),
            "avgLagMs": _ms(b.avg_age),
            "maxLagMs": _ms(b.max_age),
            "avgEventLoopLagMs": None,
            "maxEventLoopLagMs": None,
            "minFreeSlots": None,
            "dbErrors": None,
            "ackFailed": b.failed,
            "dlqCount": b.dlq,
            "queenCpuUserPct": None,
            "queenCpuSysPct": None,
            "queenRssMb": None,
            "dbPoolActive": None,
            "dbPoolIdle": None,
            "dbPoolSize": None,
        }
        for b in reversed(buckets)
    ]
    chosen = [counters[q.name] for q in matched if q.name in counters]
    listed = [
        {
            "id": str(q.id),
            "name": q.name,
            "namespace": q.namespace,
            "task": q.task,
            "partitions": counters[q.name].partitions,
            "totalConsumed": counters[q.name].acked,
            "paused": q.paused,
            "pausedGroups": list(q.paused_groups),
        }
        for q in matched
        if q.name in counters and counters[q.name].pushed > 0
    ]
    failed = sum(c.failed for c in chosen)
    dlq = sum(c.dlq for c in chosen)
    return {
        "timeRange": _time_range(since, until),
        "bucketMinutes": minutes,
        "pointCount": len(throughput),
        "throughput": throughput,
        "queues": listed,
        "messages": {
            "total": sum(c.pushed for c in chosen),
            "pending": sum(c.depth - c.processing for c in chosen),
            "processing": sum(c.processing for c in chosen),
            "completed": sum(c.acked for c in chosen),
            "failed": failed,
            "deadLetter": dlq,
            "requests": {"push": None, "pop": None, "ack": None},
            "batchEfficiency": {"push": None, "pop": None, "ack": None},
        },
        "leases": {
            "active": leases.active,
            "partitionsWithLeases": leases.partitions,
            "totalBatchSize": leases.messages,
            "totalAcked": 0,
        },
        "deadLetterQueue": {
            "totalMessages": dlq,
            "currentMessages": dead.messages,
            "affectedPartitions": dead.partitions,
            "topErrors": [{"error": error, "count": count} for error, count in dead.top_errors],
        },
        "workers": [],
        "errors": {"dbErrors": None, "ackFailed": failed, "dlqMessages": dlq},
        "statsAge": -1 if latest is None else max(0, int((now - latest).total_seconds())),
        "engine": _engine(),
    }


# --------------------------------------------------------------------------
# GET /status/queues and /status/queues/{name}


def render_status_queues(counters: Sequence[queues.QueueCounters], *, limit: int, offset: int) -> dict[str, Any]:
    return {
        "queues": [
            {
                "id": str(c.queue_id),
                "name": c.queue,
                "namespace": c.namespace,
                "task": c.task,
                "createdAt": clock.iso_millis_z(c.created_at),
                "partitions": c.partitions,
                "messages": {"total": c.pushed, "pending": c.depth - c.processing, "processing": c.processing},
                "paused": c.paused,
                "pausedGroups": list(c.paused_groups),
            }
            for c in counters
        ],
        "pagination": {"limit": limit, "offset": offset},
    }


def _counts(total: int, pending: int, processing: int, completed: int, failed: int, dead: int) -> dict[str, int]:
    return {
        "total": total,
        "pending": pending,
        "processing": processing,
        "completed": completed,
        "failed": failed,
        "deadLetter": dead,
    }


def _maybe_millis(moment: datetime | None) -> str | None:
    return None if moment is None else clock.iso_millis_z(moment)


def render_status_queue(stats: queues.QueueStats, activity: Mapping[int, status.PartitionActivity]) -> dict[str, Any]:
    options = stats.options
    partitions = []
    sums = [0] * 6
    for p in sorted(stats.partitions, key=lambda p: p.name):
        act = activity.get(p.id)
        failed = act.failed if act else 0
        counts = [p.total, p.ready, p.processing, p.completed, failed, p.dead_letter]
        sums = [a + b for a, b in zip(sums, counts, strict=True)]
        partitions.append(
            {
                "id": str(p.id),
                "name": p.name,
                "createdAt": clock.iso_millis_z(p.created_at),
                "messages": _counts(*counts),
                "stats": _counts(*counts),
                "cursor": {"totalConsumed": act.acked if act else 0, "batchesConsumed": 0},
                "lastActivity": _maybe_millis(act.last_claim_at if act else None),
                "oldestMessage": _maybe_millis(p.oldest_message_at),
                "newestMessage": _maybe_millis(p.newest_message_at),
            }
        )
    return {
        "queue": {
            "id": str(stats.id),
            "name": stats.name,
            "namespace": stats.namespace,
            "task": stats.task,
            "priority": int(options.get("priority", 0)),
            "createdAt": clock.iso_millis_z(stats.created_at),
            "config": {
                "leaseTime": int(options.get("leaseTime", 0)),
                "retryLimit": int(options.get("retryLimit", 0)),
                "retryDelay": int(options.get("retryDelay", 0)),
                "ttl": int(options.get("ttl", 0)),
                "maxQueueSize": int(options.get("maxQueueSize", 0)),
                "deadLetterQueue": bool(options.get("deadLetterQueue", True)),
            },
            "paused": stats.paused,
            "pausedGroups": list(stats.paused_groups),
        },
        "partitions": partitions,
        "totals": {"messages": _counts(*sums), **_counts(*sums)},
    }


# --------------------------------------------------------------------------
# GET /status/analytics


@dataclass(frozen=True)
class Series:
    """The buckets an analytics answer has: their ``interval``, the range's
    start (``since``, the request's or moved up) and each bucket's start."""

    interval: Interval
    since: datetime
    starts: list[datetime]


def _trunc(moment: datetime, interval: Interval) -> datetime:
    if interval == "minute":
        return moment.replace(second=0, microsecond=0)
    if interval == "hour":
        return moment.replace(minute=0, second=0, microsecond=0)
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def analytics_series(since: datetime, until: datetime, interval: Interval) -> Series:
    """Queen's ``generate_series(date_trunc(from), date_trunc(to), width)``,
    of at most ``MAX_ANALYTICS_POINTS`` buckets: a finer ``interval`` is
    coarsened (minute, hour, day) until the range fits, and a range of more
    days starts that many days before ``until``. No bucket when ``since`` is
    after ``until`` (an empty range)."""
    if since > until:
        return Series(interval, since, [])
    names: list[Interval] = ["minute", "hour", "day"]
    for name in names[names.index(interval) :]:
        width = INTERVALS[name]
        first, last = _trunc(since, name), _trunc(until, name)
        count = (last - first) // width + 1
        if count <= MAX_ANALYTICS_POINTS:
            return Series(name, since, [first + i * width for i in range(count)])
    first = last - (MAX_ANALYTICS_POINTS - 1) * width
    return Series("day", first, [first + i * width for i in range(MAX_ANALYTICS_POINTS)])


def render_analytics(
    since: datetime, until: datetime, interval: Interval, starts: Sequence[datetime], pushed: Sequence[int]
) -> dict[str, Any]:
    return {
        "dataPoints": [
            {"timestamp": clock.iso_millis_z(at), "messages": n} for at, n in zip(starts, pushed, strict=True)
        ],
        "interval": interval,
        "from": clock.iso_millis_z(since),
        "to": clock.iso_millis_z(until),
    }


# --------------------------------------------------------------------------
# POST /stats/refresh, /analytics/*


def render_refresh(done: history.Refreshed) -> dict[str, Any]:
    return {
        "partition": {
            "partitionsUpdated": done.partitions,
            "dirtyPartitionsScanned": done.partitions,
            "partitionsSkippedByWatermark": 0,
            "newPartitions": 0,
        },
        "queue": {"queuesUpdated": done.queues},
        "namespace": {"namespacesUpdated": done.namespaces},
        "task": {"tasksUpdated": done.tasks},
        "system": {"systemUpdated": 1},
        "cleanup": {"orphanedDeleted": 0},
    }


def _stat(stat: procmetrics.Stat | None, digits: int = 2) -> dict[str, float] | None:
    if stat is None:
        return None
    return {name: round(getattr(stat, name), digits) for name in ("avg", "min", "max", "last")}


def _replica_point(point: procmetrics.ReplicaPoint) -> dict[str, Any]:
    return {
        "timestamp": clock.iso_millis_z(point.at),
        "sampleCount": point.samples,
        "metrics": {
            "cpu": {
                "user_us": _stat(point.cpu_user),
                "system_us": _stat(point.cpu_system),
                "user_seconds": round(point.cpu_user_seconds, 3),
                "system_seconds": round(point.cpu_system_seconds, 3),
            },
            "memory": {"rss_bytes": _stat(point.rss_bytes, 0), "virtual_bytes": _stat(point.virtual_bytes, 0)},
            "database": {"pool_size": None, "pool_idle": None, "pool_active": None},
            "process": {"threads": _stat(point.threads), "requests": point.requests},
        },
    }


def render_system_metrics(
    since: datetime, until: datetime, minutes: int, replicas: Sequence[procmetrics.Replica]
) -> dict[str, Any]:
    rows = [
        {
            "hostname": r.host,
            "port": r.port,
            "workerId": str(r.pid),
            "pid": r.pid,
            "timeSeries": [_replica_point(p) for p in r.points],
        }
        for r in replicas
    ]
    return {
        "timeRange": _time_range(since, until),
        "replicas": rows,
        "replicaCount": len(rows),
        "bucketMinutes": minutes,
        "pointCount": sum(len(r.points) for r in replicas),
    }


def _count(counts: procmetrics.RequestCounts | None, name: str) -> int | None:
    return None if counts is None else int(getattr(counts, name))


def render_worker_metrics(
    since: datetime,
    until: datetime,
    *,
    minutes: int,
    buckets: Sequence[status.Bucket],
    per_queue: Mapping[str, history.QueueActivity],
    counters: Sequence[queues.QueueCounters],
    requests: Mapping[datetime, procmetrics.RequestCounts],
) -> dict[str, Any]:
    """``requests``: push, pop and ack requests per bucket from the process
    samples; a bucket without any answers ``null`` for them (not sampled)."""
    series = [
        {
            "timestamp": seconds_z(b.at),
            "pushMessages": b.pushed,
            "popMessages": b.popped,
            "ackMessages": b.acked + b.failed,
            "pushRequests": _count(requests.get(b.at), "push"),
            "popRequests": _count(requests.get(b.at), "pop"),
            "ackRequests": _count(requests.get(b.at), "ack"),
            "jobsDone": None,
            "pushPerSecond": _rate(b.pushed, minutes),
            "popPerSecond": _rate(b.popped, minutes),
            "ackPerSecond": _rate(b.acked + b.failed, minutes),
            "avgEventLoopLagMs": None,
            "maxEventLoopLagMs": None,
            "avgFreeSlots": None,
            "minFreeSlots": None,
            "dbConnections": None,
            "avgJobQueueSize": None,
            "maxJobQueueSize": None,
            "backoffSize": None,
            "avgLagMs": _ms(b.avg_age),
            "maxLagMs": _ms(b.max_age),
            "lagCount": b.samples,
            "dbErrors": None,
            "ackSuccess": b.acked,
            "ackFailed": b.failed,
            "dlqCount": b.dlq,
        }
        for b in reversed(buckets)
    ]
    queue_rows = [
        {"queueName": name, "popCount": a.popped, "avgLagMs": _ms(a.avg_age), "maxLagMs": _ms(a.max_age)}
        for name, a in sorted(per_queue.items(), key=lambda item: (-item[1].popped, item[0]))
    ]
    return {
        "timeRange": _time_range(since, until),
        "bucketMinutes": minutes,
        "pointCount": len(series),
        "timeSeries": series,
        "workers": [],
        "queues": queue_rows,
        "summary": {
            "totalPushMessages": sum(c.pushed for c in counters),
            "totalPopMessages": sum(c.popped for c in counters),
            "totalAckMessages": sum(c.acked + c.failed for c in counters),
            "totalPushRequests": sum(r.push for r in requests.values()) if requests else None,
            "totalPopRequests": sum(r.pop for r in requests.values()) if requests else None,
            "totalAckRequests": sum(r.ack for r in requests.values()) if requests else None,
            "totalDbErrors": None,
            "totalAckFailed": sum(c.failed for c in counters),
            "totalDlq": sum(c.dlq for c in counters),
            "pendingMessages": sum(c.depth for c in counters),
        },
    }
