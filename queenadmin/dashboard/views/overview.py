"""``/``: counts and health at a glance, live (one region, ``overview-body``).

Besides the counts: the queues that need attention (``domain/attention``,
from the statistics sampler's rows and the consumer heartbeats), each
queue's in and out rates, and the live consumers. Every read is a fixed
number of statements whatever the number of queues.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.http import QueryDict
from django.utils.safestring import SafeString

from queenadmin.dashboard import live, svg
from queenadmin.dashboard.views.access import User, page_view
from queenadmin.dashboard.views.durations import age_seconds, short_duration
from queenadmin.dashboard.views.queues import CHART_WINDOW, rate_unit, series_points
from queenadmin.dashboard.views.rates import per_second, window_text
from queenadmin.domain import clock, events
from queenadmin.domain.attention import AttentionList, needs_attention
from queenadmin.domain.kv import LOCKS_NAMESPACE, kv_namespaces_kept
from queenadmin.domain.locks.operator import server_permits_held
from queenadmin.domain.overview import Bounded, TimersDue, dead_letters_total, locks_held, timers_due
from queenadmin.domain.queues.board import QueueBoard, queue_boards_deepest
from queenadmin.domain.queues.history import queues_depth_series, total_series
from queenadmin.domain.queues.rates import QueueRate, queue_rates
from queenadmin.domain.supervision import supervision_heartbeats


@dataclass(frozen=True)
class QueueLine:
    board: QueueBoard
    oldest_age: str
    #: "idle" or "busy" (in flight) when nothing is claimable; else
    #: "no-reader" or "stalled" as the attention list judges it (a queue no
    #: group reads is never "stalled"), "ready" otherwise.
    state: str
    #: Pushed, and acked or dead-lettered (every group), per second over
    #: the rate window ("—": no sample).
    in_rate: str = "—"
    out_rate: str = "—"

    @property
    def state_label(self) -> str:
        return self.state.replace("-", " ")


def _state(board: QueueBoard, reading: str) -> str:
    if board.oldest_claimable_at is None:
        return "idle" if not board.in_flight else "busy"
    return reading or "ready"


def _line(board: QueueBoard, now: datetime, attention: AttentionList, ins: dict[str, QueueRate]) -> QueueLine:
    rate = ins.get(board.name)
    return QueueLine(
        board,
        short_duration(age_seconds(board.oldest_claimable_at, now)),
        _state(board, attention.reading.get(board.name, "")),
        per_second(rate.in_per_second) if rate else "—",
        per_second(rate.out_per_second) if rate else "—",
    )


def _locks_held(now: datetime) -> dict[str, Any]:
    """The tile's permit count: applications' permits, the server's apart."""
    held = locks_held(now=now)
    server = server_permits_held(now=now)
    users = Bounded(max(0, held.value - server), held.capped, held.estimate)
    return {"locks_held": count_text(users), "server_permits": server}


def _namespaces() -> tuple[datetime | None, list[tuple[str, str]]]:
    """Keys per KV namespace, the locks' aside, as the statistics sampler
    last counted them, and when (None: not yet).

    Counting is one scan of every key (``kv_namespaces``, as ``/kv/``
    counts: expired-but-unreaped rows included), 10 to 20 ms at 100,000 keys
    and growing with them; the sampler does it once a tick, whoever looks,
    instead of every render of every open overview.
    """
    at, counts = kv_namespaces_kept()
    return at, [(ns, f"{n:,}") for ns, n in counts if ns != LOCKS_NAMESPACE]


def count_text(count: Bounded) -> str:
    """A bounded count as a tile shows it: "1,234", "10,000+" or "≈ 98,000"."""
    if count.capped and count.estimate is not None and count.estimate > count.value:
        return f"≈ {count.estimate:,}"
    return f"{count.value:,}{'+' if count.capped else ''}"


def timers_chart(due: TimersDue) -> SafeString:
    titles = []
    for i, count in enumerate(due.counts):
        at = due.start + due.bucket * i
        more = "+" if due.capped_from is not None and i >= due.capped_from else ""
        titles.append(f"{at:%H:%M} UTC: {count:,}{more} due")
    minutes = int(due.bucket.total_seconds() * len(due.counts) // 60)
    return svg.bar_chart(
        due.counts,
        title="Timers due per minute over the next hour",
        left_label="now",
        right_label=f"+{minutes} min",
        bar_titles=titles,
    )


#: Queues with a depth chart of their own on the overview.
BUSIEST = 4
#: Queues in the overview's table: the deepest (``/queues/`` lists them
#: all, paged). The table was the first 200 by name, 20 ms of a render at
#: 1,000 queues, and its tiles summed those 200 only.
OVERVIEW_QUEUES = 20


@dataclass(frozen=True)
class QueueDepthChart:
    name: str
    chart: SafeString


def queue_activity_charts(boards: list[QueueBoard], now: datetime) -> tuple[SafeString | None, list[QueueDepthChart]]:
    """All queues' pushed and acked per sampler interval, and the busiest queues' depth, over the last hour.

    The busiest are the deepest now (``boards``: the deepest first), their
    series read in one statement: the cost does not grow with the number
    of queues.
    """
    since = now - CHART_WINDOW
    points = total_series(since=since, until=now)
    rates = None
    if points:
        pushed, acked, _ = series_points(points)
        rates = svg.line_chart(
            [(f"pushed / {rate_unit()}", pushed), (f"acked / {rate_unit()}", acked)],
            title=f"Messages pushed and acked per {rate_unit()}, all queues",
            since=since,
            until=now,
        )
    deepest = boards[:BUSIEST]
    series = queues_depth_series(queues=[b.name for b in deepest], since=since, until=now)
    depth = []
    for b in deepest:
        if b.name in series:
            chart = svg.line_chart([("depth", series[b.name])], title=f"Depth, {b.name}", since=since, until=now)
            depth.append(QueueDepthChart(b.name, chart))
    return rates, depth


def overview_context(user: User, params: QueryDict) -> dict[str, Any]:
    now = clock.now()
    boards, totals = queue_boards_deepest(limit=OVERVIEW_QUEUES)
    heartbeats = supervision_heartbeats(now=now)
    attention = needs_attention(now=now, heartbeats=heartbeats)
    ins = queue_rates(now=now, queues=[b.name for b in boards])
    lines = [_line(b, now, attention, ins) for b in boards]
    due = timers_due(now=now)
    rates_chart, depth_charts = queue_activity_charts(boards, now)
    counted_at, namespaces = _namespaces()
    return {
        "now": now,
        "queues": lines,
        "queue_count": totals.queues,
        "totals": {
            "claimable": totals.claimable,
            "parked": totals.parked,
            "in_flight": totals.in_flight,
            "dlq": count_text(dead_letters_total()),
        },
        **_locks_held(now),
        "namespaces": namespaces,
        "keys_counted_at": counted_at,
        "timers_pending": count_text(due.pending),
        "timers_overdue": count_text(due.overdue) if due.overdue.value else "",
        "next_due": due.next_due,
        "next_due_in": short_duration(None if due.next_due is None else max(0.0, (due.next_due - now).total_seconds())),
        "timers_chart": timers_chart(due),
        "timers_capped_at": None if due.capped_from is None else due.start + due.bucket * due.capped_from,
        "rates_chart": rates_chart,
        "rate_unit": rate_unit(),
        "depth_charts": depth_charts,
        "attention": attention,
        "rate_window": window_text(),
        "consumers_live": sum(1 for b in heartbeats.beats if b.fresh),
        "consumers_other": sum(1 for b in heartbeats.beats if not b.fresh),
        "stale_at": min((b.stale_at for b in heartbeats.beats if b.fresh and b.stale_at), default=None),
    }


OVERVIEW = live.one_region_page(
    "overview",
    "queenadmin/overview.html",
    overview_context,
    "overview-body",
    *(events.QUEUES_GROUP, events.TIMERS_GROUP, events.LOCKS_GROUP, events.KV_GROUP),
    # Bounded counts of permits, timers and dead letters: at most one push
    # every 2 s however busy the broker is.
    gap=2.0,
)
overview = page_view(OVERVIEW)
