"""``/queues/`` and ``/queues/<name>/``: depth by state, lag, settings,
messages, DLQ.

Both are live pages (``dashboard/live.py``). The list is one region,
``queue-table``. The queue page has four, each a named partial of
``queues/queue.html``: ``queue-summary`` (tiles, charts, partitions and
consumer groups), ``queue-settings`` (every option with its value and
default; edited in ``views/settings.py``), ``queue-messages`` (recent messages of one partition,
keyset-paged by offset, or the messages a search found) and ``queue-dlq``
(dead letters, keyset-paged by id, with replay and purge). A queue event
about another queue leaves a queue page alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpResponse, HttpResponseRedirect, QueryDict
from django.shortcuts import render
from django.template.loader import render_to_string
from django.utils.http import urlencode
from django.utils.safestring import SafeString

from queenadmin.conf import settings
from queenadmin.dashboard import links, live, svg
from queenadmin.dashboard.views.access import (
    HtmxHttpRequest,
    User,
    actor_of,
    may_do,
    page_view,
    staff_action,
    staff_page,
)
from queenadmin.dashboard.views.durations import age_seconds, short_duration
from queenadmin.dashboard.views.querystring import int_param
from queenadmin.dashboard.views.rates import queue_rates_block
from queenadmin.domain import clock, events
from queenadmin.domain.audit import Who
from queenadmin.domain.queues import board
from queenadmin.domain.queues import operator as queue_operator
from queenadmin.domain.queues.history import SamplePoint, queue_series
from queenadmin.domain.queues.lifecycle import queue_settings
from queenadmin.errors import QueenError, QueueNotFound

#: Rows of a messages or DLQ page.
PAGE = 25
#: Batches one replay or purge request runs before it asks to be sent
#: again (each batch is its own transaction of ``queue_operator.DLQ_BATCH``).
MAX_BATCHES_PER_REQUEST = 100
#: The window of the per-queue charts.
CHART_WINDOW = timedelta(hours=1)

Points = list[tuple[datetime, float]]


@dataclass(frozen=True)
class QueueCharts:
    """The two charts of a queue page."""

    #: What one point of ``rates`` counts over ("10 s").
    unit: str
    rates: SafeString
    depth: SafeString


def rate_unit() -> str:
    """The interval the rate charts count per: the sampler's ("10 s")."""
    return f"{settings.SAMPLER_INTERVAL_SECONDS} s"


def series_points(samples: Sequence[SamplePoint]) -> tuple[Points, Points, Points]:
    """Pushed and acked per sampler interval and depth, each at its interval's start.

    The sampler's counters are what happened during an interval of
    ``seconds`` (``SamplePoint``): a point is that count, as measured, not
    scaled up to a minute (a burst in one 10 s interval would draw six
    times its size). A roll-up, longer than the sampler's interval, draws
    its count spread evenly: ``count * interval / seconds``. A point is
    drawn at ``at``: the current interval's end is still ahead.
    """
    interval = settings.SAMPLER_INTERVAL_SECONDS
    pushed, acked, depth = [], [], []
    for s in samples:
        share = interval / max(interval, s.seconds)
        pushed.append((s.at, s.pushed * share))
        acked.append((s.at, s.acked * share))
        depth.append((s.at, float(s.depth)))
    return pushed, acked, depth


def queue_chart_points(*, queue: str, since: datetime, until: datetime) -> tuple[Points, Points, Points] | None:
    """Pushed and acked per sampler interval and depth of ``queue`` over a window.

    From the statistics sampler (``queue_series``); None when it has no
    sample in the window yet (the page leaves the charts out rather than
    draw an empty frame).
    """
    samples = queue_series(queue=queue, since=since, until=until)
    return series_points(samples) if samples else None


def queue_charts(*, queue: str, now: datetime) -> QueueCharts | None:
    since = now - CHART_WINDOW
    points = queue_chart_points(queue=queue, since=since, until=now)
    if points is None:
        return None
    pushed, acked, depth = points
    rates = svg.line_chart(
        [(f"pushed / {rate_unit()}", pushed), (f"acked / {rate_unit()}", acked)],
        title=f"Messages pushed and acked per {rate_unit()}, {queue}",
        since=since,
        until=now,
    )
    return QueueCharts(
        rate_unit(), rates, svg.line_chart([("depth", depth)], title=f"Depth, {queue}", since=since, until=now)
    )


@dataclass(frozen=True)
class QueueLine:
    board: board.QueueBoard
    oldest_age: str


def queues_context(user: User, params: QueryDict) -> dict[str, Any]:
    now = clock.now()
    after = params.get("after", "")
    boards = board.queue_boards(after=after, limit=board.QUEUE_PAGE + 1)
    more = len(boards) > board.QUEUE_PAGE
    boards = boards[: board.QUEUE_PAGE]
    return {
        "now": now,
        "queues": [QueueLine(b, short_duration(age_seconds(b.oldest_claimable_at, now))) for b in boards],
        "next_after": boards[-1].name if more else None,
    }


QUEUES = live.one_region_page(
    "queues", "queenadmin/queues/list.html", queues_context, "queue-table", events.QUEUES_GROUP
)
queue_list = page_view(QUEUES)


def _selection(name: str, data: Any) -> board.DeadLetterFilter:
    group = data.get("dlq_group", "") or None
    partition = data.get("dlq_partition", "") or None
    upto = data.get("upto", "")
    return board.DeadLetterFilter(
        queue=name,
        group=group,
        partition=partition,
        upto=int(upto) if upto.isdigit() and len(upto) < 19 else None,
    )


def queue_context(user: User, params: QueryDict) -> dict[str, Any]:
    """The queue page; ``params["name"]`` is the queue its path names."""
    now = clock.now()
    name = params.get("name", "")
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
        "queue_url": links.queue_url(name),
        "oldest_age": short_duration(age_seconds(qb.oldest_claimable_at, now)),
        "partitions": [(p, short_duration(age_seconds(p.oldest_claimable_at, now))) for p in qb.partitions],
        "groups": [(g, short_duration(age_seconds(g.oldest_pending_at, now))) for g in qb.groups],
        "partition": partition,
        "find": find,
        "rows": rows,
        "next_before": rows[-1].offset if rows and not find and len(rows) == PAGE and rows[-1].offset > 0 else None,
        "dlq_filter": selection,
        "dead": dead,
        "dlq_next_before": dead[-1].id if dlq_more else None,
        "dlq_upto": dead[0].id if dead and dlq_before is None else selection.upto,
        "can_replay": may_do(user, "dlq.replay"),
        "can_purge": may_do(user, "dlq.purge"),
        "can_group": may_do(user, "queue.group"),
        "can_purge_queue": may_do(user, "queue.purge"),
        "can_pause": may_do(user, "queue.pause"),
        "can_configure": may_do(user, "queue.configure"),
        "can_push": may_do(user, "queue.push"),
        "settings": queue_settings(name=name),
        # Groups paused before their first pop (no row of their own yet).
        "paused_ahead": [g for g in qb.paused_groups if g not in {lag.name for lag in qb.groups}],
        "charts": queue_charts(queue=name, now=now),
        "rates": queue_rates_block(name=name, groups=qb.groups, now=now),
    }


#: A push names at most this many queues (``domain/queues/push.py``).
_NAMED_QUEUES = 20


def about_queue(message: dict[str, Any], params: QueryDict) -> bool:
    """Whether a queue event may concern the queue the page shows.

    An event that names no queue (an ack), or names as many as a push
    lists, may be about any queue.
    """
    named = [*message.get("queues", []), *message.get("deleted", []), *message.get("created", [])]
    if "queues" not in message and not named:
        return True
    return params.get("name", "") in named or len(message.get("queues", [])) >= _NAMED_QUEUES


def queue_page(name: str, template: str, context: live.Context, *regions: str) -> live.LivePage:
    """A live page about the one queue its path names (the queue, its leases,
    one of its messages): under the queues nav entry and permission, each
    region stale on the queue events that may concern that queue."""
    return live.LivePage(
        name,
        template,
        context,
        tuple(live.Region(region, (events.QUEUES_GROUP,), about_queue) for region in regions),
        nav="queues",
        perm="queues",
    )


QUEUE = queue_page(
    "queue",
    "queenadmin/queues/queue.html",
    queue_context,
    "queue-summary",
    "queue-settings",
    "queue-messages",
    "queue-dlq",
)


def _params(name: str, data: QueryDict) -> QueryDict:
    params = data.copy()
    params["name"] = name
    return params


@staff_page("queues")
def queue_detail(request: HtmxHttpRequest, name: str) -> HttpResponse:
    return live.render_page(request, QUEUE, params=_params(name, request.GET))


def _back(name: str, data: Any) -> str:
    query = {k: data[k] for k in ("dlq_group", "dlq_partition") if data.get(k)}
    url = links.queue_url(name)
    return url + ("?" + urlencode(query) if query else "") + "#queue-dlq"


def _ids(data: Any) -> tuple[int, ...] | None:
    raw = data.getlist("ids")
    ids = tuple(int(i) for i in raw if i.isdigit() and len(i) < 19)
    return ids or None


def _finish(request: HtmxHttpRequest, name: str) -> HttpResponse:
    # A refused action answers like a done one (200 with the notice in the
    # DLQ partial for htmx, a redirect otherwise): htmx does not swap 4xx.
    if request.htmx:
        params = QueryDict(mutable=True)
        params["name"] = name
        for k in ("dlq_group", "dlq_partition"):
            if request.POST.get(k):
                params[k] = request.POST[k]
        ctx = live.page_context(QUEUE, request.user, params)
        dlq_region = render(request, "queenadmin/queues/queue.html#queue-dlq", ctx)
        # Out of band: the outcome (outside the live region, so the push
        # that follows does not wipe it), and the tiles and partitions, so
        # the page is right even before (or without) its socket's push.
        ctx["oob"] = True
        extra = "".join(
            render_to_string(f"queenadmin/queues/queue.html#{name}", ctx, request=request)
            for name in ("dlq-outcome", "queue-summary")
        )
        dlq_region.content = dlq_region.content + extra.encode()
        return dlq_region
    return HttpResponseRedirect(_back(name, request.POST), status=303)


def _run(request: HtmxHttpRequest, name: str, verb: queue_operator.DLQVerb, past: str) -> HttpResponse:
    selection = _selection(name, request.POST)
    ids = _ids(request.POST)
    if ids is None and request.POST.get("all") != "1":
        messages.error(request, f"Nothing to {verb}: pick dead letters, or choose all that match.")
        return _finish(request, name)
    reason = request.POST.get("reason", "")
    target = replay_target(request.POST) if verb == "replay" else "group"
    if target is None:
        messages.error(request, "Not replayed: choose who gets the copies (the failed group, or every group).")
        return _finish(request, name)
    done = 0
    more = False
    to_every_group = duplicates = again = 0
    after: int | None = None
    try:
        for _ in range(MAX_BATCHES_PER_REQUEST):
            result = queue_operator.queue_dlq_action(
                verb=verb,
                selection=selection,
                who=Who(actor_of(request), reason),
                ids=ids,
                target=target,
                to=queue_operator.OWN_PLACE,
                after=after,
            )
            done += result.done
            more = result.more
            to_every_group += result.to_every_group
            duplicates += result.duplicates
            again += result.replayed_before
            after = result.last_id
            if not more:
                break
    except QueueNotFound as exc:
        raise Http404(str(exc)) from exc
    except QueenError as exc:
        # e.g. maxSize: the batch that hit it rolled back whole.
        note = f"Stopped after {done:,} dead letter{'s' if done != 1 else ''}: {exc.detail}"
        messages.error(request, note)
        return _finish(request, name)
    note = f"{past} {done:,} dead letter{'s' if done != 1 else ''} of {name}"
    note += replayed_to(verb, target, to_every_group) + "." + kept_duplicates(duplicates) + replayed_again(again)
    if ids is not None and done + duplicates + again < len(ids):
        note += f" {len(ids) - done - duplicates - again} were already gone (replayed or purged meanwhile)."
    if more:
        note += " More match: send the same action again to go on."
    messages.success(request, note)
    return _finish(request, name)


def replay_target(data: Any) -> queue_operator.ReplayTarget | None:
    """Who a replay's copies are for, as the form says (the failed group by default)."""
    value = data.get("target", "group") or "group"
    return "group" if value == "group" else "all" if value == "all" else None


def replayed_to(verb: str, target: queue_operator.ReplayTarget | None, to_every_group: int) -> str:
    """What a replay's outcome says of who gets the copies (nothing for a purge)."""
    if verb != "replay":
        return ""
    if target == "all":
        return ", for every consumer group (transactionId dlq:<id>)"
    note = ", for the group that failed each only (transactionId dlq:<id>)"
    if to_every_group:
        note += f"; {to_every_group:,} for every group, as their group no longer consumes the queue"
    return note


def replayed_again(again: int) -> str:
    """What a replay's outcome says of the chosen dead letters an earlier replay moved."""
    if not again:
        return ""
    were = "was a duplicate" if again == 1 else "were duplicates"
    return (
        f" {again:,} {were}: replayed before (transactionId dlq:<id>), their copy is where that replay"
        " put it; nothing appended again."
    )


def kept_duplicates(duplicates: int) -> str:
    """What a replay's outcome says of the dead letters whose copy was already there."""
    if not duplicates:
        return ""
    were = "was" if duplicates == 1 else "were"
    return (
        f" {duplicates:,} {were} not replayed: the destination already held their copy"
        " (transactionId dlq:<id>), so they stay in the DLQ."
    )


def _confirm_on_the_page(request: HtmxHttpRequest, name: str) -> HttpResponse:
    """GET of an action: its confirmations are on the queue page's DLQ section."""
    return HttpResponseRedirect(_back(name, request.GET), status=303)


@staff_action("dlq.replay")
def dlq_replay(request: HtmxHttpRequest, name: str) -> HttpResponse:
    if request.method == "GET":
        return _confirm_on_the_page(request, name)
    return _run(request, name, "replay", "Replayed")


@staff_action("dlq.purge")
def dlq_purge(request: HtmxHttpRequest, name: str) -> HttpResponse:
    if request.method == "GET":
        return _confirm_on_the_page(request, name)
    if request.POST.get("confirm", "") != name:
        messages.error(request, f"Not purged: type the queue name ({name}) to confirm.")
        return _finish(request, name)
    return _run(request, name, "purge", "Purged")
