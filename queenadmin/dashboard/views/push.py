"""**Push a message…** from a queue's page (operators).

The form is one item of ``POST /push``: a JSON payload (a textarea, parsed
here), a partition (``Default`` when blank) and an optional
transactionId. The item is checked by the API's parser
(``api/wire/queues.parse_push_items``, its refusals without their
``items[0].`` prefix) and pushed by the API's append
(``operator/push.py`` around ``queue_push_in_txn``), stamped with the
operator's username as its ``producerSub`` and audited with their reason.
Bad input answers 422 with the form and the refusal beside its field.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpResponse, HttpResponseRedirect
from django.shortcuts import render

from queenadmin.api.wire import queues as wire
from queenadmin.dashboard import links, live
from queenadmin.dashboard.views.access import HtmxHttpRequest, staff_action, who_of
from queenadmin.dashboard.views.queues import QUEUE
from queenadmin.domain import queues
from queenadmin.domain.queues import operator as queue_operator
from queenadmin.errors import InvalidArgument, QueueFull, QueueNotFound

TEMPLATE = "queenadmin/queues/push.html"
#: What the API's parser names the one item's fields.
_ITEM = "items[0]."
FIELDS = ("payload", "partition", "transactionId")


def _refusal(detail: str) -> tuple[str, str]:
    """(field, text) of a parser's refusal of the one item: the field it
    names (``""``: none of the form's) and the text without ``items[0].``."""
    text = detail.removeprefix(_ITEM)
    field = text.split(" ", 1)[0]
    return (field if field in FIELDS else ""), text


def _form(request: HtmxHttpRequest, ctx: dict[str, Any], status: int) -> HttpResponse:
    template = TEMPLATE + ("#push-form" if request.htmx else "")
    return render(request, template, ctx, status=status)


@staff_action("queue.push")
def queue_push(request: HtmxHttpRequest, name: str) -> HttpResponse:
    """GET: the form. POST: push the message."""
    if queues.queue_settings(name=name) is None:
        raise Http404(f"no queue {name}")
    posted = request.method == "POST"
    source = request.POST if posted else request.GET
    ctx: dict[str, Any] = {
        "page": "queues",
        "queue_name": name,
        "queue_url": links.queue_url(name),
        "payload": source.get("payload", "{}"),
        "partition": source.get("partition", queues.DEFAULT_PARTITION),
        "transaction_id": source.get("transactionId", ""),
        "reason": source.get("reason", ""),
        "error": "",
        "errors": {},
    }
    if not posted:
        return _form(request, ctx, 200)
    try:
        payload = json.loads(ctx["payload"])
    except ValueError as exc:
        ctx["error"] = ctx["errors"]["payload"] = f"payload is not JSON: {exc}"
        return _form(request, ctx, 422)
    item: dict[str, Any] = {"queue": name, "payload": payload}
    if ctx["partition"].strip():
        item["partition"] = ctx["partition"].strip()
    if ctx["transaction_id"]:
        item["transactionId"] = ctx["transaction_id"]
    try:
        (command,) = wire.parse_push_items([item])
        result = queue_operator.queue_operator_push(item=command, who=who_of(request))
    except QueueNotFound as exc:
        raise Http404(str(exc)) from exc
    except InvalidArgument as exc:
        field, ctx["error"] = _refusal(exc.detail)
        if field:
            ctx["errors"][field] = ctx["error"]
        return _form(request, ctx, 422)
    except QueueFull as exc:
        ctx["error"] = exc.detail
        return _form(request, ctx, 422)
    ctx.update(result=result, pushed=command, message_url=links.message_url(name, result.message_id))
    if request.htmx:
        return live.answer_action(request, QUEUE, f"{TEMPLATE}#push-outcome", ctx, extra={"name": name})
    if result.status == "duplicate":
        done = (
            f"Not pushed: partition {command.partition} already holds transactionId {result.transaction_id}"
            f" (message {result.message_id}, offset {result.offset})."
        )
    else:
        done = f"Pushed message {result.message_id} to {name} / {command.partition} at offset {result.offset}."
    messages.success(request, done)
    return HttpResponseRedirect(links.queue_url(name) + "#queue-messages", status=303)
