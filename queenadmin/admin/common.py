"""What every admin page shares: capped counts, the reason page, batches.

The admin reads models freely and writes only through ``domain/``: a save,
a delete or an action calls a domain function that bumps versions, tells
the dashboards and writes the audit entry (``via="admin"``) with the user
and the reason the operator typed on the form or the action's page.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Model, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.decorators import method_decorator
from django.utils.functional import cached_property
from django.views.decorators.csrf import csrf_protect

#: Where audit entries say an admin action came from.
VIA = "admin"
#: Rows a changelist counts at most; past it the page says "10,000+".
COUNT_CAP = 10_000
#: Rows one batch of a bulk action reads (each row is its own transaction,
#: or one domain call takes the batch).
BATCH = 500

M = TypeVar("M", bound=Model)


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
    """A model admin whose lists never count everything."""

    paginator = CappedPaginator
    show_full_result_count = False
    list_per_page = 50

    # Django wraps a POST to these views in one transaction; the domain
    # functions they call are durable (each is its own transaction, with its
    # audit entry), so they run without that outer block.
    @method_decorator(csrf_protect)
    def changeform_view(
        self, request: HttpRequest, object_id: str | None = None, form_url: str = "", extra_context: Any = None
    ) -> HttpResponse:
        return self._changeform_view(request, object_id, form_url, extra_context)  # type: ignore[attr-defined,no-any-return]

    @method_decorator(csrf_protect)
    def delete_view(self, request: HttpRequest, object_id: str, extra_context: Any = None) -> HttpResponse:
        return self._delete_view(request, object_id, extra_context)  # type: ignore[attr-defined,no-any-return]

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        # Django answers an action the user may not run with "no action
        # selected"; a refusal should look like one.
        name = request.POST.get("action") if request.method == "POST" else None
        if name and name in (self.actions or ()) and name not in self.get_actions(request):
            raise PermissionDenied
        return super().changelist_view(request, extra_context)

    def response_delete(self, request: HttpRequest, obj_display: str, obj_id: Any) -> HttpResponse:
        # ``delete_model`` leaves why the domain did not delete (a race, a
        # refusal) on the request; then say that, not "deleted successfully".
        refused = getattr(request, "_admin_refused", None)
        if refused:
            self.message_user(request, refused, messages.ERROR)
            return HttpResponseRedirect(reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_changelist"))
        return super().response_delete(request, obj_display, obj_id)

    def actor(self, request: HttpRequest) -> str:
        return str(request.user.get_username())

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


def require(request: HttpRequest, perm: str) -> None:
    """Refuse (403) a user without ``queenadmin.<perm>``: actions check
    again, since a POST can name an action the page did not offer."""
    if not request.user.has_perm(f"queenadmin.{perm}"):
        raise PermissionDenied


def confirm_page(
    model_admin: DomainAdmin,
    request: HttpRequest,
    queryset: QuerySet[Any],
    *,
    form_class: type[ReasonForm],
    title: str,
    warning: str = "",
    form_kwargs: dict[str, Any] | None = None,
) -> ReasonForm | TemplateResponse:
    """The action's form once it is confirmed and valid, else its page.

    The page posts back to the changelist with the action and the selection
    (``select_across`` included), as Django's own delete confirmation does.
    """
    form: ReasonForm
    if request.POST.get("confirmed"):
        form = form_class(request.POST, **(form_kwargs or {}))
        if form.is_valid():
            return form
    else:
        form = form_class(**(form_kwargs or {}))
    opts = model_admin.model._meta
    selected = request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)
    context = {
        **model_admin.admin_site.each_context(request),
        "title": title,
        "warning": warning,
        "opts": opts,
        "form": form,
        "action": request.POST.get("action", ""),
        "selected": selected,
        "select_across": request.POST.get("select_across", "0"),
        "count": "every matching" if request.POST.get("select_across") == "1" else len(selected),
        "preview": list(queryset[:20]),
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
    }
    return TemplateResponse(request, "admin/queenadmin/action_confirm.html", context)


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
