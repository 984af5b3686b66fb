"""``/consumers/``: who consumes, and how fast.

A live page with one region, ``consumers-body``: the consumer processes
from their supervision heartbeats (``domain/supervision.py``: the official
client's ``supervision()`` writes them to KV every 10 s), one row per
``consume`` each runs, stale and unreadable ones marked; and per queue and
consumer group the rates of the last minutes, the lag and the time to
drain (``domain/queues/rates.py``). Filter by queue (``?queue=``). Three
statements whatever the number of consumers or groups; the heartbeats
page stops at ``supervision.MAX_ROWS`` keys and the groups at
``GROUP_PAGE``, and the page says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.http import QueryDict

from queenadmin.dashboard import live
from queenadmin.dashboard.views.access import User, page_view
from queenadmin.dashboard.views.rates import GroupRateLine, group_line, window_text
from queenadmin.domain import clock, events
from queenadmin.domain.queues import rates
from queenadmin.domain.supervision import NAMESPACE, Heartbeat, Pool, supervision_heartbeats
from queenadmin.models.queues import QUEUE_MODE

#: Groups listed at most.
GROUP_PAGE = 500


@dataclass(frozen=True)
class ConsumerRow:
    """One ``consume`` of a consumer process (or a heartbeat that does not
    parse, or names none), as a row."""

    beat: Heartbeat
    pool: Pool | None

    @property
    def instance(self) -> str:
        return self.beat.slot.partition("/")[2]

    @property
    def reads(self) -> str:
        """What the pool consumes: its queue, else its namespace and task."""
        pool = self.pool
        if pool is None:
            return ""
        if pool.queue is not None:
            return pool.queue
        return " ".join(f"{k}={v}" for k, v in (("namespace", pool.namespace), ("task", pool.task)) if v)

    @property
    def is_queue_mode(self) -> bool:
        return self.pool is not None and self.pool.group == QUEUE_MODE


def _rows(beats: tuple[Heartbeat, ...], queue: str | None) -> list[ConsumerRow]:
    rows: list[ConsumerRow] = []
    for beat in beats:
        pools = [p for p in beat.pools if queue is None or p.queue == queue]
        if pools:
            rows.extend(ConsumerRow(beat, p) for p in pools)
        elif queue is None:
            rows.append(ConsumerRow(beat, None))
    return rows


def consumers_context(user: User, params: QueryDict) -> dict[str, Any]:
    now = clock.now()
    queue = params.get("queue", "").strip() or None
    heartbeats = supervision_heartbeats(now=now)
    ins = rates.queue_rates(now=now, queue=queue)
    measured = rates.group_rates(now=now, queue=queue, ins=ins, limit=GROUP_PAGE + 1)
    groups: list[GroupRateLine] = [group_line(r) for r in measured[:GROUP_PAGE]]
    fresh = [b.stale_at for b in heartbeats.beats if b.fresh and b.stale_at is not None]
    stale_at: datetime | None = min(fresh, default=None)
    return {
        "now": now,
        "queue": queue or "",
        "consumers": _rows(heartbeats.beats, queue),
        "consumers_truncated": heartbeats.truncated,
        "live": sum(1 for b in heartbeats.beats if b.fresh),
        "groups": groups,
        "groups_more": len(measured) > GROUP_PAGE,
        "window": window_text(),
        "namespace": NAMESPACE,
        # A fresh heartbeat goes stale with no event: re-render then.
        "stale_at": stale_at,
    }


def _about_consumers(message: dict[str, Any], params: QueryDict) -> bool:
    """A KV write concerns the page only in the heartbeats' namespace (a
    message that names none may be about any); every queue event does."""
    if message.get("type") != "kv.changed":
        return True
    names = message.get("namespaces") or []
    return not names or NAMESPACE in names


CONSUMERS = live.one_region_page(
    "consumers",
    "queenadmin/consumers.html",
    consumers_context,
    "consumers-body",
    events.KV_GROUP,
    events.QUEUES_GROUP,
    match=_about_consumers,
    nav="consumers",
    perm="queues",
    # Heartbeats arrive every 10 s per consumer: at most one push every 2 s.
    gap=2.0,
)
consumers_page = page_view(CONSUMERS)
