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

import bisect
import functools
import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

from queenadmin.conf import settings
from queenadmin.domain.locks import tally as lock_tally
from queenadmin.domain.tokens import Grants
from queenadmin.plumbing import compat

log = logging.getLogger(__name__)

#: Lock wait and hold buckets in seconds: from a lock taken at once to leases of minutes.
LOCK_BUCKETS = (0.001, 0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0)
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
    lock_ops: Any
    lock_wait: Any
    lock_hold: Any


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
        # Issue 41: contention. Counters and histograms are summed over the
        # workers by prometheus_client's multiprocess collector, like the
        # request metrics.
        lock_ops=Counter("queenadmin_lock_operations", "Lock operations by op and outcome.", ["op", "outcome"]),
        lock_wait=Histogram(
            "queenadmin_lock_wait_seconds",
            "How long a granted acquire's owner waited (its refused attempts seen by the same process).",
            buckets=LOCK_BUCKETS,
        ),
        lock_hold=Histogram(
            "queenadmin_lock_hold_seconds",
            "From grant to release (or force release) of a lease, through any worker or replica.",
            buckets=LOCK_BUCKETS,
        ),
    )


class RequestTally:
    """Request counts kept in plain dicts, written to prometheus_client in bulk.

    In multiprocess mode every ``inc``/``dec``/``observe`` of
    prometheus_client writes a memory-mapped file under a lock: five such
    writes per request were 13 us, about 1.2% of a KV put's server CPU
    (issue 14 asks for at most 2% with a scraper, issue 15 for a third less
    CPU per call). Here a request costs a few dictionary updates under one
    lock; ``flush`` adds the deltas to the counters and histogram and sets
    the in-progress gauge. It runs every ``METRICS_FLUSH_SECONDS`` (a
    thread), before this process answers a scrape, and when the worker
    stops, so a scrape sees this worker's requests exactly and other
    workers' as of their last flush.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._in_progress: dict[str, int] = {}
        self._requests: dict[tuple[str, int], int] = {}
        #: route -> [count per bucket..., sum of seconds]
        self._latency: dict[str, list[float]] = {}
        #: route -> requests answered since the process started (never reset).
        self._served: dict[str, int] = {}
        self._flusher: threading.Thread | None = None

    def started(self, route: str) -> None:
        with self._lock:
            self._in_progress[route] = self._in_progress.get(route, 0) + 1
        if self._flusher is None:
            self._start_flusher()

    def finished(self, route: str, status: int, seconds: float) -> None:
        bucket = bisect.bisect_left(_UPPER_BOUNDS, seconds)
        with self._lock:
            self._in_progress[route] -= 1
            key = (route, status)
            self._requests[key] = self._requests.get(key, 0) + 1
            self._served[route] = self._served.get(route, 0) + 1
            latency = self._latency.get(route)
            if latency is None:
                latency = self._latency[route] = [0.0] * (len(_UPPER_BOUNDS) + 1)
            latency[bucket] += 1
            latency[-1] += seconds

    def served(self) -> dict[str, int]:
        """Requests answered by this process since it started, by route class."""
        with self._lock:
            return dict(self._served)

    def flush(self) -> None:
        with self._lock:
            requests, self._requests = self._requests, {}
            latency, self._latency = self._latency, {}
            in_progress = dict(self._in_progress)
        metrics = process_metrics()
        for (route, status), count in requests.items():
            metrics.requests.labels(route, str(status)).inc(count)
        for route, counts in latency.items():
            child = metrics.latency.labels(route)
            for bucket, observed in enumerate(counts[:-1]):
                if observed:
                    # What ``observe`` does once per request: the first
                    # bucket whose bound holds the value, and the sum.
                    compat.histogram_add(child, bucket, observed)
            compat.histogram_add_sum(child, counts[-1])
        for route, count in in_progress.items():
            metrics.in_progress.labels(route).set(count)

    def _start_flusher(self) -> None:
        with self._lock:
            if self._flusher is not None:
                return
            self._flusher = threading.Thread(target=self._flush_every, name="queenadmin-metrics", daemon=True)
        self._flusher.start()

    def _flush_every(self) -> None:
        while True:
            time.sleep(settings.METRICS_FLUSH_SECONDS)
            try:
                self.flush()
            except Exception:
                log.exception("could not write the request metrics")


#: The histogram's bucket bounds, +Inf last (as prometheus_client keeps them).
_UPPER_BOUNDS = (*LATENCY_BUCKETS, float("inf"))

tally = RequestTally()


def request_started(route: str) -> None:
    tally.started(route)


def request_finished(route: str, status: int, seconds: float) -> None:
    tally.finished(route, status, seconds)


def loop_step(loop: str, *, ok: bool, at: float) -> None:
    """Count one step of background loop ``loop`` (``server.loops`` calls it)."""
    metrics = process_metrics()
    if ok:
        metrics.loop_steps.labels(loop).inc()
        metrics.loop_last_success.labels(loop).set(at)
    else:
        metrics.loop_failures.labels(loop).inc()


def lock_operation(op: str, outcome: str) -> None:
    """Count one lock operation (``domain/locks/calls.py``, through ``domain/locks/tally.py``)."""
    process_metrics().lock_ops.labels(op, outcome).inc()


def lock_wait(seconds: float) -> None:
    process_metrics().lock_wait.observe(seconds)


def lock_hold(seconds: float) -> None:
    process_metrics().lock_hold.observe(seconds)


#: The lock operations the domain reports (``domain/locks/tally.py``), counted here.
lock_tally.count_with(lock_tally.Counters(operation=lock_operation, wait=lock_wait, hold=lock_hold))


def worker_started() -> None:
    process_metrics().workers.set(1)


def worker_exited(pid: int) -> None:
    """Write this worker's last counts; drop its live gauges (multiprocess mode only)."""
    tally.flush()
    process_metrics().workers.set(0)
    if multiprocess_dir() is None:
        return
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]


def render(grants: Grants | None = None) -> tuple[bytes, str]:
    """The exposition text of every worker's counters and the store's gauges.

    With ``grants`` (a token limited to some resources), only the series
    they cover (``store.Reach``): the per-resource gauges of the resources
    they let it read, and the processes' counters only with a read grant on
    every queue (the API's store-wide rule). Without, everything, at the
    cost it always had.
    """
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.multiprocess import MultiProcessCollector

    from queenadmin.metrics.store import Reach, StoreCollector

    reach = None if grants is None else Reach(grants)
    registry = CollectorRegistry()
    if reach is None or reach.deployment:
        process_metrics()
        tally.flush()
        if multiprocess_dir() is not None:
            MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        else:
            # One process: our metrics as they are (not the default registry's
            # process and GC collectors, which multiprocess mode lacks).
            for collector in _own_collectors():
                registry.register(collector)
    registry.register(StoreCollector(reach))
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
        metrics.lock_ops,
        metrics.lock_wait,
        metrics.lock_hold,
    ]
