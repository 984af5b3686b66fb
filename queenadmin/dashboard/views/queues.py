"""``/queues/`` and ``/queues/<name>/``: depth by state, lag, messages, DLQ.

The queue page has three live regions, each a named partial of
``queues/queue.html`` that an htmx request gets by targeting its id:
``queue-summary`` (partitions and consumer groups), ``queue-messages``
(recent messages of one partition, keyset-paged by offset, or the
messages a search found) and ``queue-dlq`` (dead letters, keyset-paged by
id, with replay and purge).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import urlencode
from django.utils.safestring import SafeString
from django.views.decorators.http import require_GET, require_POST

from queenadmin.dashboard import svg
from queenadmin.dashboard.permissions import CHANGE, VIEW
from queenadmin.dashboard.views.ops_common import age_seconds, int_param, may, short_duration, staff_page
from queenadmin.domain import clock
from queenadmin.domain.queues import board, dlq
from queenadmin.errors import QueueNotFound

#: Rows of a messages or DLQ page.
PAGE = 25
#: Batches one replay or purge request runs before it asks to be sent
#: again (each batch is its own transaction of ``dlq.DLQ_BATCH``).
MAX_BATCHES_PER_REQUEST = 100
#: The window of the per-queue charts.
CHART_WINDOW = timedelta(hours=1)

_PARTIALS = {"queue-summary", "queue-messages", "queue-dlq"}


@dataclass(frozen=True)
class QueueCharts:
    """The two charts of a queue page."""

    rates: SafeString
    depth: SafeString


def queue_chart_points(
    *, queue: str, since: datetime, until: datetime
) -> tuple[list[tuple[datetime, float]], list[tuple[datetime, float]], list[tuple[datetime, float]]] | None:
    """Cumulative pushed and acked counters and depth of ``queue`` over a window.

    The source is the statistics sampler's ``queue_series`` (not merged
    yet); until it is, there is nothing to draw and the page leaves the
    charts out rather than show made-up numbers.
    """
    return None


def queue_charts(*, queue: str, now: datetime) -> QueueCharts | None:
    since = now - CHART_WINDOW
    points = queue_chart_points(queue=queue, since=since, until=now)
    if points is None:
        return None
    pushed, acked, depth = points
    rates = svg.line_chart(
        [("pushed / min", svg.per_minute(pushed)), ("acked / min", svg.per_minute(acked))],
        title=f"Messages pushed and acked per minute, {queue}",
        since=since,
        until=now,
    )
    return QueueCharts(rates, svg.line_chart([("depth", depth)], title=f"Depth, {queue}", since=since, until=now))


@dataclass(frozen=True)
class QueueLine:
    board: board.QueueBoard
    oldest_age: str


@require_GET
@staff_page(VIEW["queues"])
def queue_list(request: HttpRequest) -> HttpResponse:
    now = clock.now()
    after = request.GET.get("after", "")
    boards = board.queue_boards(after=after, limit=board.QUEUE_PAGE + 1)
    more = len(boards) > board.QUEUE_PAGE
    boards = boards[: board.QUEUE_PAGE]
    ctx = {
        "now": now,
        "queues": [QueueLine(b, short_duration(age_seconds(b.oldest_claimable_at, now))) for b in boards],
        "next_after": boards[-1].name if more else None,
    }
    template = "queenadmin/queues/list.html"
    if request.headers.get("HX-Request"):
        template += "#queue-table"
    return render(request, template, ctx)


def _selection(name: str, data: Mapping[str, str]) -> board.DeadLetterFilter:
    group = data.get("dlq_group", "") or None
    partition = data.get("dlq_partition", "") or None
    upto = data.get("upto", "")
    return board.DeadLetterFilter(
        queue=name,
        group=group,
        partition=partition,
        upto=int(upto) if upto.isdigit() and len(upto) < 19 else None,
    )


def _queue_context(request: HttpRequest, name: str, params: Mapping[str, str]) -> dict[str, Any]:
    now = clock.now()
    qb = board.queue_board(name=name)
    if qb is None:
        raise Http404(f"no queue {name}")
    names = {p.id: p.name for p in qb.partitions}
    chosen = params.get("partition", "")
    partition = next((p for p in qb.partitions if p.name == chosen), None)
    if partition is None and qb.partitions:
        partition = max(qb.partitions, key=lambda p: (p.last_push_at is not None, p.last_push_at or now, p.id))
    before = int_param(params, "before")
    find = params.get("find", "").strip()
    if find:
        rows = board.find_messages(text=find, partitions=names)
    elif partition is not None:
        rows = board.recent_messages(partition_id=partition.id, partition=partition.name, before=before, limit=PAGE)
    else:
        rows = []
    selection = _selection(name, params)
    dlq_before = int_param(params, "dlq_before")
    dead = board.dead_letter_page(selection=selection, before=dlq_before, limit=PAGE + 1)
    dlq_more = len(dead) > PAGE
    dead = dead[:PAGE]
    return {
        "now": now,
        "queue": qb,
        "oldest_age": short_duration(age_seconds(qb.oldest_claimable_at, now)),
        "partitions": [(p, short_duration(age_seconds(p.oldest_claimable_at, now))) for p in qb.partitions],
        "groups": [(g, short_duration(age_seconds(g.oldest_pending_at, now))) for g in qb.groups],
        "partition": partition,
        "find": find,
        "rows": rows,
        "next_before": rows[-1].offset if rows and not find and len(rows) == PAGE and rows[-1].offset > 1 else None,
        "dlq_filter": selection,
        "dead": dead,
        "dlq_next_before": dead[-1].id if dlq_more else None,
        "dlq_upto": dead[0].id if dead and dlq_before is None else selection.upto,
        "can_replay": may(request, CHANGE["dlq.replay"]),
        "can_purge": may(request, CHANGE["dlq.purge"]),
        "charts": queue_charts(queue=name, now=now),
    }


@require_GET
@staff_page(VIEW["queues"])
def queue_detail(request: HttpRequest, name: str) -> HttpResponse:
    template = "queenadmin/queues/queue.html"
    target = request.headers.get("HX-Target", "")
    if request.headers.get("HX-Request") and target in _PARTIALS:
        template += "#" + target
    return render(request, template, _queue_context(request, name, request.GET))


def _back(name: str, data: Any) -> str:
    query = {k: data[k] for k in ("dlq_group", "dlq_partition") if data.get(k)}
    url = reverse("dashboard:queue", args=[name])
    return url + ("?" + urlencode(query) if query else "") + "#queue-dlq"


def _ids(data: Any) -> tuple[int, ...] | None:
    raw = data.getlist("ids")
    ids = tuple(int(i) for i in raw if i.isdigit() and len(i) < 19)
    return ids or None


def _finish(request: HttpRequest, name: str) -> HttpResponse:
    # A refused action answers like a done one (200 with the notice in the
    # DLQ partial for htmx, a redirect otherwise): htmx does not swap 4xx.
    if request.headers.get("HX-Request"):
        params = {k: request.POST[k] for k in ("dlq_group", "dlq_partition") if request.POST.get(k)}
        return render(request, "queenadmin/queues/queue.html#queue-dlq", _queue_context(request, name, params))
    return HttpResponseRedirect(_back(name, request.POST), status=303)


def _run(request: HttpRequest, name: str, action: Any, verb: str, past: str) -> HttpResponse:
    selection = _selection(name, request.POST)
    ids = _ids(request.POST)
    if ids is None and request.POST.get("all") != "1":
        messages.error(request, f"Nothing to {verb}: pick dead letters, or choose all that match.")
        return _finish(request, name)
    reason = request.POST.get("reason", "")
    done = 0
    more = False
    try:
        for _ in range(MAX_BATCHES_PER_REQUEST):
            result = action(selection=selection, actor=request.user.get_username(), reason=reason, ids=ids)
            done += result.done
            more = result.more
            if not more:
                break
    except QueueNotFound as exc:
        raise Http404(str(exc)) from exc
    note = f"{past} {done:,} dead letter{'s' if done != 1 else ''} of {name}."
    if ids is not None and done < len(ids):
        note += f" {len(ids) - done} were already gone (replayed or purged meanwhile)."
    if more:
        note += " More match: send the same action again to go on."
    messages.success(request, note)
    return _finish(request, name)


@require_POST
@staff_page(CHANGE["dlq.replay"])
def dlq_replay(request: HttpRequest, name: str) -> HttpResponse:
    return _run(request, name, dlq.queue_dlq_replay, "replay", "Replayed")


@require_POST
@staff_page(CHANGE["dlq.purge"])
def dlq_purge(request: HttpRequest, name: str) -> HttpResponse:
    if request.POST.get("confirm", "") != name:
        messages.error(request, f"Not purged: type the queue name ({name}) to confirm.")
        return _finish(request, name)
    return _run(request, name, dlq.queue_dlq_purge, "purge", "Purged")
