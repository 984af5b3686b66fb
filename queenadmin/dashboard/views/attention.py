"""``/attention/thresholds/``: when a queue needs attention, as operators set it.

An action (``staff_action("queue.attention")``): GET shows the form of one
queue's thresholds (``?queue=``) or of the defaults (no queue), POST stores
them through ``domain/attention/operator.py``, which writes the audit
entry with the reason. A field left empty takes the default. Input that is
not a whole number in range answers 422 with the form and what is wrong;
an unknown queue 404; a viewer 403.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse

from queenadmin.dashboard import links
from queenadmin.dashboard.views.access import HtmxHttpRequest, staff_action, who_of
from queenadmin.domain.attention import (
    DEFAULTS_KEY,
    FIELDS,
    LIMITS,
    Override,
    attention_thresholds,
    attention_thresholds_set,
)
from queenadmin.errors import InvalidArgument, QueueNotFound

TEMPLATE = "queenadmin/attention.html"


@dataclass(frozen=True)
class Field:
    name: str
    label: str
    hint: str


FORM_FIELDS = (
    Field("max_lag", "Lag over (messages)", "Messages the slowest group has not finished. 0: never."),
    Field("max_age_seconds", "Oldest claimable over (seconds)", "How long a claimable message may wait. 0: never."),
    Field("dlq_growth", "Dead letters within the window", "This many new dead letters flag the queue. 0: never."),
    Field(
        "window_minutes",
        "Window (minutes)",
        'How far back "no reader", "stalled", "backlog rising" and the DLQ\'s growth look.',
    ),
)
assert tuple(f.name for f in FORM_FIELDS) == FIELDS


def _parse(source: Any) -> Override:
    """The form's values: empty takes the default; anything but a whole
    number raises ``InvalidArgument`` naming the field."""
    values: dict[str, int | None] = {}
    for field in FORM_FIELDS:
        text = str(source.get(field.name, "")).strip().replace("_", "")
        if not text:
            values[field.name] = None
        elif text.isascii() and text.isdigit() and len(text) <= 15:
            values[field.name] = int(text)
        else:
            low, high = LIMITS[field.name]
            raise InvalidArgument(f"{field.label}: give a whole number from {low:,} to {high:,}, or leave it empty")
    return Override(**values)


@staff_action("queue.attention")
def thresholds(request: HtmxHttpRequest) -> HttpResponse:
    """GET: the thresholds' form. POST: store them."""
    source = request.POST if request.method == "POST" else request.GET
    queue = str(source.get("queue", ""))
    try:
        current = attention_thresholds(queue=queue)
    except QueueNotFound as exc:
        raise Http404(str(exc)) from exc
    values = {
        f.name: "" if getattr(current.stored, f.name) is None else str(getattr(current.stored, f.name))
        for f in FORM_FIELDS
    }
    ctx: dict[str, Any] = {
        "page": "overview",
        "queue": queue,
        "queue_url": links.queue_url(queue) if queue != DEFAULTS_KEY else "",
        "current": current,
        "fields": [(f, values[f.name], getattr(current.inherited, f.name), LIMITS[f.name]) for f in FORM_FIELDS],
        "reason": "",
        "error": "",
    }
    if request.method == "GET":
        return render(request, TEMPLATE, ctx)
    ctx["reason"] = str(source.get("reason", ""))
    ctx["fields"] = [
        (f, str(source.get(f.name, "")), getattr(current.inherited, f.name), LIMITS[f.name]) for f in FORM_FIELDS
    ]
    try:
        done = attention_thresholds_set(queue=queue, override=_parse(source), who=who_of(request))
    except QueueNotFound as exc:
        raise Http404(str(exc)) from exc
    except InvalidArgument as exc:
        ctx["error"] = exc.detail
        return render(request, TEMPLATE, ctx, status=422)
    whose = f"queue {queue}" if queue != DEFAULTS_KEY else "every queue (the defaults)"
    messages.success(request, f"Attention thresholds of {whose}: {done.after.describe()}. Recorded in the audit trail.")
    return HttpResponseRedirect(reverse("dashboard:overview") + "#attention-title", status=303)
