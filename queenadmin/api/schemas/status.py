"""Status and analytics wire schemas (protocol.md section 11.5; Queen's
``status.cpp`` routes and their stored procedures).

Fields Queen fills from measurements this broker does not take (event-loop
lag, free slots, database pool, per-worker rows, database errors) answer ``null`` (or an empty list): not
measured, rather than a made-up zero.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, create_model

from queenadmin.api.schemas.common import WireOut
from queenadmin.api.schemas.queues import PAUSED, PAUSED_GROUPS

#: Queen's status times: milliseconds and ``Z``.
MillisZTime = Annotated[
    str,
    Field(
        pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$",
        description="UTC with milliseconds: 2026-10-08T10:00:00.123Z",
    ),
]
#: A bucket's start: whole seconds and ``Z``.
SecondsZTime = Annotated[
    str,
    Field(pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$", description="UTC: 2026-10-08T10:00:00Z"),
]


BucketMinutes = Literal[1, 5, 15, 60, 360]


# ``from`` is a Python keyword, and the OpenAPI document is made without
# aliases: the models with that key are built by name.
TimeRangeOut: type[WireOut] = create_model(  # type: ignore[call-overload]
    "TimeRangeOut", __base__=WireOut, **{"from": (MillisZTime, ...), "to": (MillisZTime, ...)}
)


def _out(name: str, doc: str | None = None, **fields: Any) -> Any:
    """A flat answer of ``fields`` (name: type), each required."""
    required = {key: (kind, ...) for key, kind in fields.items()}
    return create_model(name, __base__=WireOut, __doc__=doc, **required)  # type: ignore[call-overload]


#: Push, pop and ack: what Queen counts and this broker does not.
class RequestCountsOut(WireOut):
    push: None
    pop: None
    ack: None


class _BucketOut(WireOut):
    """What a time bucket of ``/status`` and of the worker metrics share."""

    timestamp: SecondsZTime
    popMessages: int
    popPerSecond: float
    avgLagMs: int = Field(description="mean age of the oldest claimable message over the samples")
    maxLagMs: int = Field(description="largest age of the oldest claimable message")
    avgEventLoopLagMs: None
    maxEventLoopLagMs: None
    minFreeSlots: None
    dbErrors: None
    ackFailed: int
    dlqCount: int


class ThroughputOut(_BucketOut):
    """One time bucket of ``/status``, from the sampler's rows."""

    ingested: int
    processed: int = Field(description="acks applied: completed plus failed")
    ingestedPerSecond: float
    processedPerSecond: float
    queenCpuUserPct: None
    queenCpuSysPct: None
    queenRssMb: None
    dbPoolActive: None
    dbPoolIdle: None
    dbPoolSize: None


class _QueueOut(WireOut):
    """What every status answer says of a queue."""

    id: str
    name: str
    namespace: str | None
    task: str | None
    paused: bool = Field(description=PAUSED)
    pausedGroups: list[str] = Field(description=PAUSED_GROUPS)


class StatusQueueOut(_QueueOut):
    partitions: int
    totalConsumed: int


class StatusQueueCountsOut(WireOut):
    total: int
    pending: int = Field(description="not leased (excludes processing)")
    processing: int


class StatusCountsOut(StatusQueueCountsOut):
    completed: int
    failed: int
    deadLetter: int


class StatusMessagesOut(StatusCountsOut):
    requests: RequestCountsOut
    batchEfficiency: RequestCountsOut


class LeasesOut(WireOut):
    active: int
    partitionsWithLeases: int
    totalBatchSize: int
    totalAcked: Literal[0]


class TopErrorOut(WireOut):
    error: str | None
    count: int


class StatusDeadLettersOut(WireOut):
    totalMessages: int = Field(description="dead-lettered by acks since the queues were created")
    currentMessages: int = Field(description="dead letters filed in the time range")
    affectedPartitions: int
    topErrors: list[TopErrorOut]


class StatusErrorsOut(WireOut):
    dbErrors: None
    ackFailed: int
    dlqMessages: int


class StatusOut(WireOut):
    """``GET /api/v1/status``."""

    timeRange: TimeRangeOut
    bucketMinutes: BucketMinutes
    pointCount: int
    throughput: list[ThroughputOut]
    queues: list[StatusQueueOut]
    messages: StatusMessagesOut
    leases: LeasesOut
    deadLetterQueue: StatusDeadLettersOut
    workers: list[None] = Field(description="always empty: no per-worker metrics are kept")
    errors: StatusErrorsOut
    statsAge: int = Field(description="seconds since the newest sample; -1 when none")
    engine: Literal["postgresql", "sqlite"]


class StatusQueueItemOut(_QueueOut):
    createdAt: MillisZTime
    partitions: int
    messages: StatusQueueCountsOut


class PaginationOut(WireOut):
    limit: int
    offset: int


class StatusQueuesOut(WireOut):
    """``GET /api/v1/status/queues``."""

    queues: list[StatusQueueItemOut]
    pagination: PaginationOut


class StatusQueueConfigOut(WireOut):
    leaseTime: int
    retryLimit: int
    retryDelay: int
    ttl: int
    maxQueueSize: int
    deadLetterQueue: bool


class StatusQueueInfoOut(_QueueOut):
    priority: int
    createdAt: MillisZTime
    config: StatusQueueConfigOut


class StatusCursorOut(WireOut):
    totalConsumed: int
    batchesConsumed: Literal[0]


class StatusPartitionOut(WireOut):
    id: str
    name: str
    createdAt: MillisZTime
    messages: StatusCountsOut
    stats: StatusCountsOut
    cursor: StatusCursorOut
    lastActivity: MillisZTime | None
    oldestMessage: MillisZTime | None
    newestMessage: MillisZTime | None


class StatusTotalsOut(StatusCountsOut):
    """The counts, and the same again under ``messages``."""

    messages: StatusCountsOut


class StatusQueueDetailOut(WireOut):
    """``GET /api/v1/status/queues/{name}``."""

    queue: StatusQueueInfoOut
    partitions: list[StatusPartitionOut]
    totals: StatusTotalsOut


class AnalyticsPointOut(WireOut):
    timestamp: MillisZTime
    messages: int = Field(description="messages pushed in the bucket")


AnalyticsOut: type[WireOut] = create_model(  # type: ignore[call-overload]
    "AnalyticsOut",
    __base__=WireOut,
    __doc__="``GET /api/v1/status/analytics``.",
    **{
        "dataPoints": (list[AnalyticsPointOut], ...),
        "interval": (Literal["minute", "hour", "day"], ...),
        "from": (MillisZTime, ...),
        "to": (MillisZTime, ...),
    },
)
StatsRefreshOut = _out(
    "StatsRefreshOut",
    "``POST /api/v1/stats/refresh``: one sample of every queue, taken now.",
    partition=_out(
        "RefreshPartitionOut",
        partitionsUpdated=int,
        dirtyPartitionsScanned=int,
        partitionsSkippedByWatermark=Literal[0],
        newPartitions=Literal[0],
    ),
    queue=_out("RefreshQueueOut", queuesUpdated=int),
    namespace=_out("RefreshNamespaceOut", namespacesUpdated=int),
    task=_out("RefreshTaskOut", tasksUpdated=int),
    system=_out("RefreshSystemOut", systemUpdated=Literal[1]),
    cleanup=_out("RefreshCleanupOut", orphanedDeleted=Literal[0]),
)


class MetricStatOut(WireOut):
    """One measure over a bucket, as Queen aggregates it."""

    avg: float
    min: float
    max: float
    last: float


class CpuOut(WireOut):
    user_us: MetricStatOut | None = Field(
        description="user-mode CPU, percent of one core times 100 (null: no earlier sample to compare with)"
    )
    system_us: MetricStatOut | None = Field(description="kernel-mode CPU, percent of one core times 100")
    user_seconds: float = Field(description="user CPU seconds of the process since it started, at the last sample")
    system_seconds: float = Field(description="kernel CPU seconds since it started, at the last sample")


class MemoryOut(WireOut):
    rss_bytes: MetricStatOut | None = Field(description="resident memory (null where /proc is missing)")
    virtual_bytes: MetricStatOut | None


class DatabasePoolOut(WireOut):
    """Queen's connection pool: not measured here."""

    pool_size: None
    pool_idle: None
    pool_active: None


class ProcessOut(WireOut):
    threads: MetricStatOut | None
    requests: int = Field(description="HTTP requests the process answered during the bucket")


class ReplicaMetricsOut(WireOut):
    cpu: CpuOut
    memory: MemoryOut
    database: DatabasePoolOut
    process: ProcessOut


class ReplicaPointOut(WireOut):
    timestamp: MillisZTime
    sampleCount: int
    metrics: ReplicaMetricsOut


class ReplicaOut(WireOut):
    """One serving process (a ``serve`` worker)."""

    hostname: str
    port: int = Field(description="the port serve listens on (0 when not known)")
    workerId: str = Field(description="the process id, as text")
    pid: int
    timeSeries: list[ReplicaPointOut]


class SystemMetricsOut(WireOut):
    """``GET /api/v1/analytics/system-metrics``: each process's samples of itself."""

    timeRange: TimeRangeOut
    replicas: list[ReplicaOut]
    replicaCount: int
    bucketMinutes: BucketMinutes
    pointCount: int = Field(description="buckets over all replicas")


_SAMPLED = "from the process samples; null: none in the bucket"


class WorkerPointOut(_BucketOut):
    """One time bucket of the deployment's message counts."""

    pushMessages: int
    ackMessages: int
    pushRequests: int | None = Field(description=_SAMPLED)
    popRequests: int | None = Field(description=_SAMPLED)
    ackRequests: int | None = Field(description=_SAMPLED)
    jobsDone: None
    pushPerSecond: float
    ackPerSecond: float
    avgFreeSlots: None
    dbConnections: None
    avgJobQueueSize: None
    maxJobQueueSize: None
    backoffSize: None
    lagCount: int = Field(description="samples in the bucket")
    ackSuccess: int


class WorkerQueueOut(WireOut):
    queueName: str
    popCount: int
    avgLagMs: int
    maxLagMs: int


class WorkerSummaryOut(WireOut):
    totalPushMessages: int
    totalPopMessages: int
    totalAckMessages: int
    totalPushRequests: int | None
    totalPopRequests: int | None
    totalAckRequests: int | None
    totalDbErrors: None
    totalAckFailed: int
    totalDlq: int
    pendingMessages: int


class WorkerMetricsOut(WireOut):
    """``GET /api/v1/analytics/worker-metrics``: the deployment as one worker."""

    timeRange: TimeRangeOut
    bucketMinutes: BucketMinutes
    pointCount: int
    timeSeries: list[WorkerPointOut]
    workers: list[None]
    queues: list[WorkerQueueOut]
    summary: WorkerSummaryOut
