"""``/timers/``: pending timers by due time; cancel, move and fire now."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from django.contrib import messages
from django.http import HttpResponse, QueryDict
from django.shortcuts import redirect, render

from queenadmin.conf import settings as app_settings
from queenadmin.dashboard import live
from queenadmin.dashboard.permissions import User
from queenadmin.dashboard.views.common import HtmxHttpRequest, page_view, paging, staff_action, who_of
from queenadmin.domain import clock, events, timers
from queenadmin.domain.timers.operator import OperatorOutcome, SeenTimer, Verb, timer_operator_action
from queenadmin.errors import TimerHorizonExceeded, TimersBadRequest


def timers_context(user: User, params: QueryDict) -> dict[str, Any]:
    queue, prefix, after = params.get("queue", ""), params.get("prefix", ""), params.get("after", "")
    error = ""
    try:
        page = timers.timers_pending(
            queue=queue, key_prefix=prefix, after=after, limit=app_settings.DASHBOARD_PAGE_SIZE
        )
    except TimersBadRequest as exc:
        page, error = timers.TimerPage((), False, None), str(exc)
    return {
        "queue": queue,
        "prefix": prefix,
        "after": after,
        "error": error,
        "rows": page.rows,
        # "pending" turns "due" at the first due time on the page.
        "stale_at": min((t.deliver_at for t in page.rows if t.deliver_at > clock.now()), default=None),
        **paging(params, page.next_after),
    }


TIMERS = live.one_region_page("timers", "queenadmin/timers.html", timers_context, "timers-pending", events.TIMERS_GROUP)
timers_page = page_view(TIMERS)


_DELTA = re.compile(r"^([+-])\s*((?:\d+\s*[dhms]\s*)+)$")
_PART = re.compile(r"(\d+)\s*([dhms])")
_UNIT = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def parse_move(text: str) -> tuple[datetime | None, timedelta | None]:
    """``+15m`` / ``-1h`` / ``+1h30m`` (by), or an ISO time (to; naive = UTC).

    Raises ``ValueError`` with a message for people.
    """
    text = text.strip()
    if not text:
        raise ValueError("Give a time (2026-12-01 08:00, taken as UTC) or a shift such as +15m or -1h.")
    delta = _DELTA.match(text)
    if delta:
        seconds = sum(int(n) * _UNIT[u] for n, u in _PART.findall(delta.group(2)))
        return None, timedelta(seconds=-seconds if delta.group(1) == "-" else seconds)
    if text.lower() == "now":
        return clock.now(), None
    try:
        moment = datetime.fromisoformat(text.replace(" UTC", "").replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"{text!r} is neither a shift such as +15m, -1h, +1d2h nor a time such as 2026-12-01 08:00 (UTC)."
        ) from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)), None


_ACTION = {"cancel": "timer.cancel", "move": "timer.move", "fire": "timer.fire"}


def _timer_action(request: HtmxHttpRequest, verb: Verb) -> HttpResponse:
    source = request.POST if request.method == "POST" else request.GET
    ident = {k: source.get(k, "") for k in ("queue", "key", "message_id", "txn", "partition")}
    ctx: dict[str, Any] = {**ident, "verb": verb, "page": "timers", "when": source.get("when", "")}
    row = timers.timer_peek(queue=ident["queue"], timer_key=ident["key"]) if ident["queue"] and ident["key"] else None
    ctx["row"] = row if row is not None and row.message_id == ident["message_id"] else None
    template = "queenadmin/timers_action.html"
    htmx = bool(request.htmx)
    form = template + ("#confirm-form" if htmx else "")

    def refuse(message: str) -> HttpResponse:
        ctx["error"] = message
        return render(request, form, ctx, status=422)

    if request.method == "GET":
        return render(request, form, ctx)
    if not ident["queue"] or not ident["key"] or not ident["message_id"]:
        return refuse("Name the timer: queue, key and message id.")
    to = by = None
    if verb == "move":
        try:
            to, by = parse_move(ctx["when"])
        except ValueError as exc:
            return refuse(str(exc))
    try:
        outcome = timer_operator_action(
            verb=verb,
            seen=SeenTimer(
                ident["queue"],
                ident["key"],
                ident["message_id"],
                ident["txn"],
                ident["partition"] or timers.DEFAULT_PARTITION,
            ),
            who=who_of(request),
            to=to,
            by=by,
        )
    except TimerHorizonExceeded:
        return refuse(f"That is past the scheduling horizon ({app_settings.TIMERS_HORIZON_SECONDS // 86400} days).")
    except TimersBadRequest as exc:
        return refuse(str(exc))
    ctx["outcome"] = outcome
    if htmx:
        return live.answer_action(request, TIMERS, template + "#outcome", ctx)
    messages.add_message(request, messages.SUCCESS if outcome.done else messages.WARNING, summary(outcome))
    return redirect(f"/timers/?queue={ident['queue']}")


def summary(outcome: OperatorOutcome) -> str:
    """One plain sentence for a flash message."""
    what = f"{outcome.queue}/{outcome.timer_key}"
    if outcome.done:
        if outcome.verb == "cancel":
            return f"Cancelled {what}."
        if outcome.verb == "move":
            return f"Moved {what} to {clock.iso_micros_z(outcome.deliver_at)}."
        return f"Fired {what} now."
    if outcome.why == "fired":
        return f"Too late: {what} already fired at {clock.iso_micros_z(outcome.fired_at)}."
    if outcome.why == "rescheduled":
        return f"{what} was rescheduled since you looked (now due {clock.iso_micros_z(outcome.deliver_at)}); nothing changed."
    return f"{what} is no longer pending (cancelled, or fired and gone from the log)."


@staff_action("timer.cancel")
def timer_cancel(request: HtmxHttpRequest) -> HttpResponse:
    return _timer_action(request, "cancel")


@staff_action("timer.move")
def timer_move(request: HtmxHttpRequest) -> HttpResponse:
    return _timer_action(request, "move")


@staff_action("timer.fire")
def timer_fire(request: HtmxHttpRequest) -> HttpResponse:
    return _timer_action(request, "fire")
