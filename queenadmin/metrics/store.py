"""Store gauges for ``/metrics``, read from the database at scrape time.

Every worker reads the same database, so any worker answers the same. Reads
only, through the domain's read functions where one exists; nothing here
locks. The cost of one read, per figure:

- per queue: ``queue_list`` (arithmetic on partition offsets and cursors,
  three queries a queue), then the push times of every partition's oldest
  ready message in one query of indexed (partition, offset) lookups;
- dead letters per queue, KV rows per namespace, timers pending: one
  ``GROUP BY`` / ``COUNT`` over an index (O(rows), index-only on
  PostgreSQL);
- locks held, the most overdue timer: one index range or ``MIN``.

A process reads at most once per ``METRICS_STORE_SECONDS`` (a scraper
polling every second costs one read per that many seconds per worker).
Measured on PostgreSQL with 10 queues of 20 partitions and 10,000 KV rows
on a loaded 2-core box: 185 ms of CPU per read when each queue's age came
from ``queue_stats(with_age=True)`` (24 queries a queue), hence one query.

A token with grants sees the figures its grants cover (``Reach``), taken
from the same cached read: a queue's figures with a read grant on the
queue, a namespace's rows with one on the namespace, and a total over every
resource of a kind only with a read grant on all of them (``kind:*``).
"""

from __future__ import annotations

import functools
import operator
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, Min, Q

from queenadmin.conf import settings
from queenadmin.domain import clock
from queenadmin.domain.kv import LOCKS_NAMESPACE
from queenadmin.domain.queues.board import queue_in_flight
from queenadmin.domain.queues.stats import QueueStats, queue_list
from queenadmin.domain.tokens import Grants
from queenadmin.models import TokenScope
from queenadmin.models.kv import KVEntry
from queenadmin.models.queues import DeadLetter, Message
from queenadmin.models.timers import Timer

READ = TokenScope.READ


@dataclass(frozen=True)
class QueueFigures:
    depth: int
    in_flight: int
    dead_letters: int
    oldest_ready_age: float


@dataclass(frozen=True)
class StoreFigures:
    queues: dict[str, QueueFigures]
    locks_held: int
    timers_pending: int
    timers_overdue_seconds: float
    kv_rows: dict[str, int]
    read_seconds: float


#: (partition, offset) pairs per query: SQLite parses a chain of ORs as a
#: tree as deep as the chain, and refuses one deeper than 1,000.
_HEADS_PER_QUERY = 200


def _oldest_ready(queues: list[QueueStats]) -> dict[str, datetime]:
    """Each queue's oldest ready message's push time, by indexed lookups."""
    heads = [(q.name, p.id, p.ready_offset) for q in queues for p in q.partitions if p.ready_offset is not None]
    oldest: dict[str, datetime] = {}
    for start in range(0, len(heads), _HEADS_PER_QUERY):
        chunk = heads[start : start + _HEADS_PER_QUERY]
        queue_of = {(pid, offset): name for name, pid, offset in chunk}
        wanted = functools.reduce(operator.or_, (Q(partition_id=pid, offset=offset) for _, pid, offset in chunk))
        for pid, offset, created in Message.objects.filter(wanted).values_list("partition_id", "offset", "created_at"):
            name = queue_of[pid, offset]
            if name not in oldest or created < oldest[name]:
                oldest[name] = created
    return oldest


def read_store() -> StoreFigures:
    started = time.perf_counter()
    now = clock.now()
    dead = dict(
        DeadLetter.objects.values("queue__name").annotate(n=Count("id")).values_list("queue__name", "n").order_by()
    )
    listed = queue_list()
    leased = queue_in_flight()
    oldest = _oldest_ready(listed)
    queues: dict[str, QueueFigures] = {}
    for queue in listed:
        created = oldest.get(queue.name)
        queues[queue.name] = QueueFigures(
            depth=queue.totals.pending,
            in_flight=leased.get(queue.name, 0),
            dead_letters=dead.get(queue.name, 0),
            oldest_ready_age=0.0 if created is None else max(0.0, (now - created).total_seconds()),
        )
    locks_held = KVEntry.objects.live(now).filter(namespace=LOCKS_NAMESPACE).count()
    timers = Timer.objects.aggregate(n=Count("id"))
    first_due = Timer.objects.filter(deliver_at__lte=now).aggregate(first=Min("deliver_at"))["first"]
    overdue = 0.0 if first_due is None else max(0.0, (now - first_due).total_seconds())
    kv_rows = dict(KVEntry.objects.values("namespace").annotate(n=Count("id")).values_list("namespace", "n").order_by())
    return StoreFigures(queues, locks_held, int(timers["n"]), overdue, kv_rows, time.perf_counter() - started)


class _Cache:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.figures: StoreFigures | None = None
        self.read_at = 0.0

    def get(self) -> StoreFigures:
        with self.lock:
            fresh_for = settings.METRICS_STORE_SECONDS
            if self.figures is None or time.monotonic() - self.read_at >= fresh_for:
                self.figures = read_store()
                self.read_at = time.monotonic()
            return self.figures


cache = _Cache()


@dataclass(frozen=True)
class Reach:
    """What of the store figures a token with grants sees (one without grants sees all)."""

    grants: Grants

    def queue(self, name: str) -> bool:
        return self.grants.allows("queue", name, READ)

    def namespace(self, name: str) -> bool:
        if name == LOCKS_NAMESPACE:
            # Its rows are the permits of every lock: a lock total.
            return self.grants.allows_every("lock", READ)
        return self.grants.allows("kv", name, READ)

    @property
    def locks(self) -> bool:
        return self.grants.allows_every("lock", READ)

    @property
    def timers(self) -> bool:
        return self.grants.allows_every("timer", READ)

    @property
    def deployment(self) -> bool:
        """The processes' own series: the API's store-wide rule (``queue:*``)."""
        return self.grants.allows_every("queue", READ)


class StoreCollector:
    """A prometheus_client collector of ``read_store``'s figures, all of them or what ``reach`` covers."""

    def __init__(self, reach: Reach | None = None) -> None:
        self.reach = reach

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        figures = cache.get()
        reach = self.reach
        queues, kv_rows = figures.queues, figures.kv_rows
        if reach is not None:
            queues = {name: numbers for name, numbers in queues.items() if reach.queue(name)}
            kv_rows = {name: rows for name, rows in kv_rows.items() if reach.namespace(name)}

        def per_queue(name: str, doc: str, pick: Any) -> GaugeMetricFamily:
            family = GaugeMetricFamily(name, doc, labels=["queue"])
            for queue, numbers in sorted(queues.items()):
                family.add_metric([queue], pick(numbers))
            return family

        yield per_queue(
            "queenadmin_queue_depth",
            "Messages not yet completed, behind the slowest consumer group.",
            lambda q: q.depth,
        )
        yield per_queue(
            "queenadmin_queue_in_flight",
            "Messages leased and not yet acked, by any consumer group.",
            lambda q: q.in_flight,
        )
        yield per_queue("queenadmin_queue_dead_letters", "Messages in the dead-letter queue.", lambda q: q.dead_letters)
        yield per_queue(
            "queenadmin_queue_oldest_ready_age_seconds",
            "Age of the oldest message a pop could claim now (0 when none).",
            lambda q: q.oldest_ready_age,
        )
        if reach is None or reach.locks:
            yield GaugeMetricFamily(
                "queenadmin_locks_held", "Lock and semaphore permits held.", value=figures.locks_held
            )
        if reach is None or reach.timers:
            yield GaugeMetricFamily("queenadmin_timers_pending", "Timers not yet fired.", value=figures.timers_pending)
            yield GaugeMetricFamily(
                "queenadmin_timers_overdue_seconds",
                "How late the most overdue pending timer is (0 when none is due): the timer loop's lateness.",
                value=figures.timers_overdue_seconds,
            )
        kv = GaugeMetricFamily(
            "queenadmin_kv_rows",
            "KV rows stored per namespace (expired rows until the reaper passes).",
            labels=["namespace"],
        )
        for namespace, rows in sorted(kv_rows.items()):
            kv.add_metric([namespace], rows)
        yield kv
        if reach is None or reach.deployment:
            yield GaugeMetricFamily(
                "queenadmin_store_read_seconds",
                "How long the last read of these store figures took.",
                value=figures.read_seconds,
            )
