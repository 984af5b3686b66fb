"""Pause and resume from the queue page: the whole queue, or one consumer
group's pops of it.

One action (``staff_action``): GET shows the confirmation (in the page's
dialog with htmx, a page of its own without), POST does it through
``domain/queues/operator/pause.py``, which writes the audit entry with the
operator's reason. Nothing is lost either way, so no name is typed to
confirm (a purge or a group delete asks for one).
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpResponse, HttpResponseRedirect
from django.shortcuts import render

from queenadmin.dashboard import links, live
from queenadmin.dashboard.views.access import HtmxHttpRequest, staff_action, who_of
from queenadmin.dashboard.views.queues import QUEUE
from queenadmin.domain.queues import operator as queue_operator
from queenadmin.errors import QueueNotFound
from queenadmin.models.queues import QUEUE_MODE

TEMPLATE = "queenadmin/queues/pause.html"


def _label(group: str) -> str:
    return "queue mode" if group == QUEUE_MODE else group


@staff_action("queue.pause")
def queue_pause(request: HtmxHttpRequest, name: str) -> HttpResponse:
    """GET: the confirmation of a pause or resume (``do``, and ``group``
    for one group's pops). POST: do it."""
    source = request.POST if request.method == "POST" else request.GET
    state = queue_operator.queue_pause_state(name=name)
    if state is None:
        raise Http404(f"no queue {name}")
    pause = source.get("do", "pause") != "resume"
    group = source.get("group", "") or None
    ctx: dict[str, Any] = {
        "page": "queues",
        "queue_name": name,
        "queue_url": links.queue_url(name),
        "state": state,
        "pause": pause,
        "do": "pause" if pause else "resume",
        "group": group or "",
        "label": _label(group) if group else "",
        "reason": source.get("reason", ""),
    }
    if request.method == "GET":
        template = TEMPLATE + ("#pause-form" if request.htmx else "")
        return render(request, template, ctx)
    who = who_of(request)
    try:
        if group is None:
            verb = queue_operator.queue_pause if pause else queue_operator.queue_resume
            change = verb(queue=name, who=who)
        else:
            group_verb = queue_operator.queue_group_pause if pause else queue_operator.queue_group_resume
            change = group_verb(queue=name, group=group, who=who)
    except QueueNotFound as exc:
        raise Http404(str(exc)) from exc
    ctx.update(change=change, state=change.state)
    if request.htmx:
        return live.answer_action(request, QUEUE, f"{TEMPLATE}#pause-outcome", ctx, extra={"name": name})
    what = name if group is None else f"{ctx['label']} on {name}"
    done = ("Paused " if pause else "Resumed ") + what if change.changed else f"{what} was already {ctx['do']}d"
    messages.success(request, done + ".")
    return HttpResponseRedirect(links.queue_url(name) + "#queue-summary", status=303)
