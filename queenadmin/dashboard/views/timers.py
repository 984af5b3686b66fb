"""``/timers/``: pending timers by due time, filtered, counted and charted;
cancel, move and fire now one timer, or cancel and move all a filter selects."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.contrib import messages
from django.http import HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.safestring import SafeString

from queenadmin.conf import settings as app_settings
from queenadmin.dashboard import live, svg
from queenadmin.dashboard.permissions import User
from queenadmin.dashboard.views.access import HtmxHttpRequest, staff_action, staff_page, who_of
from queenadmin.dashboard.views.querystring import query
from queenadmin.domain import clock, events, timers
from queenadmin.domain.timers.bulk import (
    BULK_BATCH,
    BulkOutcome,
    BulkVerb,
    TimerSummary,
    shift_text,
    timers_bulk_cancel,
    timers_bulk_move,
    timers_summary,
)
from queenadmin.domain.timers.operator import OperatorOutcome, SeenTimer, Verb, timer_operator_action
from queenadmin.domain.timers.ops import EARLIEST_DUE, LATEST_DUE, TimerFilter, check_filter
from queenadmin.errors import InvalidArgument, NameTooLong, TimerHorizonExceeded, TimersBadRequest

_DELTA = re.compile(r"^([+-])\s*((?:\d+\s*[dhms]\s*)+)$")
_PART = re.compile(r"(\d+)\s*([dhms])")
_UNIT = {"d": 86400, "h": 3600, "m": 60, "s": 1}


#: The query parameters that make a filter (bookmarkable; ``jump`` and
#: ``after`` only move the page).
FILTER_PARAMS = ("queue", "prefix", "due_from", "due_to")


def parse_when(text: str, *, now: datetime) -> datetime:
    """A moment a person typed: ``2026-12-01 08:00`` or ``2026-12-01``
    (UTC without a zone), ``now``, or a shift from now (``+1d``, ``-30m``).

    Raises ``ValueError`` with a message for people.
    """
    text = text.strip()
    if text.lower() == "now":
        return now
    delta = _DELTA.match(text)
    if delta:
        seconds = sum(int(n) * _UNIT[u] for n, u in _PART.findall(delta.group(2)))
        try:
            moment = now + timedelta(seconds=-seconds if delta.group(1) == "-" else seconds)
        except OverflowError:
            raise ValueError(f"{text!r} is too far away.") from None
        if not EARLIEST_DUE <= moment <= LATEST_DUE:
            raise ValueError(f"{text!r} is too far away.")
        return moment
    try:
        moment = datetime.fromisoformat(text.replace(" UTC", "").replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{text!r} is not a time such as 2026-12-01 08:00 (UTC), +1d or now.") from None
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    if not EARLIEST_DUE <= moment <= LATEST_DUE:
        raise ValueError(f"{text!r} is outside {EARLIEST_DUE:%Y} to {LATEST_DUE:%Y}.")
    return moment


def parse_shift(text: str) -> timedelta:
    """``+15m``, ``-1h``, ``+1d2h``: a shift for a bulk move (not zero).

    Raises ``ValueError`` with a message for people.
    """
    delta = _DELTA.match(text.strip())
    if not delta:
        raise ValueError(f"{text.strip()!r} is not a shift such as +15m, -1h or +1d2h.")
    seconds = sum(int(n) * _UNIT[u] for n, u in _PART.findall(delta.group(2)))
    if not seconds:
        raise ValueError("A shift of zero moves nothing.")
    try:
        return timedelta(seconds=-seconds if delta.group(1) == "-" else seconds)
    except OverflowError:
        raise ValueError(f"{text.strip()!r} is too far.") from None


@dataclass(frozen=True)
class Filtered:
    """A page's filter as parsed from its query string, or why it is not one."""

    selection: TimerFilter
    jump: datetime | None
    #: Per field, what is wrong with it.
    errors: dict[str, str]


def parse_filter(params: QueryDict, *, now: datetime) -> Filtered:
    """The ``TimerFilter`` and jump the query string names (``FILTER_PARAMS``, ``jump``)."""
    errors: dict[str, str] = {}
    moments: dict[str, datetime | None] = {}
    for name in ("due_from", "due_to", "jump"):
        text = params.get(name, "").strip()
        moments[name] = None
        if text:
            try:
                moments[name] = parse_when(text, now=now)
            except ValueError as exc:
                errors[name] = str(exc)
    selection = TimerFilter(
        queue=params.get("queue", "").strip(),
        key_prefix=params.get("prefix", ""),
        due_from=moments["due_from"],
        due_to=moments["due_to"],
    )
    if not errors:
        try:
            check_filter(selection)
        except InvalidArgument as exc:
            errors["filter"] = exc.detail
    return Filtered(selection, moments["jump"], errors)


def filter_query(params: QueryDict) -> str:
    """``?queue=…&due_from=…``: the filter alone (for the bulk actions' links)."""
    return query({k: params.get(k, "") for k in FILTER_PARAMS})


def due_chart(summary: TimerSummary) -> SafeString | None:
    chart = summary.chart
    if chart is None:
        return None
    unit = shift_text(chart.bucket).lstrip("+")
    titles = [
        f"{chart.start + chart.bucket * i:%Y-%m-%d %H:%M:%S} UTC, {unit}: {n:,} due" for i, n in enumerate(chart.counts)
    ]
    day = chart.bucket >= timedelta(days=1) or chart.end - chart.start > timedelta(days=1)
    shape = "%Y-%m-%d %H:%M" if day else "%H:%M:%S"
    return svg.bar_chart(
        chart.counts,
        title=f"Timers due per {unit}, {chart.start:{shape}} to {chart.end:{shape}} UTC",
        left_label=f"{chart.start:{shape}}",
        right_label=f"{chart.end:{shape}} UTC",
        bar_titles=titles,
    )


def bucket_rows(summary: TimerSummary, params: QueryDict) -> list[dict[str, Any]]:
    """The chart's non-empty bars as rows: when, how many, and the page's
    link that jumps there (keeping the filter)."""
    chart = summary.chart
    if chart is None:
        return []
    rows = []
    for i, count in enumerate(chart.counts):
        if count:
            at = chart.start + chart.bucket * i
            rows.append({"at": at, "count": f"{count:,}", "query": query(params, jump=at.isoformat())})
    return rows


def timers_context(user: User, params: QueryDict) -> dict[str, Any]:
    now = clock.now()
    filtered = parse_filter(params, now=now)
    after = params.get("after", "")
    error = " ".join(filtered.errors.values())
    page, summary = timers.TimerPage((), False, None), None
    if not error:
        try:
            page = timers.timers_pending(
                selection=filtered.selection, after=after, start=filtered.jump, limit=app_settings.DASHBOARD_PAGE_SIZE
            )
            cursor = timers.timers_cursor(after)
            if cursor is None and filtered.jump is not None:
                # Everything due before the jump sorts before the page.
                cursor = (filtered.jump, 0)
            summary = timers_summary(selection=filtered.selection, cursor=cursor)
        except (TimersBadRequest, NameTooLong) as exc:
            page, error = timers.TimerPage((), False, None), str(exc)
    moved = bool(after or filtered.jump)
    return {
        "queue": params.get("queue", ""),
        "prefix": params.get("prefix", ""),
        "due_from": params.get("due_from", ""),
        "due_to": params.get("due_to", ""),
        "jump": params.get("jump", ""),
        "selection": filtered.selection,
        "filtered": any(params.get(k) for k in FILTER_PARAMS),
        "after": after,
        "error": error,
        "rows": page.rows,
        "summary": summary,
        "total_text": f"{summary.total:,}" if summary is not None else "",
        "first_row_text": f"{summary.before + 1:,}" if summary is not None else "",
        "last_row_text": f"{summary.before + len(page.rows):,}" if summary is not None else "",
        "chart": None if summary is None else due_chart(summary),
        "chart_unit": "" if summary is None or summary.chart is None else shift_text(summary.chart.bucket).lstrip("+"),
        "buckets": [] if summary is None else bucket_rows(summary, params),
        "bulk_query": filter_query(params),
        # "pending" turns "due" at the first due time on the page.
        "stale_at": min((t.deliver_at for t in page.rows if t.deliver_at > now), default=None),
        "next_query": query(params, after=page.next_after) if page.next_after else "",
        "first_query": query(params, jump="") if moved else "",
    }


TIMERS = live.one_region_page("timers", "queenadmin/timers.html", timers_context, "timers-pending", events.TIMERS_GROUP)


@staff_page("timers")
def timers_page(request: HtmxHttpRequest) -> HttpResponse:
    # A filter that cannot be read answers 400 with the page and its error.
    bad = parse_filter(request.GET, now=clock.now()).errors
    return live.render_page(request, TIMERS, status=400 if bad else 200)


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


def _timer_action(request: HtmxHttpRequest, verb: Verb) -> HttpResponse:
    source = request.POST if request.method == "POST" else request.GET
    ident = {k: source.get(k, "") for k in ("queue", "key", "message_id", "txn", "partition")}
    ctx: dict[str, Any] = {
        **ident,
        "verb": verb,
        "action_url": reverse(f"dashboard:timer_{verb}"),
        "page": "timers",
        "when": source.get("when", ""),
    }
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
    return redirect(reverse("dashboard:timers") + query({"queue": ident["queue"]}))


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


def bulk_summary(outcome: BulkOutcome) -> str:
    """One plain sentence for a bulk action's flash message."""
    if outcome.verb == "cancel":
        text = f"Cancelled {outcome.done:,} timer{'s' if outcome.done != 1 else ''}"
    else:
        text = (
            f"Moved {outcome.done:,} timer{'s' if outcome.done != 1 else ''} by {shift_text(outcome.by or timedelta())}"
        )
    text += f" ({outcome.selection.describe()})."
    if outcome.missing:
        text += (
            f" {outcome.missing:,} of the {outcome.expected:,} you confirmed were no longer pending as filtered"
            " when reached: they fired, or were cancelled, moved or rescheduled meanwhile."
        )
    if outcome.past_horizon:
        text += f" {outcome.past_horizon:,} were left alone: the move would take them past the scheduling horizon."
    return text


def _int_field(source: QueryDict, name: str) -> int | None:
    text = source.get(name, "")
    return int(text) if text.isdigit() and len(text) < 19 else None


def _bulk_action(request: HtmxHttpRequest, verb: BulkVerb) -> HttpResponse:
    source = request.POST if request.method == "POST" else request.GET
    filtered = parse_filter(source, now=clock.now())
    ctx: dict[str, Any] = {
        "verb": verb,
        "action_url": reverse(f"dashboard:timers_bulk_{verb}"),
        "page": "timers",
        # The filter as resolved now: a relative time (+1d) is sent back as
        # the moment the operator confirmed, not read again later.
        "params": {
            "queue": filtered.selection.queue,
            "prefix": filtered.selection.key_prefix,
            "due_from": "" if filtered.selection.due_from is None else filtered.selection.due_from.isoformat(),
            "due_to": "" if filtered.selection.due_to is None else filtered.selection.due_to.isoformat(),
        },
        "back_query": filter_query(source),
        "selection": filtered.selection,
        "shift": source.get("shift", ""),
        "reason": source.get("reason", ""),
        "error": " ".join(filtered.errors.values()),
        "summary": None,
        "batch": BULK_BATCH,
    }
    template = "queenadmin/timers_bulk.html"

    def counted(summary: TimerSummary) -> None:
        ctx["summary"], ctx["total_text"] = summary, f"{summary.total:,}"

    def refuse(message: str) -> HttpResponse:
        ctx["error"] = message
        if not filtered.errors:
            counted(timers_summary(selection=filtered.selection, with_last_id=True))
        return render(request, template, ctx, status=422 if request.method == "POST" else 400)

    if ctx["error"]:
        return refuse(ctx["error"])
    if request.method == "GET":
        counted(timers_summary(selection=filtered.selection, with_last_id=True))
        return render(request, template, ctx)
    expected, upto_id = _int_field(source, "expected"), _int_field(source, "upto")
    if expected is None or upto_id is None:
        return refuse("Confirm from the confirmation page: it names how many timers you act on.")
    try:
        if verb == "cancel":
            outcome = timers_bulk_cancel(
                selection=filtered.selection, who=who_of(request), expected=expected, upto_id=upto_id
            )
        else:
            try:
                by = parse_shift(ctx["shift"])
            except ValueError as exc:
                return refuse(str(exc))
            outcome = timers_bulk_move(
                selection=filtered.selection, by=by, who=who_of(request), expected=expected, upto_id=upto_id
            )
    except TimerHorizonExceeded:
        return refuse(
            f"That takes the latest timer past the scheduling horizon ({app_settings.TIMERS_HORIZON_SECONDS // 86400}"
            " days); nothing was moved."
        )
    except InvalidArgument as exc:
        return refuse(exc.detail)
    level = messages.SUCCESS if outcome.done and not outcome.missing else messages.WARNING
    messages.add_message(request, level, bulk_summary(outcome))
    return redirect(reverse("dashboard:timers") + ctx["back_query"], permanent=False)


def _verb_view(act: Callable[[HtmxHttpRequest, Any], HttpResponse], verb: str) -> Callable[..., HttpResponse]:
    """The view that does ``act`` for ``verb``, for staff with the ``timer.<verb>`` permission."""

    def view(request: HtmxHttpRequest) -> HttpResponse:
        return act(request, verb)

    return staff_action(f"timer.{verb}")(view)


timer_cancel = _verb_view(_timer_action, "cancel")
timer_move = _verb_view(_timer_action, "move")
timer_fire = _verb_view(_timer_action, "fire")
timers_bulk_cancel_view = _verb_view(_bulk_action, "cancel")
timers_bulk_move_view = _verb_view(_bulk_action, "move")
