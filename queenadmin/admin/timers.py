"""Timers in the admin: cancel, fire now, move by a delta, edit as a reschedule.

Every write aims at the timer the operator saw (its message id), through
``domain/timers/operator.py``, so a timer rescheduled or fired since is left
alone and the page says so.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse

from queenadmin.admin.domain_admin import (
    Confirmed,
    DomainAdmin,
    DomainForm,
    ReasonForm,
    parse_json,
    prefix_search,
    require,
)
from queenadmin.domain.audit import Who
from queenadmin.domain.timers import operator
from queenadmin.errors import QueenError
from queenadmin.models import Queue, Timer
from queenadmin.plumbing import db

PREVIEW_CHARS = 80
#: Queues whose timer keys a search looks at.
QUEUES_SEARCHED = 500


class QueueFilter(admin.SimpleListFilter):
    """By queue: the names come from the queues table (small), not from a
    ``DISTINCT`` over every timer."""

    title = "queue"
    parameter_name = "queue"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        names = Queue.objects.order_by("name").values_list("name", flat=True)[:200]
        return [(n, n) for n in names]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Timer]) -> QuerySet[Timer]:
        value = self.value()
        return queryset.filter(queue=value) if value else queryset


class MoveForm(ReasonForm):
    seconds = forms.IntegerField(
        label="Move by (seconds)", help_text="Negative moves earlier; a time in the past fires on the next step."
    )


class TimerEditForm(DomainForm):
    due = forms.DateTimeField(label="Due at (UTC)", help_text="YYYY-MM-DD HH:MM:SS")
    payload_text = forms.CharField(
        label="Payload",
        widget=forms.Textarea(attrs={"rows": 6, "cols": 80}),
        help_text="JSON; left as it is, the payload is kept.",
    )
    seen_message_id = forms.CharField(widget=forms.HiddenInput)

    class Meta(DomainForm.Meta):
        model = Timer

    def show(self, row: Timer) -> None:
        self.fields["due"].initial = row.deliver_at
        self.fields["payload_text"].initial = row.payload_json
        self.fields["seen_message_id"].initial = row.message_id
        if row.encrypted:
            self.fields["payload_text"].disabled = True
            self.fields["payload_text"].help_text = "Encrypted: the payload cannot be edited."

    def clean_payload_text(self) -> bytes | None:
        text = self.cleaned_data["payload_text"]
        if self.instance.encrypted or text == self.instance.payload_json:
            return None
        parse_json(text)
        return str(text).encode()


def _seen(timer: Timer, message_id: str) -> operator.SeenTimer:
    """``timer`` as the page showed it: firing as ``message_id``."""
    return operator.SeenTimer(timer.queue, timer.timer_key, message_id, timer.txn, timer.partition)


def _explain(outcome: operator.OperatorOutcome) -> str:
    if outcome.why == "fired":
        return "fired already"
    if outcome.why == "rescheduled":
        return "rescheduled since"
    return "gone"


@admin.register(Timer)
class TimerAdmin(DomainAdmin):
    form = TimerEditForm
    list_display = ("queue", "timer_key", "deliver_at", "partition", "preview", "attempts", "encrypted")
    list_filter = (QueueFilter,)
    search_fields = ("timer_key",)
    search_help_text = "Timer keys starting with the text."
    ordering = ("deliver_at", "id")
    readonly_fields = ("queue", "timer_key", "partition", "deliver_at", "message_id", "txn", "attempts", "last_error")
    fields = (
        "queue",
        "timer_key",
        "partition",
        "deliver_at",
        "message_id",
        "attempts",
        "last_error",
        "due",
        "payload_text",
        "seen_message_id",
        "reason",
    )
    actions = ("cancel_timers", "fire_now", "move_by")

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Timer], search_term: str
    ) -> tuple[QuerySet[Timer], bool]:
        names = db.distinct_leading(Timer, "queue", limit=QUEUES_SEARCHED)
        return prefix_search(queryset, search_term, leading="queue", key="timer_key", values=names)

    @admin.display(description="payload")
    def preview(self, timer: Timer) -> str:
        if timer.encrypted:
            return "(encrypted)"
        text = timer.payload_json
        return text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS] + "…"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Timer]:
        # The raw payload bytes are never shown: leave them in the database.
        return super().get_queryset(request).defer("payload")

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None or not self.has_change_permission(request, obj):
            return (*self.readonly_fields, "preview")
        return self.fields

    # -- Writes, through domain/timers/operator.py ------------------------

    def _act(
        self,
        timer: Timer,
        verb: operator.Verb,
        who: Who,
        *,
        by: timedelta | None = None,
        in_txn: bool = False,
    ) -> str | None:
        # An action's row is its own transaction; the delete view's is Django's.
        act = operator.timer_operator_action_in_txn if in_txn else operator.timer_operator_action
        outcome = act(verb=verb, seen=_seen(timer, timer.message_id), who=who, by=by)
        return None if outcome.done else _explain(outcome)

    def _bulk(
        self, request: HttpRequest, queryset: QuerySet[Timer], verb: operator.Verb, title: str, done: str
    ) -> TemplateResponse | None:
        def act(timer: Timer, page: Confirmed) -> str | None:
            by = timedelta(seconds=page.data["seconds"]) if verb == "move" else None
            try:
                return self._act(timer, verb, page.who, by=by)
            except QueenError as exc:
                return exc.detail

        form_class = MoveForm if verb == "move" else ReasonForm
        rows = queryset.defer("payload")
        return self.each_confirmed(
            request, rows, act, done=done, perm="change_timer", title=title, form_class=form_class
        )

    @admin.action(description="Cancel the selected timers", permissions=["change"])
    def cancel_timers(self, request: HttpRequest, queryset: QuerySet[Timer]) -> TemplateResponse | None:
        return self._bulk(request, queryset, "cancel", "Cancel timers", "Cancelled")

    @admin.action(description="Fire the selected timers now", permissions=["change"])
    def fire_now(self, request: HttpRequest, queryset: QuerySet[Timer]) -> TemplateResponse | None:
        return self._bulk(request, queryset, "fire", "Fire timers now", "Fired")

    @admin.action(description="Move the selected timers by a delta", permissions=["change"])
    def move_by(self, request: HttpRequest, queryset: QuerySet[Timer]) -> TemplateResponse | None:
        return self._bulk(request, queryset, "move", "Move timers", "Moved")

    def save_model(self, request: HttpRequest, obj: Timer, form: Any, change: bool) -> None:
        data = form.cleaned_data
        outcome = self.in_view(
            request,
            lambda: operator.timer_operator_reschedule_in_txn(
                seen=_seen(obj, data["seen_message_id"]),
                who=self.who(request, data["reason"]),
                to=data["due"],
                payload=data["payload_text"],
            ),
        )
        if outcome is not None and not outcome.done:
            self.view_write(request).refused = f"Not saved: the timer {_explain(outcome)}."

    def response_change(self, request: HttpRequest, obj: Timer) -> HttpResponse:
        refused = self.view_write(request).refused
        if refused:
            self.message_user(request, refused, messages.ERROR)
            if "rescheduled" in refused or "fired" in refused or "gone" in refused:
                return HttpResponseRedirect("../../")
            return HttpResponseRedirect(request.path)
        self.message_user(request, f"Rescheduled {obj.queue}/{obj.timer_key}.", messages.SUCCESS)
        return HttpResponseRedirect("../../")

    def delete_model(self, request: HttpRequest, obj: Timer) -> None:
        require(request, "change_timer")
        # Aim at the timer the page showed, not at whatever holds the key now.
        obj.message_id = request.POST.get("seen_message_id") or obj.message_id
        why = self.in_view(
            request, lambda: self._act(obj, "cancel", self.who(request, request.POST.get("reason", "")), in_txn=True)
        )
        if why is not None:
            self.view_write(request).refused = f"Not cancelled: the timer {why}."
