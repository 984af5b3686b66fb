"""``/``: counts and health at a glance."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.safestring import SafeString
from django.views.decorators.http import require_GET

from queenadmin.conf import settings as app_settings
from queenadmin.dashboard import svg
from queenadmin.dashboard.permissions import VIEW
from queenadmin.dashboard.views.ops_common import age_seconds, short_duration, staff_page
from queenadmin.domain import clock, timers
from queenadmin.domain.overview import kv_namespace_counts
from queenadmin.domain.queues.board import QueueBoard, queue_boards


@dataclass(frozen=True)
class QueueLine:
    board: QueueBoard
    oldest_age: str
    #: "stalled" when something is claimable and nothing took it for a
    #: minute; "idle" when nothing is claimable.
    state: str


def _state(board: QueueBoard, now: datetime) -> str:
    age = age_seconds(board.oldest_claimable_at, now)
    if age is None:
        return "idle" if not board.in_flight else "busy"
    return "stalled" if age >= 60 else "ready"


def timers_chart(now: datetime) -> tuple[timers.DueHistogram, SafeString]:
    histogram = timers.timers_due_histogram(now=now)
    titles = [
        f"{(histogram.start + histogram.bucket * i):%H:%M} UTC: {count} due" for i, count in enumerate(histogram.counts)
    ]
    chart = svg.bar_chart(
        histogram.counts,
        title="Timers due per minute over the next hour",
        left_label="now",
        right_label=f"+{int(histogram.bucket.total_seconds() * len(histogram.counts) // 60)} min",
        bar_titles=titles,
    )
    return histogram, chart


@require_GET
@staff_page(VIEW["overview"])
def overview(request: HttpRequest) -> HttpResponse:
    now = clock.now()
    boards = queue_boards()
    lines = [QueueLine(b, short_duration(age_seconds(b.oldest_claimable_at, now)), _state(b, now)) for b in boards]
    namespaces = kv_namespace_counts(now=now)
    histogram, chart = timers_chart(now)
    ctx = {
        "now": now,
        "environment": app_settings.ENVIRONMENT_NAME,
        "queues": lines,
        "totals": {
            "claimable": sum(b.claimable for b in boards),
            "parked": sum(b.parked for b in boards),
            "in_flight": sum(b.in_flight for b in boards),
            "dlq": sum(b.dlq for b in boards),
            "dlq_capped": any(b.dlq_capped for b in boards),
        },
        "locks_held": sum(n.keys for n in namespaces if n.is_locks),
        "namespaces": [n for n in namespaces if not n.is_locks],
        "timers": histogram,
        "next_due_in": short_duration(
            None if histogram.next_due is None else max(0.0, (histogram.next_due - now).total_seconds())
        ),
        "timers_chart": chart,
        "window": timedelta(hours=1),
    }
    template = (
        "queenadmin/overview.html#overview-body" if request.headers.get("HX-Request") else "queenadmin/overview.html"
    )
    return render(request, template, ctx)
