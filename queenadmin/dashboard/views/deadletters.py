"""``/dlq/``: the dead letters of every queue, newest first.

A live page with one region, ``dlq-table``: keyset-paged by id (``before``),
filtered by queue and consumer group. The actions are the queue page's
(``queues.dlq_replay`` and ``dlq_purge``) through the same domain call:
replay the selected (of any queues) or, filtered by a queue, all that
match; purge needs the queue filter and its name typed. They answer with
the table and a notice (htmx), or a redirect back to the page.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpResponse, HttpResponseRedirect, QueryDict
from django.shortcuts import render
from django.template.loader import render_to_string
from django.utils.http import urlencode

from queenadmin.dashboard import live
from queenadmin.dashboard.views.common import HtmxHttpRequest, User, may_do, page_view, staff_action, who_of
from queenadmin.dashboard.views.ops_common import int_param
from queenadmin.dashboard.views.queues import MAX_BATCHES_PER_REQUEST, _ids, replay_target, replayed_to
from queenadmin.domain import clock, events
from queenadmin.domain.queues import board
from queenadmin.domain.queues import operator as queue_operator
from queenadmin.errors import QueenError

#: Rows of a page.
PAGE = 50


def _filters(data: Any) -> tuple[str | None, str | None]:
    queue = data.get("queue", "").strip() or None
    group = data.get("group", "").strip() or None
    return queue, group


def dlq_context(user: User, params: QueryDict) -> dict[str, Any]:
    queue, group = _filters(params)
    before = int_param(params, "before")
    rows = board.dead_letters_across(queue=queue, group=group, before=before, limit=PAGE + 1)
    more = len(rows) > PAGE
    rows = rows[:PAGE]
    return {
        "now": clock.now(),
        "queue": queue or "",
        "group": group or "",
        "rows": rows,
        "next_before": rows[-1].item.id if more else None,
        "first_page": before is None,
        "upto": rows[0].item.id if rows and before is None else int_param(params, "upto"),
        "can_replay": may_do(user, "dlq.replay"),
        "can_purge": may_do(user, "dlq.purge"),
    }


DLQ = live.one_region_page(
    "dlq", "queenadmin/dlq.html", dlq_context, "dlq-table", events.QUEUES_GROUP, nav="dlq", perm="queues"
)
dlq_page = page_view(DLQ)


def _answer(request: HtmxHttpRequest, data: Any) -> HttpResponse:
    """The page again, with the outcome among its notices.

    For htmx: the table (the filters the action came with) and the outcome
    out of band, outside the live region so the push that follows does not
    wipe it; a refused action answers like a done one (htmx does not swap
    4xx). Otherwise a redirect back to the page.
    """
    queue, group = _filters(data)
    query = {k: v for k, v in (("queue", queue), ("group", group)) if v}
    if not request.htmx:
        return HttpResponseRedirect("/dlq/" + ("?" + urlencode(query) if query else ""), status=303)
    params = QueryDict(mutable=True)
    params.update(query)
    ctx = live.page_context(DLQ, request.user, params)
    table = render(request, "queenadmin/dlq.html#dlq-table", ctx)
    ctx["oob"] = True
    table.content += render_to_string("queenadmin/dlq.html#dlq-outcome", ctx, request=request).encode()
    return table


def _act(request: HtmxHttpRequest, verb: queue_operator.DLQVerb, past: str) -> HttpResponse:
    """Replay or purge the selected ids (queue by queue) or, with a queue
    filter, all that match up to the newest the operator saw."""
    queue, group = _filters(request.POST)
    ids = _ids(request.POST)
    target = replay_target(request.POST) if verb == "replay" else "group"
    if target is None:
        messages.error(request, "Not replayed: choose who gets the copies (the failed group, or every group).")
        return _answer(request, request.POST)
    plan: list[tuple[board.DeadLetterFilter, tuple[int, ...] | None]]
    if ids is not None:
        plan = [
            (board.DeadLetterFilter(queue=name), chosen)
            for name, chosen in board.dead_letter_queues(ids=ids).items()
            if queue is None or name == queue
        ]
    elif request.POST.get("all") == "1" and queue is not None:
        upto = int_param(request.POST, "upto")
        plan = [(board.DeadLetterFilter(queue=queue, group=group, upto=upto), None)]
    else:
        messages.error(
            request, f"Nothing to {verb}: pick dead letters, or filter by a queue and choose all that match."
        )
        return _answer(request, request.POST)
    if verb == "purge":
        names = {selection.queue for selection, _ in plan}
        if queue is None or names - {queue} or request.POST.get("confirm", "").strip() != queue:
            messages.error(request, "Not purged: filter by one queue and type its name to confirm.")
            return _answer(request, request.POST)
    who = who_of(request)
    done = more = to_every_group = 0
    try:
        for selection, chosen in plan:
            for _ in range(MAX_BATCHES_PER_REQUEST):
                result = queue_operator.queue_dlq_action(
                    verb=verb, selection=selection, who=who, ids=chosen, target=target
                )
                done += result.done
                to_every_group += result.to_every_group
                more = result.more
                if not more:
                    break
    except QueenError as exc:
        messages.error(request, f"Stopped after {done:,} dead letter{'s' if done != 1 else ''}: {exc.detail}")
        return _answer(request, request.POST)
    note = f"{past} {done:,} dead letter{'s' if done != 1 else ''}" + replayed_to(verb, target, to_every_group) + "."
    if ids is not None and done < len(ids):
        note += f" {len(ids) - done} were already gone (replayed or purged meanwhile)."
    if more:
        note += " More match: send the same action again to go on."
    messages.success(request, note)
    return _answer(request, request.POST)


@staff_action("dlq.replay")
def dlq_replay_any(request: HtmxHttpRequest) -> HttpResponse:
    if request.method == "GET":
        return _answer(request, request.GET)
    return _act(request, "replay", "Replayed")


@staff_action("dlq.purge")
def dlq_purge_any(request: HtmxHttpRequest) -> HttpResponse:
    if request.method == "GET":
        return _answer(request, request.GET)
    return _act(request, "purge", "Purged")
