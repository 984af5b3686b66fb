"""The attention store's interface, and the SQL both databases share.

The facts are read from the statistics sampler's rows in one statement for
every queue, each over its own window (its threshold's, else the
default): the rows at the window's last, first and middle ticks, read
from the (resolution, at) index, so the cost is the queues' rows at three
ticks whatever the window's length. Every queue is sampled at the same
ticks (the sampler writes them all at once), which is what lets a tick
name the rows. The thresholds are a table of at most one row per queue.
The databases differ only in how the ticks' rows are kept for the joins
(``_MATERIALIZED``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from django.db import connection

from queenadmin.models import AttentionThreshold
from queenadmin.plumbing.db import from_db_time, to_db_time

#: (queue, namespace, task, queue created at (only when not sampled at the
#: window's first tick, else None), window minutes; at the last
#: tick: depth, oldest claimable age, popped, completed (acked + dead-lettered)
#: and dead-lettered counts ever; at the window's first tick, if sampled:
#: depth, popped, completed, dead-lettered ever; depth at its middle tick;
#: whether every pop of the queue is paused).
FactsRow = tuple[
    str,
    str | None,
    str | None,
    datetime | None,
    int,
    int,
    float,
    int,
    int,
    int,
    int | None,
    int | None,
    int | None,
    int | None,
    int | None,
    bool,
]

_FIELDS = ("max_lag", "max_age_seconds", "dlq_growth", "window_minutes")


@dataclass(frozen=True)
class ThresholdRow:
    """A stored row of thresholds: a queue's ("" for the defaults)."""

    queue: str
    max_lag: int | None
    max_age_seconds: int | None
    dlq_growth: int | None
    window_minutes: int | None
    updated_at: datetime


class Store:
    """What the attention list needs of a database."""

    #: How a tick's rows are kept for the joins: PostgreSQL would inline a
    #: common table expression read once and look each row up again.
    _MATERIALIZED: ClassVar[str] = ""

    def thresholds(self) -> list[ThresholdRow]:
        """Every stored row of thresholds, the defaults' first."""
        rows = AttentionThreshold.objects.order_by("queue").values_list("queue", *_FIELDS, "updated_at")
        return [ThresholdRow(*row) for row in rows]

    def threshold_of(self, queue: str) -> ThresholdRow | None:
        row = AttentionThreshold.objects.filter(queue=queue).values_list("queue", *_FIELDS, "updated_at").first()
        return None if row is None else ThresholdRow(*row)

    def write_threshold(self, queue: str, values: dict[str, int | None], now: datetime) -> None:
        """Store ``queue``'s row (insert or replace). Inside the caller's transaction."""
        assert connection.in_atomic_block
        AttentionThreshold.objects.update_or_create(queue=queue, defaults={**values, "updated_at": now})

    def delete_threshold(self, queue: str) -> int:
        """Forget ``queue``'s row; the rows deleted. Inside the caller's transaction."""
        assert connection.in_atomic_block
        return AttentionThreshold.objects.filter(queue=queue).delete()[0]

    def facts(
        self,
        *,
        resolution: int,
        last: datetime,
        windows: Sequence[tuple[int, datetime, datetime]],
        default_window_minutes: int,
    ) -> list[FactsRow]:
        """Per queue sampled at tick ``last``: what ``FactsRow`` names.

        ``windows`` holds (window minutes, its first tick, its middle tick)
        for every window a queue may have: its row of thresholds', else
        ``default_window_minutes``. One statement: the rows of the last,
        first and middle ticks, never the rows between them.
        """
        if not windows:
            return []
        values = ", ".join(["(%s, %s, %s)"] * len(windows))
        # Every queue is sampled at a tick, so a tick's rows sit together
        # on the (resolution, at) index: three short range reads, joined by
        # hash, where a lookup a queue and tick took twelve thousand pages
        # at 1,000 queues.
        tick = (
            "{a} AS {materialized} (SELECT id, queue, queue_id, depth, oldest_claimable_age, popped_total,"
            " acked_total, dlq_total, at FROM queenadmin_queuesample WHERE resolution = %s AND at {at})"
        )
        sql = (
            f"WITH v AS (VALUES {values}), "
            + ", ".join(
                tick.format(a=a, at=at, materialized=self._MATERIALIZED)
                for a, at in (("l", "= %s"), ("f", "IN (SELECT column2 FROM v)"), ("m", "IN (SELECT column3 FROM v)"))
            )
            # The creation time only where the first tick was not sampled
            # (the one case that reads it): a thousand parsed times cost more
            # than the rows.
            + " SELECT q.name, q.namespace, q.task, CASE WHEN f.id IS NULL THEN q.created_at END, v.column1,"
            " l.depth, l.oldest_claimable_age, l.popped_total, l.acked_total + l.dlq_total, l.dlq_total,"
            " f.depth, f.popped_total, f.acked_total + f.dlq_total, f.dlq_total, m.depth, q.paused"
            " FROM queenadmin_queue q"
            " LEFT JOIN queenadmin_attentionthreshold o ON o.queue = q.name"
            " JOIN v ON v.column1 = COALESCE(o.window_minutes, %s)"
            " JOIN l ON l.queue_id = q.id AND l.queue = q.name"
            " LEFT JOIN f ON f.queue_id = q.id AND f.queue = q.name AND f.at = v.column2"
            " LEFT JOIN m ON m.queue_id = q.id AND m.queue = q.name AND m.at = v.column3"
        )
        params: list[Any] = [v for w, first, middle in windows for v in (w, to_db_time(first), to_db_time(middle))]
        params += [resolution, to_db_time(last), resolution, resolution, default_window_minutes]
        with connection.cursor() as cur:
            cur.execute(sql, params)
            return [
                (
                    name,
                    namespace,
                    task,
                    None if created is None else from_db_time(created),
                    int(window),
                    int(depth),
                    float(age),
                    int(popped),
                    int(completed),
                    int(dlq),
                    None if f_depth is None else int(f_depth),
                    None if f_popped is None else int(f_popped),
                    None if f_completed is None else int(f_completed),
                    None if f_dlq is None else int(f_dlq),
                    None if m_depth is None else int(m_depth),
                    bool(paused),
                )
                for (
                    name,
                    namespace,
                    task,
                    created,
                    window,
                    depth,
                    age,
                    popped,
                    completed,
                    dlq,
                    f_depth,
                    f_popped,
                    f_completed,
                    f_dlq,
                    m_depth,
                    paused,
                ) in cur.fetchall()
            ]
