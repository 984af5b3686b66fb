"""``/``: counts and health at a glance."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.safestring import SafeString
from django.views.decorators.http import require_GET

from queenadmin.conf import settings as app_settings
from queenadmin.dashboard import svg
from queenadmin.dashboard.permissions import VIEW
from queenadmin.dashboard.views.ops_common import age_seconds, short_duration, staff_page
from queenadmin.domain import clock
from queenadmin.domain.overview import Bounded, TimersDue, kv_namespace_counts, locks_held, timers_due
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


@require_GET
@staff_page(VIEW["overview"])
def overview(request: HttpRequest) -> HttpResponse:
    now = clock.now()
    boards = queue_boards()
    lines = [QueueLine(b, short_duration(age_seconds(b.oldest_claimable_at, now)), _state(b, now)) for b in boards]
    due = timers_due(now=now)
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
        "locks_held": count_text(locks_held(now=now)),
        "namespaces": [(n.namespace, count_text(n.keys)) for n in kv_namespace_counts(now=now)],
        "timers_pending": count_text(due.pending),
        "timers_overdue": count_text(due.overdue) if due.overdue.value else "",
        "next_due": due.next_due,
        "next_due_in": short_duration(None if due.next_due is None else max(0.0, (due.next_due - now).total_seconds())),
        "timers_chart": timers_chart(due),
        "timers_capped_at": None if due.capped_from is None else due.start + due.bucket * due.capped_from,
    }
    template = (
        "queenadmin/overview.html#overview-body" if request.headers.get("HX-Request") else "queenadmin/overview.html"
    )
    return render(request, template, ctx)
