"""``/dlq/``: the dead letters of every queue, newest first.

A live page with one region, ``dlq-table``: keyset-paged by id (``before``),
filtered by queue, consumer group, error text (``error``: contains, case
aside) and error signature (``sig``, present even when empty: the
signature of dead letters without an error text). Above the table, outside
the live region (so a push does not recount it), ``dlq-signatures``: the
most frequent error signatures among the newest dead letters that match
the other filters, each a link that filters by it.

The actions go through the domain (``queue_operator.queue_dlq_action``),
each batch its own transaction with its audit entry (the operator and the
reason): replay the selected (of any queues) or all that match the filter
(at least one filter set; every queue holding a match, oldest first), into
each dead letter's own queue or another one (``dest_queue``, and
``dest_partition``), at most ``MAX_BATCHES_PER_REQUEST`` batches a request,
then the outcome says to send it again; purge needs the queue filter and
its name typed. They answer with the table, the signatures and a notice
(htmx), or a redirect back to the page.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.http import HttpResponse, HttpResponseRedirect, QueryDict
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.http import urlencode

from queenadmin.dashboard import live
from queenadmin.dashboard.views.access import HtmxHttpRequest, User, may_do, page_view, staff_action, who_of
from queenadmin.dashboard.views.querystring import int_param
from queenadmin.dashboard.views.queues import (
    MAX_BATCHES_PER_REQUEST,
    _ids,
    kept_duplicates,
    replay_target,
    replayed_again,
    replayed_to,
)
from queenadmin.domain import clock, events
from queenadmin.domain.queues import board
from queenadmin.domain.queues import operator as queue_operator
from queenadmin.errors import QueenError

#: Rows of a page.
PAGE = 50
#: Queues one "all that match" request goes through (the rest: send it again).
MAX_QUEUES_PER_REQUEST = 100


def _filters(data: Any) -> board.AcrossQueues:
    """The filters ``data`` names (a query string or a form)."""

    def text(name: str) -> str | None:
        return data.get(name, "").strip() or None

    signature = data.get("sig", "").strip() if "sig" in data else None
    return board.AcrossQueues(text("queue"), text("group"), text("error"), signature)


def _query(selection: board.AcrossQueues) -> dict[str, str]:
    """The query string of the page showing ``selection``."""
    query = {k: v for k, v in (("queue", selection.queue), ("group", selection.group), ("error", selection.error)) if v}
    if selection.signature is not None:
        query["sig"] = selection.signature
    return query


def _signatures(selection: board.AcrossQueues) -> Callable[[], board.SignatureCounts]:
    """The signature counts of the dead letters the other filters name, read
    only when a template shows them (the full page and an action's answer,
    never the live region's push)."""
    others = board.AcrossQueues(selection.queue, selection.group, selection.error)
    return lambda: board.dead_letter_signatures(selection=others)


def dlq_context(user: User, params: QueryDict) -> dict[str, Any]:
    selection = _filters(params)
    before = int_param(params, "before")
    rows = board.dead_letters_across(
        queue=selection.queue,
        group=selection.group,
        error=selection.error,
        signature=selection.signature,
        before=before,
        limit=PAGE + 1,
    )
    more = len(rows) > PAGE
    rows = rows[:PAGE]
    query = _query(selection)
    return {
        "now": clock.now(),
        "queue": selection.queue or "",
        "group": selection.group or "",
        "error": selection.error or "",
        "sig": selection.signature,
        "filtered": bool(query),
        "filter_query": urlencode(query),
        "others_query": urlencode({k: v for k, v in query.items() if k != "sig"}),
        "batch": queue_operator.DLQ_BATCH,
        "signatures": _signatures(selection),
        "signature_sample": board.SIGNATURE_SAMPLE,
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

    For htmx: the table (the filters the action came with), and out of band
    the signature counts and the outcome, outside the live region so the
    push that follows does not wipe it; a refused action answers like a
    done one (htmx does not swap 4xx). Otherwise a redirect back to the page.
    """
    query = _query(_filters(data))
    if not request.htmx:
        return HttpResponseRedirect(reverse("dashboard:dlq") + ("?" + urlencode(query) if query else ""), status=303)
    params = QueryDict(mutable=True)
    params.update(query)
    ctx = live.page_context(DLQ, request.user, params)
    table = render(request, "queenadmin/dlq.html#dlq-table", ctx)
    ctx["oob"] = True
    for partial in ("dlq-signatures", "dlq-outcome"):
        table.content += render_to_string(f"queenadmin/dlq.html#{partial}", ctx, request=request).encode()
    return table


def _destination(data: Any) -> queue_operator.ReplayDestination:
    """Where the form says to replay into: blank fields are each dead letter's own."""
    queue = data.get("dest_queue", "").strip() or None
    partition = data.get("dest_partition", "").strip() or None
    return queue_operator.ReplayDestination(queue, partition)


#: What to act on, queue by queue: a filter, and the chosen ids (None: all it names).
Plan = list[tuple[board.DeadLetterFilter, tuple[int, ...] | None]]


def _plan(
    request: HtmxHttpRequest, verb: str, selection: board.AcrossQueues, ids: tuple[int, ...] | None
) -> tuple[Plan, bool] | None:
    """What to act on, queue by queue, and whether more queues match than
    one request goes through; None (with the notice) when there is nothing."""
    if ids is not None:
        found = board.dead_letter_queues(ids=ids)
        if verb == "replay":
            # Those replayed already are duplicates, counted by their queue's batch.
            for name, chosen in queue_operator.replayed_dead_letter_queues(ids=ids).items():
                found[name] = tuple(sorted({*found.get(name, ()), *chosen}))
        plan: Plan = [
            (board.DeadLetterFilter(queue=name), chosen)
            for name, chosen in found.items()
            if selection.queue is None or name == selection.queue
        ]
        return plan, False
    if request.POST.get("all") == "1" and _query(selection):
        upto = int_param(request.POST, "upto")
        scope = board.AcrossQueues(selection.queue, selection.group, selection.error, selection.signature, upto)
        names = board.dead_letter_queue_names(selection=scope, limit=MAX_QUEUES_PER_REQUEST + 1)
        every: Plan = [(scope.of_queue(name), None) for name in names[:MAX_QUEUES_PER_REQUEST]]
        return every, len(names) > MAX_QUEUES_PER_REQUEST
    messages.error(
        request,
        f"Nothing to {verb}: pick dead letters, or filter (by queue, group or error) and choose all that match.",
    )
    return None


def _act(request: HtmxHttpRequest, verb: queue_operator.DLQVerb, past: str) -> HttpResponse:
    """Replay or purge the selected ids (queue by queue) or, with a filter,
    all that match up to the newest the operator saw."""
    selection = _filters(request.POST)
    target = replay_target(request.POST) if verb == "replay" else "group"
    if target is None:
        messages.error(request, "Not replayed: choose who gets the copies (the failed group, or every group).")
        return _answer(request, request.POST)
    to = _destination(request.POST) if verb == "replay" else queue_operator.OWN_PLACE
    try:
        to.check()
    except QueenError as exc:
        messages.error(request, f"Not replayed: {exc.detail}.")
        return _answer(request, request.POST)
    found = _plan(request, verb, selection, _ids(request.POST))
    if found is None:
        return _answer(request, request.POST)
    plan, more_queues = found
    if verb == "purge":
        names = {chosen.queue for chosen, _ in plan}
        if (
            selection.queue is None
            or names - {selection.queue}
            or request.POST.get("confirm", "").strip() != selection.queue
        ):
            messages.error(request, "Not purged: filter by one queue and type its name to confirm.")
            return _answer(request, request.POST)
    who = who_of(request)
    done = to_every_group = duplicates = again = 0
    more = more_queues
    budget = MAX_BATCHES_PER_REQUEST
    try:
        for chosen, ids in plan:
            after: int | None = None
            while True:
                if budget == 0:
                    more = True
                    break
                budget -= 1
                result = queue_operator.queue_dlq_action(
                    verb=verb, selection=chosen, who=who, ids=ids, target=target, to=to, after=after
                )
                done += result.done
                to_every_group += result.to_every_group
                duplicates += result.duplicates
                again += result.replayed_before
                after = result.last_id
                if not result.more:
                    break
    except QueenError as exc:
        messages.error(request, f"Stopped after {done:,} dead letter{'s' if done != 1 else ''}: {exc.detail}")
        return _answer(request, request.POST)
    note = f"{past} {done:,} dead letter{'s' if done != 1 else ''}" + _whither(verb, target, to, to_every_group) + "."
    note += kept_duplicates(duplicates) + replayed_again(again)
    chosen_ids = _ids(request.POST)
    if chosen_ids is not None and done + duplicates + again < len(chosen_ids):
        note += f" {len(chosen_ids) - done - duplicates - again} were already gone (replayed or purged meanwhile)."
    if more:
        note += " More match: send the same action again to go on."
    messages.success(request, note)
    return _answer(request, request.POST)


def _whither(
    verb: str, target: queue_operator.ReplayTarget, to: queue_operator.ReplayDestination, to_every_group: int
) -> str:
    """What the outcome says of where the copies went and who gets them."""
    if verb != "replay" or to.queue is None:
        note = replayed_to(verb, target, to_every_group)
        return note + (f"; into partition {to.partition}" if verb == "replay" and to.partition else "")
    where = f"into queue {to.queue}" + (f", partition {to.partition}" if to.partition else "")
    return f", {where} (transactionId dlq:<id>)"


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
