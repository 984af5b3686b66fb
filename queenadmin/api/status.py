"""Status and analytics routes: what the operator's scripts and Queen's
console read (``queen.admin``'s status and analytics methods).

Time series come from the statistics sampler's rows
(``domain/queues/history.py``); current numbers from offsets and cursors.
Parsing and shapes live in ``api/wire/status.py``.
"""

from __future__ import annotations

from datetime import timedelta

from django.http import HttpRequest, HttpResponse

from queenadmin.api import grants
from queenadmin.api.http import json_response
from queenadmin.api.schemas.common import EngineBadRequestOut
from queenadmin.api.schemas.queues import QueueNotFoundOut
from queenadmin.api.schemas.status import (
    AnalyticsOut,
    StatsRefreshOut,
    StatusOut,
    StatusQueueDetailOut,
    StatusQueuesOut,
    SystemMetricsOut,
    WorkerMetricsOut,
)
from queenadmin.api.scopes import ScopedRouter
from queenadmin.api.wire import status as wire
from queenadmin.domain import clock, procmetrics, queues
from queenadmin.domain.queues import history, status
from queenadmin.errors import QueueNotFound

router = ScopedRouter(tags=["status"])

_BAD = {400: EngineBadRequestOut}


@router.get("/status", response={200: StatusOut, **_BAD}, summary="Throughput, queues, leases and the DLQ")
def get_status(request: HttpRequest) -> HttpResponse:
    now = clock.now()
    query = wire.parse_status(request.GET, now=now, default_span=timedelta(hours=1))
    minutes = status.bucket_minutes(query.until - query.since)
    # A token with grants sees the queues it may read, as if it had named them.
    filtered = query.queue is not None or query.namespace is not None or query.task is not None
    filtered = filtered or grants.limits(request) is not None
    matched = grants.readable(
        request,
        "queue",
        status.queues_matching(queue=query.queue, namespace=query.namespace, task=query.task),
        lambda q: q.name,
    )
    names = [q.name for q in matched] if filtered else None
    ids = [q.id for q in matched] if filtered else None
    buckets = status.status_buckets(since=query.since, until=query.until, size=timedelta(minutes=minutes), queues=names)
    counters = {
        c.queue: c for c in grants.readable(request, "queue", queues.queue_counters(now=now), lambda c: c.queue)
    }
    body = wire.render_status(
        query,
        minutes=minutes,
        buckets=buckets,
        matched=matched,
        counters=counters,
        leases=status.lease_summary(queue_ids=ids, now=now),
        dead=status.dlq_summary(queue_ids=ids, since=query.since, until=query.until),
        latest=history.latest_sample_at(),
        now=now,
    )
    return json_response(body)


@router.get("/status/queues", response={200: StatusQueuesOut, **_BAD}, summary="Queues with their depth, newest first")
def get_status_queues(request: HttpRequest) -> HttpResponse:
    limit, offset = wire.parse_page(request.GET)
    namespace = wire.parse_text(request.GET, "namespace")
    task = wire.parse_text(request.GET, "task")
    listed = sorted(
        (
            c
            for c in grants.readable(request, "queue", queues.queue_counters(with_age=False), lambda c: c.queue)
            if (namespace is None or c.namespace == namespace) and (task is None or c.task == task)
        ),
        key=lambda c: (c.created_at, c.queue_id),
        reverse=True,
    )
    return json_response(wire.render_status_queues(listed[offset : offset + limit], limit=limit, offset=offset))


@router.get(
    "/status/queues/{name}",
    response={200: StatusQueueDetailOut, 404: QueueNotFoundOut},
    summary="One queue with its partitions and consumer activity",
)
def get_status_queue(request: HttpRequest, name: str) -> HttpResponse:
    grants.require(request, "queue", name, grants.READ)
    # No queue name holds NUL, and PostgreSQL refuses it in a query.
    stats = None if "\x00" in name else queues.queue_stats(name=name, with_messages=True)
    if stats is None:
        raise QueueNotFound()
    return json_response(wire.render_status_queue(stats, status.partition_activity(queue_id=stats.id)))


@router.get("/status/analytics", response={200: AnalyticsOut, **_BAD}, summary="Messages pushed per time bucket")
def get_analytics(request: HttpRequest) -> HttpResponse:
    now = clock.now()
    query = wire.parse_status(request.GET, now=now, default_span=timedelta(hours=24))
    interval = wire.parse_interval(request.GET)
    starts = wire.analytics_buckets(query.since, query.until, interval)
    filtered = query.queue is not None or query.namespace is not None or query.task is not None
    filtered = filtered or grants.limits(request) is not None
    names = (
        [
            q.name
            for q in grants.readable(
                request,
                "queue",
                status.queues_matching(queue=query.queue, namespace=query.namespace, task=query.task),
                lambda q: q.name,
            )
        ]
        if filtered
        else None
    )
    buckets = status.status_buckets(since=query.since, until=query.until, size=wire.INTERVALS[interval], queues=names)
    pushed = {b.at: b.pushed for b in buckets}
    return json_response(
        wire.render_analytics(query.since, query.until, interval, starts, [pushed.get(at, 0) for at in starts])
    )


@router.post("/stats/refresh", response=StatsRefreshOut, summary="Sample every queue's counters now")
def refresh_stats(request: HttpRequest) -> HttpResponse:
    grants.require_every(request, "queue", grants.WRITE)
    return json_response(wire.render_refresh(history.stats_refresh()))


@router.get(
    "/analytics/system-metrics",
    response={200: SystemMetricsOut, **_BAD},
    summary="CPU, memory and requests of each serving process, per time bucket",
)
def get_system_metrics(request: HttpRequest) -> HttpResponse:
    # Every replica's hostname, port and pid: the deployment, not one
    # resource, so a token limited to some queues gets none of it.
    grants.require_every(request, "queue", grants.READ)
    since, until = wire.parse_range(request.GET, now=clock.now(), default_span=timedelta(hours=1))
    hostname, worker = wire.parse_text(request.GET, "hostname"), wire.parse_text(request.GET, "workerId")
    minutes = status.bucket_minutes(until - since)
    replicas = [
        r
        for r in procmetrics.procmetrics_replicas(since=since, until=until, bucket=timedelta(minutes=minutes))
        if (hostname is None or r.host == hostname) and (worker is None or str(r.pid) == worker)
    ]
    return json_response(wire.render_system_metrics(since, until, minutes, replicas))


@router.get(
    "/analytics/worker-metrics",
    response={200: WorkerMetricsOut, **_BAD},
    summary="Message counts over time, the deployment as one worker",
)
def get_worker_metrics(request: HttpRequest) -> HttpResponse:
    grants.require_every(request, "queue", grants.READ)
    now = clock.now()
    since, until = wire.parse_range(request.GET, now=now, default_span=timedelta(hours=1))
    minutes = status.bucket_minutes(until - since)
    size = timedelta(minutes=minutes)
    counters = queues.queue_counters(now=now)
    per_queue = history.queue_activity(since=since, until=until)
    return json_response(
        wire.render_worker_metrics(
            since,
            until,
            minutes=minutes,
            buckets=status.status_buckets(since=since, until=until, size=size, queues=None),
            per_queue=per_queue,
            counters=counters,
            requests=procmetrics.procmetrics_requests(since=since, until=until, bucket=size),
        )
    )
