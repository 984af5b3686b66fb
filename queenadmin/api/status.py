"""Status and analytics routes: what the operator's scripts and Queen's
console read (``queen.admin``'s status and analytics methods).

Time series come from the statistics sampler's rows
(``domain/queues/history.py``); current numbers from offsets and cursors.
Parsing and shapes live in ``api/wire/status.py``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.http import HttpRequest, HttpResponse

from queenadmin.api import grants
from queenadmin.api.errors import ENGINE_BAD_REQUEST, QUEUE_NOT_FOUND
from queenadmin.api.http import json_response
from queenadmin.api.openapi import parameters
from queenadmin.api.scopes import ScopedRouter
from queenadmin.api.wire import status as wire
from queenadmin.domain import clock, procmetrics, queues
from queenadmin.domain.queues import history, status
from queenadmin.errors import QueueNotFound

router = ScopedRouter(tags=["status"])

_BAD = {400: ENGINE_BAD_REQUEST.model}
#: What a range read answers for each range (docs/reference.md, status reads).
_RANGE = (
    "`from` after `to` is an empty range: 200 with no points. An instant before year 1 or after 9999 in "
    "UTC reads as the first or last one the databases hold (the answer's range says so). 400 "
    '`{"error", "code": "bad_request"}`: a time that is not ISO 8601 (`from must be an ISO time`) or '
    "has no zone (`to must carry a time zone`)."
)


def _matching(request: HttpRequest, query: dict[str, Any]) -> list[status.QueueRow] | None:
    """The queues a status read names (``queue``, ``namespace``, ``task``) and
    the token may read; ``None``: every queue, unfiltered. A token with
    grants sees the queues it may read, as if it had named them."""
    named = {key: query[key] for key in ("queue", "namespace", "task")}
    if all(value is None for value in named.values()) and grants.limits(request) is None:
        return None
    return list(grants.readable(request, "queue", status.queues_matching(**named), lambda q: q.name))


@router.get(
    "/status",
    response={200: wire.STATUS_OUT.model, **_BAD},
    openapi_extra=parameters(query=wire.STATUS.schemas()),
    summary="Throughput, queues, leases and the DLQ",
    description=_RANGE,
)
def get_status(request: HttpRequest) -> HttpResponse:
    now = clock.now()
    query = wire.read(wire.STATUS, request.GET, now=now)
    since, until = query["from"], query["to"]
    minutes = status.bucket_minutes(until - since)
    chosen = _matching(request, query)
    matched = chosen if chosen is not None else status.queues_matching(queue=None, namespace=None, task=None)
    names = None if chosen is None else [q.name for q in chosen]
    ids = None if chosen is None else [q.id for q in chosen]
    counters = {
        c.queue: c for c in grants.readable(request, "queue", queues.queue_counters(now=now), lambda c: c.queue)
    }
    body = wire.render_status(
        since,
        until,
        minutes=minutes,
        buckets=status.status_buckets(since=since, until=until, size=timedelta(minutes=minutes), queues=names),
        matched=matched,
        counters=counters,
        leases=status.lease_summary(queue_ids=ids, now=now),
        dead=status.dlq_summary(queue_ids=ids, since=since, until=until),
        latest=history.latest_sample_at(),
        now=now,
    )
    return json_response(body)


@router.get(
    "/status/queues",
    response={200: wire.STATUS_QUEUES_OUT.model, **_BAD},
    openapi_extra=parameters(query=wire.STATUS_QUEUES.schemas()),
    summary="Queues with their depth, newest first",
)
def get_status_queues(request: HttpRequest) -> HttpResponse:
    query = wire.read(wire.STATUS_QUEUES, request.GET)
    limit, offset, namespace, task = query["limit"], query["offset"], query["namespace"], query["task"]
    listed = sorted(
        (
            c
            for c in grants.readable(request, "queue", queues.queue_counters(with_age=False), lambda c: c.queue)
            if (namespace is None or c.namespace == namespace) and (task is None or c.task == task)
        ),
        key=lambda c: (c.created_at, c.queue_id),
        reverse=True,
    )
    return json_response(wire.STATUS_QUEUES_OUT.render(listed[offset : offset + limit], limit, offset))


@router.get(
    "/status/queues/{name}",
    response={200: wire.STATUS_QUEUE_OUT.model, 404: QUEUE_NOT_FOUND.model},
    summary="One queue with its partitions and consumer activity",
)
def get_status_queue(request: HttpRequest, name: str) -> HttpResponse:
    grants.require(request, "queue", name, grants.READ)
    # No queue name holds NUL, and PostgreSQL refuses it in a query.
    stats = None if "\x00" in name else queues.queue_stats(name=name, with_messages=True)
    if stats is None:
        raise QueueNotFound()
    return json_response(wire.render_status_queue(stats, status.partition_activity(queue_id=stats.id)))


@router.get(
    "/status/analytics",
    response={200: wire.ANALYTICS_OUT.model, **_BAD},
    openapi_extra=parameters(query=wire.ANALYTICS.schemas()),
    summary="Messages pushed per time bucket",
    description=(
        f"At most {wire.MAX_ANALYTICS_POINTS} buckets: a finer `interval` is answered with the next coarser "
        f"one that fits (minute, hour, day; the answer's `interval`), a range of more than "
        f"{wire.MAX_ANALYTICS_POINTS} days with its last {wire.MAX_ANALYTICS_POINTS} (the answer's `from`). "
        + _RANGE
        + " 400 too for an `interval` other than minute, hour or day."
    ),
)
def get_analytics(request: HttpRequest) -> HttpResponse:
    query = wire.read(wire.ANALYTICS, request.GET, now=clock.now(), span=timedelta(hours=24))
    until = query["to"]
    series = wire.analytics_series(query["from"], until, query["interval"])
    chosen = _matching(request, query)
    names = None if chosen is None else [q.name for q in chosen]
    size = wire.INTERVALS[series.interval]
    buckets = status.status_buckets(since=series.since, until=until, size=size, queues=names)
    pushed = {b.at: b.pushed for b in buckets}
    counts = [pushed.get(at, 0) for at in series.starts]
    return json_response(wire.ANALYTICS_OUT.render(series, until, counts))


@router.post("/stats/refresh", response=wire.REFRESH_OUT.model, summary="Sample every queue's counters now")
def refresh_stats(request: HttpRequest) -> HttpResponse:
    grants.require_every(request, "queue", grants.WRITE)
    return json_response(wire.REFRESH_OUT.render(history.stats_refresh()))


@router.get(
    "/analytics/system-metrics",
    response={200: wire.SYSTEM_METRICS_OUT.model, **_BAD},
    openapi_extra=parameters(query=wire.SYSTEM_METRICS.schemas()),
    summary="CPU, memory and requests of each serving process, per time bucket",
    description=_RANGE,
)
def get_system_metrics(request: HttpRequest) -> HttpResponse:
    # Every replica's hostname, port and pid: the deployment, not one
    # resource, so a token limited to some queues gets none of it.
    grants.require_every(request, "queue", grants.READ)
    query = wire.read(wire.SYSTEM_METRICS, request.GET)
    since, until, hostname, worker = query["from"], query["to"], query["hostname"], query["workerId"]
    minutes = status.bucket_minutes(until - since)
    replicas = [
        r
        for r in procmetrics.procmetrics_replicas(since=since, until=until, bucket=timedelta(minutes=minutes))
        if (hostname is None or r.host == hostname) and (worker is None or str(r.pid) == worker)
    ]
    return json_response(wire.SYSTEM_METRICS_OUT.render(replicas, since, until, minutes))


@router.get(
    "/analytics/worker-metrics",
    response={200: wire.WORKER_METRICS_OUT.model, **_BAD},
    openapi_extra=parameters(query=wire.WORKER_METRICS.schemas()),
    summary="Message counts over time, the deployment as one worker",
    description=_RANGE,
)
def get_worker_metrics(request: HttpRequest) -> HttpResponse:
    grants.require_every(request, "queue", grants.READ)
    now = clock.now()
    query = wire.read(wire.WORKER_METRICS, request.GET, now=now)
    since, until = query["from"], query["to"]
    minutes = status.bucket_minutes(until - since)
    size = timedelta(minutes=minutes)
    return json_response(
        wire.WORKER_METRICS_OUT.render(
            queues.queue_counters(now=now),
            since,
            until,
            minutes,
            status.status_buckets(since=since, until=until, size=size, queues=None),
            history.queue_activity(since=since, until=until),
            procmetrics.procmetrics_requests(since=since, until=until, bucket=size),
        )
    )
