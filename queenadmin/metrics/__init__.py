"""``GET /metrics``: the Prometheus text format.

Two kinds of numbers, and how each stays right with several workers:

- **Per-process counters** (requests by route class and status, their
  latency, background loop health) live in prometheus_client's
  multiprocess mode: ``serve`` gives every worker one directory
  (``PROMETHEUS_MULTIPROC_DIR``), each worker writes its counters to
  memory-mapped files there, and a scrape answered by any worker sums them
  all. So a scrape counts every worker's requests, whichever worker the
  load balancer hands it to.
- **Store gauges** (queue depth, in flight, dead letters, oldest ready age,
  locks held, timers pending and overdue, KV rows per namespace) come from
  the database at scrape time, so every worker answers the same. They are
  read at most once per ``METRICS_STORE_SECONDS`` per process (``store``).

prometheus_client is imported lazily: it picks its storage (memory or the
multiprocess directory) when first imported, which must come after
``serve`` has set the directory.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Any

#: Latency buckets in seconds: a KV call is ~1-5 ms, a long-poll pop up to 30 s.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

#: Path prefix -> route class, first match wins. A closed set keeps the
#: label's cardinality fixed whatever paths clients send.
ROUTE_CLASSES: tuple[tuple[str, str], ...] = (
    ("/api/v1/kv", "kv"),
    ("/api/v1/locks", "locks"),
    ("/api/v1/timers", "timers"),
    ("/api/v1/transaction", "transaction"),
    ("/api/v1/push", "push"),
    ("/api/v1/pop", "pop"),
    ("/api/v1/ack", "ack"),
    ("/api/v1/docs", "docs"),
    ("/api/v1/openapi.json", "docs"),
    ("/api/", "api_other"),
    ("/metrics", "metrics"),
    ("/health", "health"),
    ("/admin/", "admin"),
    ("/static/", "static"),
)


#: The text format every Prometheus reads (prometheus_client 0.22+ labels
#: its output 1.0.0, which Prometheus 2 does not know; the text is the same
#: for our metric names).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def route_class(path: str) -> str:
    for prefix, name in ROUTE_CLASSES:
        if path.startswith(prefix):
            return name
    return "dashboard"


def multiprocess_dir() -> str | None:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


@dataclass(frozen=True)
class ProcessMetrics:
    requests: Any
    latency: Any
    in_progress: Any
    loop_steps: Any
    loop_failures: Any
    loop_last_success: Any
    workers: Any


@functools.cache
def process_metrics() -> ProcessMetrics:
    from prometheus_client import Counter, Gauge, Histogram

    return ProcessMetrics(
        requests=Counter(
            "queenadmin_http_requests", "HTTP requests answered, by route class and status.", ["route", "status"]
        ),
        latency=Histogram(
            "queenadmin_http_request_duration_seconds",
            "Time from a request's arrival to the end of its answer, by route class.",
            ["route"],
            buckets=LATENCY_BUCKETS,
        ),
        in_progress=Gauge(
            "queenadmin_http_requests_in_progress",
            "Requests arrived and not yet answered, by route class (waiting long-poll pops among them).",
            ["route"],
            multiprocess_mode="livesum",
        ),
        loop_steps=Counter("queenadmin_loop_steps", "Background loop steps that succeeded.", ["loop"]),
        loop_failures=Counter("queenadmin_loop_failures", "Background loop steps that raised.", ["loop"]),
        loop_last_success=Gauge(
            "queenadmin_loop_last_success_timestamp_seconds",
            "Unix time of the newest successful step of a background loop in any live worker.",
            ["loop"],
            multiprocess_mode="max",
        ),
        workers=Gauge(
            "queenadmin_workers", "Server processes serving (1 per live worker).", multiprocess_mode="livesum"
        ),
    )


#: Labelled children by route class (and status): ``labels()`` costs ~1 us
#: a call under its lock, four of them per request.
_by_route: dict[str, tuple[Any, Any]] = {}
_by_status: dict[tuple[str, int], Any] = {}


def _route_children(route: str) -> tuple[Any, Any]:
    found = _by_route.get(route)
    if found is None:
        metrics = process_metrics()
        found = _by_route[route] = (metrics.in_progress.labels(route), metrics.latency.labels(route))
    return found


def request_started(route: str) -> None:
    _route_children(route)[0].inc()


def request_finished(route: str, status: int, seconds: float) -> None:
    in_progress, latency = _route_children(route)
    in_progress.dec()
    latency.observe(seconds)
    counter = _by_status.get((route, status))
    if counter is None:
        counter = _by_status[route, status] = process_metrics().requests.labels(route, str(status))
    counter.inc()


def loop_step(loop: str, *, ok: bool, at: float) -> None:
    """Count one step of background loop ``loop`` (``loops`` calls it)."""
    metrics = process_metrics()
    if ok:
        metrics.loop_steps.labels(loop).inc()
        metrics.loop_last_success.labels(loop).set(at)
    else:
        metrics.loop_failures.labels(loop).inc()


def worker_started() -> None:
    process_metrics().workers.set(1)


def worker_exited(pid: int) -> None:
    """Drop a stopped worker's live gauges (multiprocess mode only)."""
    process_metrics().workers.set(0)
    if multiprocess_dir() is None:
        return
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]


def render() -> tuple[bytes, str]:
    """The exposition text of every worker's counters and the store's gauges."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.multiprocess import MultiProcessCollector

    from queenadmin.metrics.store import StoreCollector

    process_metrics()
    registry = CollectorRegistry()
    if multiprocess_dir() is not None:
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    else:
        # One process: our metrics as they are (not the default registry's
        # process and GC collectors, which multiprocess mode lacks).
        for collector in _own_collectors():
            registry.register(collector)
    registry.register(StoreCollector())
    return generate_latest(registry), CONTENT_TYPE


def _own_collectors() -> list[Any]:
    metrics = process_metrics()
    return [
        metrics.requests,
        metrics.latency,
        metrics.in_progress,
        metrics.loop_steps,
        metrics.loop_failures,
        metrics.loop_last_success,
        metrics.workers,
    ]
