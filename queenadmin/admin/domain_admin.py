"""What every admin page shares (``DomainAdmin``): capped counts, an
action's confirmation page and its rows in batches, and how a domain write
in a change or delete view is told.

The admin reads models freely and writes only through ``domain/``: a save,
a delete or an action calls a domain function that bumps versions, tells
the dashboards and writes the audit entry (``via="admin"``) with the user
and the reason the operator typed on the form or the action's page.

Django's own change and delete views hold a transaction around a POST, so
``save_model`` and ``delete_model`` call the domain's ``*_in_txn`` forms
through ``DomainAdmin.in_view`` (a savepoint); what the domain answered is
kept for the response in a ``ViewWrite`` beside the request. An action
(``DomainAdmin.confirmed``, ``each_confirmed``) runs outside any
transaction and calls the public (durable) functions, one transaction per
row or batch.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar
from weakref import WeakKeyDictionary

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db import transaction
from django.db.models import Model, Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.functional import cached_property

from queenadmin.domain.audit import Who
from queenadmin.errors import QueenError

#: Where audit entries say an admin action came from.
VIA = "admin"
#: Rows a changelist counts at most; past it the page says "10,000+".
COUNT_CAP = 10_000
#: Rows one batch of a bulk action reads (each row is its own transaction,
#: or one domain call takes the batch).
BATCH = 500

M = TypeVar("M", bound=Model)
T = TypeVar("T")


@dataclass
class ViewWrite:
    """What the domain said to a change or delete view's write, kept for
    the view's response (``response_change``, ``response_add``,
    ``response_delete``), which Django calls after ``save_model`` or
    ``delete_model`` with no way to pass it along."""

    #: Why nothing was written, in the operator's words; None when it was.
    refused: str | None = None
    #: A token made by the write: shown in this response only, never stored.
    secret: str | None = None


# Keyed by the request and dropped with it: nothing is set on the request.
_view_writes: WeakKeyDictionary[HttpRequest, ViewWrite] = WeakKeyDictionary()


@dataclass(frozen=True)
class Confirmed:
    """An action the operator confirmed: who and why, and the form's fields."""

    who: Who
    data: dict[str, Any]


class CappedPaginator(Paginator):  # type: ignore[type-arg]
    """Counts at most ``COUNT_CAP + 1`` rows: ``SELECT COUNT(*)`` over a
    ``LIMIT``, so a list of a million messages costs a bounded index walk,
    never a full count. The page numbers past the cap are an estimate."""

    @cached_property
    def count(self) -> int:
        object_list: Any = self.object_list
        if isinstance(object_list, QuerySet):
            return int(object_list.order_by()[: COUNT_CAP + 1].count())
        return len(object_list)

    @property
    def cap(self) -> int:
        """Shown by ``admin/queenadmin/pagination.html``."""
        return COUNT_CAP

    @property
    def capped(self) -> bool:
        return self.count > COUNT_CAP


class DomainAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """A model admin whose lists never count everything and whose writes
    go through the domain."""

    paginator = CappedPaginator
    show_full_result_count = False
    list_per_page = 50
    #: Asks why, and aims at the version (or timer) the page showed.
    delete_confirmation_template = "admin/queenadmin/delete_confirmation.html"

    def get_actions(self, request: HttpRequest) -> Any:
        # Django's bulk delete removes rows behind the domain's back; bulk
        # deletes are each admin's own actions.
        found = super().get_actions(request)
        found.pop("delete_selected", None)
        return found

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        raise NotImplementedError("bulk deletes go through the admin's own actions")

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        # Django answers an action the user may not run with "no action
        # selected"; a refusal should look like one.
        name = request.POST.get("action") if request.method == "POST" else None
        if name and name in (self.actions or ()) and name not in self.get_actions(request):
            raise PermissionDenied
        return super().changelist_view(request, extra_context)

    def view_write(self, request: HttpRequest) -> ViewWrite:
        """The request's ``ViewWrite``, made empty on first use."""
        return _view_writes.setdefault(request, ViewWrite())

    def in_view(self, request: HttpRequest, write: Callable[[], T]) -> T | None:
        """Run ``write`` (a domain ``*_in_txn`` call) inside the view's
        transaction, in a savepoint: a refusal (``QueenError``) undoes what
        the write did, is kept as ``view_write(request).refused`` and
        answers None."""
        try:
            with transaction.atomic():
                return write()
        except QueenError as exc:
            self.view_write(request).refused = exc.detail
            return None

    def response_change(self, request: HttpRequest, obj: Any) -> HttpResponse:
        # ``save_model`` keeps why the domain did not write (a race, a
        # refusal); then say that and show the form again.
        refused = self.view_write(request).refused
        if refused:
            self.message_user(request, refused, messages.ERROR)
            return HttpResponseRedirect(request.path)
        return super().response_change(request, obj)

    def response_delete(self, request: HttpRequest, obj_display: str, obj_id: Any) -> HttpResponse:
        # ``delete_model`` keeps why the domain did not delete (a race, a
        # refusal); then say that, not "deleted successfully".
        refused = self.view_write(request).refused
        if refused:
            self.message_user(request, refused, messages.ERROR)
            return HttpResponseRedirect(reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_changelist"))
        return super().response_delete(request, obj_display, obj_id)

    def who(self, request: HttpRequest, reason: str) -> Who:
        """The user acting through the admin, for ``reason``."""
        return Who(str(request.user.get_username()), reason, VIA)

    def the_one(self, request: HttpRequest, rows: QuerySet[Any, T], refusal: str) -> T | None:
        """The one row an action on a single row was given, or None after
        telling the operator ``refusal`` (none or several were selected)."""
        found = list(rows[:2])
        if len(found) != 1:
            self.message_user(request, refusal, messages.ERROR)
            return None
        return found[0]

    def confirmed(
        self,
        request: HttpRequest,
        queryset: QuerySet[Any],
        *,
        perm: str,
        title: str,
        warning: str = "",
        form_class: type[ReasonForm] | None = None,
        form_kwargs: dict[str, Any] | None = None,
    ) -> Confirmed | TemplateResponse:
        """An action's confirmation: 403 without ``queenadmin.<perm>``, then
        its page (``form_class``, a ``ReasonForm``, asks why and for its own
        fields) until it comes back confirmed and valid.

        The page posts back to the changelist with the action and the
        selection (``select_across`` included), as Django's own delete
        confirmation does; ``queryset`` gives the rows it previews.
        """
        require(request, perm)
        form_class = form_class or ReasonForm
        form: ReasonForm
        if request.POST.get("confirmed"):
            form = form_class(request.POST, **(form_kwargs or {}))
            if form.is_valid():
                return Confirmed(self.who(request, form.cleaned_data["reason"]), form.cleaned_data)
        else:
            form = form_class(**(form_kwargs or {}))
        selected = request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)
        context = {
            **self.admin_site.each_context(request),
            "title": title,
            "warning": warning,
            "opts": self.model._meta,
            "form": form,
            "action": request.POST.get("action", ""),
            "selected": selected,
            "select_across": request.POST.get("select_across", "0"),
            "count": "every matching" if request.POST.get("select_across") == "1" else len(selected),
            "preview": list(queryset[:20]),
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, "admin/queenadmin/action_confirm.html", context)

    def each_confirmed(
        self,
        request: HttpRequest,
        queryset: QuerySet[M],
        act: Callable[[M, Confirmed], str | None],
        *,
        done: str,
        perm: str,
        title: str,
        warning: str = "",
        form_class: type[ReasonForm] | None = None,
    ) -> TemplateResponse | None:
        """An action on every selected row once ``confirmed``: ``act`` returns
        None when it changed the row, else why not; the page then tells how
        many rows were ``done`` ("Deleted 3 rows.") and why the others not."""
        page = self.confirmed(request, queryset, perm=perm, title=title, warning=warning, form_class=form_class)
        if isinstance(page, TemplateResponse):
            return page
        each(queryset, lambda row: act(row, page)).report(self, request, done)
        return None

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


class ReadOnlyAdmin(DomainAdmin):
    """Lists and details only; actions are declared per admin."""

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReasonForm(forms.Form):
    """The intermediate page of an action: why (always), plus its own fields."""

    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2, "cols": 60}),
        max_length=2000,
        help_text="Kept in the audit entry with your name.",
    )


def reason_field() -> forms.CharField:
    """The reason a change or add form asks for."""
    return forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2, "cols": 60}),
        max_length=2000,
        help_text="Why: kept in the audit entry with your name.",
    )


class DomainForm(forms.ModelForm):  # type: ignore[type-arg]
    """A change form whose values the domain writes (the form saves none of
    the model's fields), with the reason the audit entry keeps."""

    reason = reason_field()

    class Meta:
        fields: list[str] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.show(self.instance)

    def show(self, row: Any) -> None:
        """Set the fields' initial values from the row the page shows."""


def parse_json(text: str) -> Any:
    """``text`` as JSON, or the form error that says why not."""
    try:
        return json.loads(text)
    except ValueError as exc:
        raise forms.ValidationError(f"not JSON: {exc}") from exc


def require(request: HttpRequest, perm: str) -> None:
    """Refuse (403) a user without ``queenadmin.<perm>`` (or ``perm`` itself
    when it names its app, ``axes.delete_accessattempt``): actions check
    again, since a POST can name an action the page did not offer."""
    if not request.user.has_perm(perm if "." in perm else f"queenadmin.{perm}"):
        raise PermissionDenied


def prefix_search(
    queryset: QuerySet[M], term: str, *, leading: str, key: str, values: list[str]
) -> tuple[QuerySet[M], bool]:
    """``get_search_results`` for keys by prefix: one range scan of the
    (``leading``, ``key``) index per value of ``leading`` in ``values``, never
    a scan of every key for a substring."""
    term = term.strip()
    if not term:
        return queryset, False
    match = Q(pk__in=[])
    for value in values:
        match |= Q(**{leading: value, f"{key}__startswith": term})
    return queryset.filter(match), False


def batches(queryset: QuerySet[M], *, size: int = BATCH) -> Iterator[list[M]]:
    """The rows of ``queryset`` by primary key, ``size`` at a time (keyset)."""
    after: Any = None
    while True:
        page = queryset.order_by("pk")
        if after is not None:
            page = page.filter(pk__gt=after)
        rows = list(page[:size])
        if not rows:
            return
        yield rows
        after = rows[-1].pk
        if len(rows) < size:
            return


class Tally:
    """How many rows a bulk action changed, and why the others did not."""

    def __init__(self) -> None:
        self.done = 0
        self.skipped: dict[str, int] = {}

    def skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1

    def report(self, model_admin: DomainAdmin, request: HttpRequest, verb: str) -> None:
        text = f"{verb} {self.done} row{'s' if self.done != 1 else ''}."
        if self.skipped:
            text += " Unchanged: " + ", ".join(f"{n} {why}" for why, n in sorted(self.skipped.items())) + "."
        level = messages.SUCCESS if self.done or not self.skipped else messages.WARNING
        model_admin.message_user(request, text, level)


def each(
    queryset: QuerySet[M], act: Callable[[M], str | None], tally: Tally | None = None, *, size: int = BATCH
) -> Tally:
    """Call ``act`` on every row in bounded batches; it returns None when it
    changed the row, else why not."""
    tally = tally or Tally()
    for rows in batches(queryset, size=size):
        for row in rows:
            why = act(row)
            if why is None:
                tally.done += 1
            else:
                tally.skip(why)
    return tally
