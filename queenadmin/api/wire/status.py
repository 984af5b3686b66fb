"""Status and analytics on the wire: query parsing and Queen's answer shapes.

Shapes follow Queen's ``status.cpp`` routes (``get_status_v3``,
``get_status_queues_v2``, ``get_queue_detail_v2``, ``get_analytics_v1``,
``get_system_metrics_v1``, ``get_worker_metrics_timeseries_v1``,
``refresh_all_stats_v1``) and protocol.md section 11.5. Numbers Queen
takes from measurements this broker does not keep answer ``null``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import Field as Doc

from queenadmin.api.schemas.queues import PAUSED, PAUSED_GROUPS
from queenadmin.api.wire.answers import Answer, Key, Many
from queenadmin.api.wire.fields import TEXT, Field, Param, Query
from queenadmin.api.wire.queues import EARLIEST, engine_bad, time_param
from queenadmin.domain import clock, queues
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


def _rate(count: int, minutes: int) -> float:
    return round(count / (minutes * 60), 2)


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def _acks(bucket: history.Interval) -> int:
    return bucket.acked + bucket.failed


# --------------------------------------------------------------------------
# The answers, each declared once (``wire.answers``). Fields Queen fills from
# measurements this broker does not take (event-loop lag, free slots, the
# database pool, per-worker rows, database errors) answer ``null`` (or an
# empty list): not measured, rather than a made-up zero.

#: Queen's status times: milliseconds and ``Z``.
MillisZTime = Annotated[
    str,
    Doc(
        pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$",
        description="UTC with milliseconds: 2026-10-08T10:00:00.123Z",
    ),
]
#: A bucket's start: whole seconds and ``Z``.
SecondsZTime = Annotated[
    str,
    Doc(pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$", description="UTC: 2026-10-08T10:00:00Z"),
]
BucketMinutes = Literal[1, 5, 15, 60, 360]

_MINUTES = ("minutes",)


def _nested(name: str, **keys: Any) -> Key:
    """A nested answer of the same subject."""
    return Key(Answer(name, **keys), src=".")


_MILLIS = Key(MillisZTime, via=clock.iso_millis_z)
_MAYBE_MILLIS = Key(MillisZTime | None, via=lambda moment: None if moment is None else clock.iso_millis_z(moment))
#: ``from`` is a Python keyword: these keys are given by name.
_FROM_TO: dict[str, Any] = {"from": replace(_MILLIS, src="since"), "to": replace(_MILLIS, src="until")}
TIME_RANGE = Answer("TimeRangeOut", args=("since", "until"), **_FROM_TO)
_SPAN = Key(TIME_RANGE, src=".")
_BUCKET_MINUTES = Key(BucketMinutes, src="minutes")
#: What a time bucket (``status.Bucket``) of ``/status`` and of the worker
#: metrics share.
_BUCKET: dict[str, Any] = {
    "timestamp": Key(SecondsZTime, src="at", via=seconds_z),
    "popMessages": Key(int, src="popped"),
    "popPerSecond": Key(float, src="popped", via=_rate, with_args=_MINUTES),
    "avgLagMs": Key(int, "mean age of the oldest claimable message over the samples", src="avg_age", via=_ms),
    "maxLagMs": Key(int, "largest age of the oldest claimable message", src="max_age", via=_ms),
    "avgEventLoopLagMs": None,
    "maxEventLoopLagMs": None,
    "minFreeSlots": None,
    "dbErrors": None,
    "ackFailed": Key(int, src="failed"),
    "dlqCount": Key(int, src="dlq"),
}
_ACK_RATE = Key(float, src=".", via=lambda bucket, minutes: _rate(_acks(bucket), minutes), with_args=_MINUTES)
THROUGHPUT = Answer(
    "ThroughputOut",
    doc="One time bucket of ``/status``, from the sampler's rows.",
    args=_MINUTES,
    first=("timestamp", "ingested", "processed", "popMessages", "ingestedPerSecond", "processedPerSecond"),
    **_BUCKET,
    ingested=Key(int, src="pushed"),
    processed=Key(int, "acks applied: completed plus failed", src=".", via=_acks),
    ingestedPerSecond=Key(float, src="pushed", via=_rate, with_args=_MINUTES),
    processedPerSecond=_ACK_RATE,
    **dict.fromkeys(("queenCpuUserPct", "queenCpuSysPct", "queenRssMb", "dbPoolActive", "dbPoolIdle", "dbPoolSize")),
)


def _queue(name: str, *, at: str = "", ident: str = "id", called: str = "name", **own: Any) -> Answer:
    """A queue as every status answer shows it, read at ``at`` (a path's
    start): ``own`` keys after its task, its pause last."""
    return Answer(
        name,
        first=("id", "name", "namespace", "task", *own),
        id=Key(str, src=at + ident, via=str),
        name=Key(str, src=at + called),
        namespace=Key(str | None, src=at + "namespace"),
        task=Key(str | None, src=at + "task"),
        paused=Key(bool, PAUSED, src=at + "paused"),
        pausedGroups=Key(list[str], PAUSED_GROUPS, src=at + "paused_groups", via=list),
        **own,
    )


class Counts(NamedTuple):
    """What ``StatusCountsOut`` shows of a queue, a partition, or their sum."""

    total: int = 0
    pending: int = 0
    processing: int = 0
    completed: int = 0
    failed: int = 0
    dead_letter: int = 0


def _counts(c: queues.QueueCounters) -> Counts:
    return Counts(c.pushed, c.depth - c.processing, c.processing, c.acked, c.failed, c.dlq)


def _summed(rows: Iterable[Counts]) -> Counts:
    return Counts._make(map(sum, zip(Counts(), *rows, strict=True)))


QUEUE_COUNTS = Answer(
    "StatusQueueCountsOut", total=int, pending=Key(int, "not leased (excludes processing)"), processing=int
)
COUNTS = Answer("StatusCountsOut", **QUEUE_COUNTS.keys, completed=int, failed=int, deadLetter=int)
_NOT_COUNTED = _nested("RequestCountsOut", push=None, pop=None, ack=None)
#: Of the counts summed (``Counts``), with the arguments ``render_status`` names.
STATUS_OUT = Answer(
    "StatusOut",
    doc="``GET /api/v1/status``.",
    args=("since", "until", "minutes", "buckets", "listed", "leases", "dead", "age", "engine"),
    timeRange=_SPAN,
    bucketMinutes=_BUCKET_MINUTES,
    pointCount=Key(int, src="buckets", via=len),
    throughput=Key(Many(THROUGHPUT), src="buckets", via=reversed),
    queues=Key(
        Many(
            _queue(
                "StatusQueueOut",
                at="0.",
                partitions=Key(int, src="1.partitions"),
                totalConsumed=Key(int, src="1.acked"),
            )
        ),
        src="listed",
    ),
    messages=_nested("StatusMessagesOut", **COUNTS.keys, requests=_NOT_COUNTED, batchEfficiency=_NOT_COUNTED),
    leases=Key(
        Answer(
            "LeasesOut",
            active=int,
            partitionsWithLeases=Key(int, src="partitions"),
            totalBatchSize=Key(int, src="messages"),
            totalAcked=Literal[0],
        ),
        src="leases",
    ),
    deadLetterQueue=_nested(
        "StatusDeadLettersOut",
        args=("dead",),
        totalMessages=Key(int, "dead-lettered by acks since the queues were created", src="dead_letter"),
        currentMessages=Key(int, "dead letters filed in the time range", src="dead.messages"),
        affectedPartitions=Key(int, src="dead.partitions"),
        topErrors=Key(
            Many(Answer("TopErrorOut", error=Key(str | None, src="0"), count=Key(int, src="1"))),
            src="dead.top_errors",
        ),
    ),
    workers=Key(list[None], "always empty: no per-worker metrics are kept", const=[]),
    errors=_nested(
        "StatusErrorsOut", dbErrors=None, ackFailed=Key(int, src="failed"), dlqMessages=Key(int, src="dead_letter")
    ),
    statsAge=Key(int, "seconds since the newest sample; -1 when none", src="age"),
    engine=Key(Literal["postgresql", "sqlite"], src="engine"),
)


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
    """``STATUS_OUT`` of the queues ``matched`` that have ``counters``; a
    queue is listed once something was pushed to it."""
    totals = _summed(_counts(counters[q.name]) for q in matched if q.name in counters)
    listed = [(q, counters[q.name]) for q in matched if q.name in counters and counters[q.name].pushed > 0]
    age = -1 if latest is None else max(0, int((now - latest).total_seconds()))
    engine = "postgresql" if db.is_postgres() else "sqlite"
    return STATUS_OUT.render(totals, since, until, minutes, buckets, listed, leases, dead, age, engine)


# --------------------------------------------------------------------------
# GET /status/queues and /status/queues/{name}

_PAGE = ("limit", "offset")
#: Of a page of queues' counters, and the page asked for.
STATUS_QUEUES_OUT = Answer(
    "StatusQueuesOut",
    doc="``GET /api/v1/status/queues``.",
    args=_PAGE,
    queues=Key(
        Many(
            _queue(
                "StatusQueueItemOut",
                ident="queue_id",
                called="queue",
                createdAt=_MILLIS,
                partitions=int,
                messages=Key(QUEUE_COUNTS, src=".", via=_counts),
            )
        ),
        src=".",
    ),
    pagination=Key(Answer("PaginationOut", args=_PAGE, limit=int, offset=int), src="."),
)


def _option(name: str) -> Key:
    return Key(int, src=".", via=lambda options: int(options.get(name, 0)))


_CONFIG = Answer(
    "StatusQueueConfigOut",
    leaseTime=_option("leaseTime"),
    retryLimit=_option("retryLimit"),
    retryDelay=_option("retryDelay"),
    ttl=_option("ttl"),
    maxQueueSize=_option("maxQueueSize"),
    deadLetterQueue=Key(bool, src=".", via=lambda options: bool(options.get("deadLetterQueue", True))),
)
#: Of a partition (``queues.PartitionDepth``), its consumers' activity and its counts.
_PARTITION = Answer(
    "StatusPartitionOut",
    id=Key(str, src="0.id", via=str),
    name=Key(str, src="0.name"),
    createdAt=replace(_MILLIS, src="0.created_at"),
    messages=Key(COUNTS, src="2"),
    stats=Key(COUNTS, src="2"),
    cursor=Key(Answer("StatusCursorOut", totalConsumed=Key(int, src="acked"), batchesConsumed=Literal[0]), src="1"),
    lastActivity=replace(_MAYBE_MILLIS, src="1.last_claim_at"),
    oldestMessage=replace(_MAYBE_MILLIS, src="0.oldest_message_at"),
    newestMessage=replace(_MAYBE_MILLIS, src="0.newest_message_at"),
)
#: Of the queue's stats, its partitions' rows and their counts summed.
STATUS_QUEUE_OUT = Answer(
    "StatusQueueDetailOut",
    doc="``GET /api/v1/status/queues/{name}``.",
    args=("rows", "totals"),
    queue=Key(
        _queue(
            "StatusQueueInfoOut",
            priority=replace(_option("priority"), src="options"),
            createdAt=_MILLIS,
            config=Key(_CONFIG, src="options"),
        ),
        src=".",
    ),
    partitions=Key(Many(_PARTITION), src="rows"),
    totals=Key(
        Answer(
            "StatusTotalsOut",
            doc="The counts, and the same again under ``messages``.",
            first=("messages",),
            **COUNTS.keys,
            messages=Key(COUNTS, src="."),
        ),
        src="totals",
    ),
)
_IDLE = status.PartitionActivity(acked=0, failed=0, dead_lettered=0, last_claim_at=None)


def render_status_queue(stats: queues.QueueStats, activity: Mapping[int, status.PartitionActivity]) -> dict[str, Any]:
    """``STATUS_QUEUE_OUT``: the partitions by name; one no consumer touched has no activity."""
    rows = []
    for p in sorted(stats.partitions, key=lambda p: p.name):
        act = activity.get(p.id, _IDLE)
        rows.append((p, act, Counts(p.total, p.ready, p.processing, p.completed, act.failed, p.dead_letter)))
    return STATUS_QUEUE_OUT.render(stats, rows, _summed(counts for *_, counts in rows))


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


#: Of the ``Series``, the range's end and the messages pushed in each bucket.
ANALYTICS_OUT = Answer(
    "AnalyticsOut",
    doc="``GET /api/v1/status/analytics``.",
    args=("until", "pushed"),
    dataPoints=Key(
        Many(
            Answer(
                "AnalyticsPointOut",
                timestamp=replace(_MILLIS, src="0"),
                messages=Key(int, "messages pushed in the bucket", src="1"),
            )
        ),
        src="starts",
        via=partial(zip, strict=True),
        with_args=("pushed",),
    ),
    interval=Interval,
    **_FROM_TO,
)


# --------------------------------------------------------------------------
# POST /stats/refresh, /analytics/*


#: Of the ``history.Refreshed``.
REFRESH_OUT = Answer(
    "StatsRefreshOut",
    doc="``POST /api/v1/stats/refresh``: one sample of every queue, taken now.",
    partition=_nested(
        "RefreshPartitionOut",
        partitionsUpdated=Key(int, src="partitions"),
        dirtyPartitionsScanned=Key(int, src="partitions"),
        partitionsSkippedByWatermark=Literal[0],
        newPartitions=Literal[0],
    ),
    queue=_nested("RefreshQueueOut", queuesUpdated=Key(int, src="queues")),
    namespace=_nested("RefreshNamespaceOut", namespacesUpdated=Key(int, src="namespaces")),
    task=_nested("RefreshTaskOut", tasksUpdated=Key(int, src="tasks")),
    system=_nested("RefreshSystemOut", systemUpdated=Literal[1]),
    cleanup=_nested("RefreshCleanupOut", orphanedDeleted=Literal[0]),
)
_ROUNDED = Key(float, via=round, with_args=("digits",))
#: Of a ``procmetrics.Stat``, rounded to ``digits``.
_STAT = Answer(
    "MetricStatOut",
    doc="One measure over a bucket, as Queen aggregates it.",
    args=("digits",),
    avg=_ROUNDED,
    min=_ROUNDED,
    max=_ROUNDED,
    last=_ROUNDED,
)


def _stat(src: str, doc: str = "", digits: int = 2) -> Key:
    return Key(_STAT.model | None, doc, src=src, via=lambda stat: None if stat is None else _STAT.render(stat, digits))


_CPU_SECONDS = partial(round, ndigits=3)
#: Of a ``procmetrics.ReplicaPoint``.
_METRICS = Answer(
    "ReplicaMetricsOut",
    cpu=_nested(
        "CpuOut",
        user_us=_stat(
            "cpu_user", "user-mode CPU, percent of one core times 100 (null: no earlier sample to compare with)"
        ),
        system_us=_stat("cpu_system", "kernel-mode CPU, percent of one core times 100"),
        user_seconds=Key(
            float,
            "user CPU seconds of the process since it started, at the last sample",
            src="cpu_user_seconds",
            via=_CPU_SECONDS,
        ),
        system_seconds=Key(
            float, "kernel CPU seconds since it started, at the last sample", src="cpu_system_seconds", via=_CPU_SECONDS
        ),
    ),
    memory=_nested(
        "MemoryOut",
        rss_bytes=_stat("rss_bytes", "resident memory (null where /proc is missing)", 0),
        virtual_bytes=_stat("virtual_bytes", digits=0),
    ),
    database=_nested(
        "DatabasePoolOut",
        doc="Queen's connection pool: not measured here.",
        pool_size=None,
        pool_idle=None,
        pool_active=None,
    ),
    process=_nested(
        "ProcessOut",
        threads=_stat("threads"),
        requests=Key(int, "HTTP requests the process answered during the bucket"),
    ),
)
_REPLICA = Answer(
    "ReplicaOut",
    doc="One serving process (a ``serve`` worker).",
    hostname=Key(str, src="host"),
    port=Key(int, "the port serve listens on (0 when not known)"),
    workerId=Key(str, "the process id, as text", src="pid", via=str),
    pid=int,
    timeSeries=Key(
        Many(
            Answer(
                "ReplicaPointOut",
                timestamp=replace(_MILLIS, src="at"),
                sampleCount=Key(int, src="samples"),
                metrics=Key(_METRICS, src="."),
            )
        ),
        src="points",
    ),
)
#: Of the ``procmetrics.Replica``s, the range and its buckets' width.
SYSTEM_METRICS_OUT = Answer(
    "SystemMetricsOut",
    doc="``GET /api/v1/analytics/system-metrics``: each process's samples of itself.",
    args=("since", "until", "minutes"),
    timeRange=_SPAN,
    replicas=Key(Many(_REPLICA), src="."),
    replicaCount=Key(int, src=".", via=len),
    bucketMinutes=_BUCKET_MINUTES,
    pointCount=Key(
        int, "buckets over all replicas", src=".", via=lambda replicas: sum(len(r.points) for r in replicas)
    ),
)

_SAMPLED = "from the process samples; null: none in the bucket"


def _requests(name: str) -> Key:
    """A bucket's ``name`` requests, from ``requests`` (by the bucket's start)."""
    return Key(
        int | None,
        _SAMPLED,
        src="at",
        via=lambda at, requests: None if (counts := requests.get(at)) is None else int(getattr(counts, name)),
        with_args=("requests",),
    )


_WORKER_POINT = Answer(
    "WorkerPointOut",
    doc="One time bucket of the deployment's message counts.",
    args=("minutes", "requests"),
    # Queen's order: the buckets' shared keys are spread through it.
    first=(
        *("timestamp", "pushMessages", "popMessages", "ackMessages", "pushRequests", "popRequests", "ackRequests"),
        *("jobsDone", "pushPerSecond", "popPerSecond", "ackPerSecond", "avgEventLoopLagMs", "maxEventLoopLagMs"),
        *("avgFreeSlots", "minFreeSlots", "dbConnections", "avgJobQueueSize", "maxJobQueueSize", "backoffSize"),
        *("avgLagMs", "maxLagMs", "lagCount", "dbErrors", "ackSuccess"),
    ),
    **_BUCKET,
    pushMessages=Key(int, src="pushed"),
    ackMessages=Key(int, src=".", via=_acks),
    pushRequests=_requests("push"),
    popRequests=_requests("pop"),
    ackRequests=_requests("ack"),
    jobsDone=None,
    pushPerSecond=Key(float, src="pushed", via=_rate, with_args=_MINUTES),
    ackPerSecond=_ACK_RATE,
    avgFreeSlots=None,
    dbConnections=None,
    avgJobQueueSize=None,
    maxJobQueueSize=None,
    backoffSize=None,
    lagCount=Key(int, "samples in the bucket", src="samples"),
    ackSuccess=Key(int, src="acked"),
)


def _total(*names: str) -> Key:
    return Key(int, src=".", via=lambda rows: sum(getattr(row, name) for row in rows for name in names))


def _total_requests(name: str) -> Key:
    return Key(
        int | None,
        src="requests",
        via=lambda requests: sum(getattr(r, name) for r in requests.values()) if requests else None,
    )


def _busiest(per_queue: Mapping[str, history.QueueActivity]) -> list[tuple[str, history.QueueActivity]]:
    return sorted(per_queue.items(), key=lambda item: (-item[1].popped, item[0]))


#: Of every queue's counters, with the range, its buckets' width and
#: buckets, each queue's activity, and (``requests``) the push, pop and ack
#: requests per bucket from the process samples (a bucket without any
#: answers ``null`` for them: not sampled).
WORKER_METRICS_OUT = Answer(
    "WorkerMetricsOut",
    doc="``GET /api/v1/analytics/worker-metrics``: the deployment as one worker.",
    args=("since", "until", "minutes", "buckets", "per_queue", "requests"),
    timeRange=_SPAN,
    bucketMinutes=_BUCKET_MINUTES,
    pointCount=Key(int, src="buckets", via=len),
    timeSeries=Key(Many(_WORKER_POINT), src="buckets", via=reversed),
    workers=Key(list[None], const=[]),
    queues=Key(
        Many(
            Answer(
                "WorkerQueueOut",
                queueName=Key(str, src="0"),
                popCount=Key(int, src="1.popped"),
                avgLagMs=Key(int, src="1.avg_age", via=_ms),
                maxLagMs=Key(int, src="1.max_age", via=_ms),
            )
        ),
        src="per_queue",
        via=_busiest,
    ),
    summary=_nested(
        "WorkerSummaryOut",
        args=("requests",),
        totalPushMessages=_total("pushed"),
        totalPopMessages=_total("popped"),
        totalAckMessages=_total("acked", "failed"),
        totalPushRequests=_total_requests("push"),
        totalPopRequests=_total_requests("pop"),
        totalAckRequests=_total_requests("ack"),
        totalDbErrors=None,
        totalAckFailed=_total("failed"),
        totalDlq=_total("dlq"),
        pendingMessages=_total("depth"),
    ),
)
