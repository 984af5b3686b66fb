"""A stalled queue's recovery from its page: a consumer group's seek,
reset or delete, and a queue purge.

Each is an action (``staff_action``): GET shows its confirmation (in the
page's dialog with htmx, a page of its own without), POST does it through
``domain/queues/recovery.py``, which writes the audit entry. Deleting a
group and purging a queue also ask for its name typed, as the DLQ purge
does: they cannot be undone.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpResponse, HttpResponseRedirect
from django.shortcuts import render

from queenadmin.dashboard import links, live
from queenadmin.dashboard.text import shown_text
from queenadmin.dashboard.views.common import HtmxHttpRequest, staff_action, who_of
from queenadmin.dashboard.views.queues import QUEUE
from queenadmin.domain.queues import board
from queenadmin.domain.queues import operator as queue_operator
from queenadmin.errors import InvalidArgument, NotFound, QueueNotFound
from queenadmin.models.queues import QUEUE_MODE

TEMPLATE = "queenadmin/queues/recover.html"
#: Purge steps one request runs (each one transaction of ``PURGE_BATCH``).
MAX_PURGE_STEPS = 100


@dataclass(frozen=True)
class Choice:
    value: str
    action: queue_operator.GroupAction
    to: queue_operator.SeekTo
    label: str
    effect: str


CHOICES = (
    Choice(
        "seek-start",
        "seek",
        "start",
        "Seek to the start",
        "Reads every message still stored again, on every partition (a redelivery of what it finished).",
    ),
    Choice(
        "seek-time",
        "seek",
        "time",
        "Seek to a time",
        "Reads on from the first message pushed after the time you give (UTC); earlier ones count as done.",
    ),
    Choice(
        "seek-end",
        "seek",
        "end",
        "Seek to the end",
        "Skips every message pushed so far: the group reads only what is pushed next. Skipped messages are not "
        "dead-lettered; nothing keeps a record of them.",
    ),
    Choice(
        "reset",
        "reset",
        "start",
        "Reset",
        "Puts each cursor back where the group started (its subscription start) and forgets its dead-letter "
        "counts; the group stays registered.",
    ),
    Choice(
        "delete",
        "delete",
        "start",
        "Delete the group",
        "Forgets the group on this queue: its positions and its registration. Its next pop registers it anew, "
        "placed by its subscription mode. Cannot be undone.",
    ),
)
BY_VALUE = {c.value: c for c in CHOICES}


def _label(group: str) -> str:
    return "queue mode" if group == QUEUE_MODE else group


def _queue_url(name: str) -> str:
    return links.queue_url(name)


def parse_moment(text: str) -> datetime | None:
    """A time typed in the form (``2026-12-03T10:00``, seconds and a zone
    optional; without a zone it is UTC); None when it is not one."""
    text = text.strip()
    if not text or len(text) > 40:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _group_of(name: str, group: str) -> board.GroupLag:
    qb = board.queue_board(name=name)
    if qb is None:
        raise Http404(f"no queue {name}")
    found = next((g for g in qb.groups if g.name == group), None)
    if found is None:
        raise Http404(f"no consumer group {group} on queue {name}")
    return found


def _confirmed(source: Any, name: str) -> bool:
    """Whether the form's ``confirm`` names ``name``: as stored, or as the
    page spells it (a text field drops line breaks, so a name stored before
    the rule of names is typed with its invisible characters written out)."""
    typed = str(source.get("confirm", "")).strip()
    return typed in (name, shown_text(name))


@staff_action("queue.group")
def group_recover(request: HtmxHttpRequest, name: str) -> HttpResponse:
    """GET: the confirmation of a group action. POST: do it."""
    source = request.POST if request.method == "POST" else request.GET
    group = source.get("group", "")
    lag = _group_of(name, group)
    chosen = BY_VALUE.get(source.get("do", ""))
    ctx: dict[str, Any] = {
        "page": "queues",
        "queue_name": name,
        "queue_url": _queue_url(name),
        "group": group,
        "label": _label(group),
        "lag": lag,
        "choices": CHOICES,
        "chosen": chosen.value if chosen else "",
        "at": source.get("at", ""),
        "reason": source.get("reason", ""),
        "error": "",
    }
    if request.method == "GET":
        return _form(request, ctx, "group-form", 200)
    if chosen is None:
        ctx["error"] = "Choose what to do with the group."
        return _form(request, ctx, "group-form", 422)
    at = parse_moment(ctx["at"]) if chosen.to == "time" else None
    if chosen.to == "time" and at is None:
        ctx["error"] = "Give the time to seek to, e.g. 2026-12-03T10:00 (UTC)."
        return _form(request, ctx, "group-form", 422)
    if chosen.action == "delete" and not _confirmed(source, ctx["label"]):
        ctx["error"] = f"Not deleted: type the group's name ({shown_text(ctx['label'])}) to confirm."
        return _form(request, ctx, "group-form", 422)
    try:
        done = queue_operator.queue_group_operator(
            queue=name, group=group, action=chosen.action, to=chosen.to, at=at, who=who_of(request)
        )
    except QueueNotFound as exc:
        raise Http404(str(exc)) from exc
    except (NotFound, InvalidArgument) as exc:
        ctx["error"] = exc.detail
        return _form(request, ctx, "group-form", 422)
    ctx.update(done=done, choice=chosen)
    summary = f"{chosen.label}: {ctx['label']} on {name}, {done.cursors} partitions; lag {done.lag_before:,} → {done.lag_after:,}."
    if request.htmx:
        return live.answer_action(request, QUEUE, f"{TEMPLATE}#group-outcome", ctx, extra={"name": name})
    messages.success(request, summary)
    return HttpResponseRedirect(_queue_url(name) + "#queue-summary", status=303)


@staff_action("queue.purge")
def queue_purge(request: HtmxHttpRequest, name: str) -> HttpResponse:
    """GET: the purge's confirmation. POST: purge, in bounded steps."""
    qb = board.queue_board(name=name)
    if qb is None:
        raise Http404(f"no queue {name}")
    source = request.POST if request.method == "POST" else request.GET
    ctx: dict[str, Any] = {
        "page": "queues",
        "queue_name": name,
        "queue_url": _queue_url(name),
        "queue": qb,
        "reason": source.get("reason", ""),
        "error": "",
    }
    if request.method == "GET":
        return _form(request, ctx, "purge-form", 200)
    if not _confirmed(source, name):
        ctx["error"] = f"Not purged: type the queue's name ({shown_text(name)}) to confirm."
        return _form(request, ctx, "purge-form", 422)
    who = who_of(request)
    deleted = 0
    step = None
    try:
        for _ in range(MAX_PURGE_STEPS):
            step = queue_operator.queue_purge(queue=name, who=who, resume_at=step.resume_at if step else None)
            deleted += step.deleted
            if not step.more:
                break
    except QueueNotFound as exc:
        raise Http404(str(exc)) from exc
    more = step is not None and step.more
    ctx.update(deleted=deleted, more=more)
    if request.htmx:
        return live.answer_action(request, QUEUE, f"{TEMPLATE}#purge-outcome", ctx, extra={"name": name})
    note = f"Purged {deleted:,} messages of {name}."
    if more:
        note += " More remain: purge again to go on."
    messages.success(request, note)
    return HttpResponseRedirect(_queue_url(name) + "#queue-summary", status=303)


def _form(request: HtmxHttpRequest, ctx: dict[str, Any], partial: str, status: int) -> HttpResponse:
    template = TEMPLATE + (f"#{partial}" if request.htmx else "")
    ctx["form"] = partial
    return render(request, template, ctx, status=status)
