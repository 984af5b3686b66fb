"""API tokens in the admin: create (shown once), list, revoke, edit grants; audit entries.

Making a token and changing its grants go through the domain as the
signed-in account (``tokens.maker_of``): an operator makes and widens
tokens up to ``write`` with grants that name what they reach, a superuser
anything. The forms ask the domain first, so a refusal is the form's error
(and an audit entry); the save asks again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.safestring import SafeString

from queenadmin.admin.domain_admin import (
    Confirmed,
    DomainAdmin,
    DomainForm,
    ReadOnlyAdmin,
    reason_field,
)
from queenadmin.domain import tokens
from queenadmin.domain.audit import Who
from queenadmin.errors import QueenError
from queenadmin.models import ApiToken, AuditEntry, TokenScope
from queenadmin.templatetags.dashboard import with_times

GRANTS_HELP = (
    "One grant a line, KIND:PATTERN=SCOPE: KIND is kv, queue, lock, timer or * (all four); "
    "PATTERN an exact name or a prefix ending in * (orders.* covers orders.eu; * covers every name); "
    "SCOPE read, write or admin, at most the token's scope (write for a write-only token). *=read is short for *:*=read. "
    "The highest covering grant counts; a resource no grant covers is refused (403). "
    "Empty: the whole store."
)


def grants_field() -> forms.CharField:
    return forms.CharField(widget=forms.Textarea(attrs={"rows": 4, "cols": 60}), required=False, help_text=GRANTS_HELP)


def _grant_lines(text: str, scope: str) -> list[str]:
    """The form's grants, one a line, or the ``ValidationError`` the domain's parser gives."""
    lines = text.splitlines()
    try:
        tokens.grants_parse(lines, ceiling=tokens.rung_of(scope))
    except QueenError as exc:
        raise forms.ValidationError(exc.detail) from None
    return lines


class MadeBy:
    """What a token form asks the domain with: who acts (set per request by
    ``ApiTokenAdmin.get_form`` on the form class it makes for that request)."""

    #: The maker, and the audit's ``Who`` for a reason.
    acting_as: ClassVar[tuple[tokens.Maker, Callable[[str], Who]] | None] = None

    def acting(self, data: dict[str, Any]) -> tuple[tokens.Maker, Who]:
        assert self.acting_as is not None, "ApiTokenAdmin.get_form sets who acts"
        maker, who_for = self.acting_as
        return maker, who_for(data.get("reason") or "")


class TokenCreateForm(MadeBy, forms.ModelForm):  # type: ignore[type-arg]
    grants = grants_field()
    reason = reason_field()

    class Meta:
        model = ApiToken
        fields = ["name", "scope", "grants"]
        help_texts = {
            "scope": "read: GETs and reads. write-only: Queen's level, pushes, timers and ephemeral "
            "pushes and nothing that reads (no pop, no read of what it pushed). write: also writes, "
            "pops and acks. admin: also deletes queues, consumer groups and messages (a superuser's "
            "to give, as are tokens without grants and grants on *)."
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # A post without a scope gets the default one (write), as on the command line.
        self.fields["scope"].required = False

    def validate_unique(self) -> None:
        # The domain answers a taken name (revoked tokens included).
        return None

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if "grants" in data:
            data["grants"] = _grant_lines(data["grants"], data.get("scope") or TokenScope.WRITE)
        if not self.errors:
            by, who = self.acting(data)
            # Recorded when refused: the admin's view transaction goes on.
            try:
                refused = tokens.token_create_refusal_in_txn(
                    name=data["name"],
                    by=by,
                    scope=data.get("scope") or TokenScope.WRITE,
                    grants=data["grants"],
                    who=who,
                )
            except QueenError as exc:
                raise forms.ValidationError(exc.detail) from None
            if refused is not None:
                raise forms.ValidationError(f"{refused[:1].upper()}{refused[1:]}.", code="beyond_reach")
        return data


class TokenGrantsForm(MadeBy, DomainForm):
    """An active token's grants; the domain writes them (``token_grants_set_in_txn``)."""

    grants = grants_field()

    def show(self, row: Any) -> None:
        self.fields["grants"].initial = row.grants

    def clean_grants(self) -> list[str]:
        return _grant_lines(self.cleaned_data["grants"], self.instance.scope)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not self.errors:
            by, who = self.acting(data)
            try:
                refused = tokens.token_grants_refusal_in_txn(
                    name=self.instance.name, grants=data["grants"], by=by, who=who
                )
            except QueenError as exc:
                raise forms.ValidationError(exc.detail) from None
            if refused is not None:
                raise forms.ValidationError(f"{refused[:1].upper()}{refused[1:]}.", code="beyond_reach")
        return data


@admin.register(ApiToken)
class ApiTokenAdmin(DomainAdmin):
    list_display = ("name", "prefix", "scope", "grants_shown", "made_by", "created_at", "revoked_at", "state")
    list_filter = (("revoked_at", admin.EmptyFieldListFilter), "scope")
    list_select_related = ("created_by",)
    search_fields = ("name", "=prefix")
    ordering = ("name",)
    readonly_fields = ("name", "prefix", "scope", "made_by", "created_at", "revoked_at")
    actions = ("revoke",)

    @admin.display(description="state")
    def state(self, token: ApiToken) -> str:
        return "revoked" if token.revoked_at else "active"

    @admin.display(description="grants")
    def grants_shown(self, token: ApiToken) -> str:
        return ", ".join(token.grants.splitlines()) or "whole store"

    @admin.display(description="made by")
    def made_by(self, token: ApiToken) -> str:
        return tokens.made_by_text(token) or "no account"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("queenadmin.add_apitoken"))

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Revoking is the list's action; an active token's page edits its
        # grants, and a revoked one's is a view.
        return (obj is None or obj.revoked_at is None) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        kwargs["form"] = TokenCreateForm if obj is None else TokenGrantsForm
        form: Any = super().get_form(request, obj, change, **kwargs)
        # A class made for this request (modelform_factory): who acts is its own.
        form.acting_as = (tokens.maker_of(request.user), lambda reason: self.who(request, reason))
        return form

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return ("name", "scope", "grants", "reason")
        if obj.revoked_at is None:
            return (*self.readonly_fields, "grants", "reason")
        return (*self.readonly_fields, "grants_shown")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return ()
        return self.readonly_fields if obj.revoked_at is None else (*self.readonly_fields, "grants_shown")

    def save_model(self, request: HttpRequest, obj: ApiToken, form: Any, change: bool) -> None:
        data = form.cleaned_data
        if change:
            self.in_view(
                request,
                lambda: tokens.token_grants_set_in_txn(
                    name=obj.name,
                    grants=data["grants"],
                    by=tokens.maker_of(request.user),
                    who=self.who(request, data["reason"]),
                ),
            )
            return
        secret = self.in_view(
            request,
            lambda: tokens.token_create_in_txn(
                name=data["name"],
                by=tokens.maker_of(request.user),
                scope=data["scope"] or TokenScope.WRITE,
                grants=data["grants"],
                who=self.who(request, data["reason"]),
            ),
        )
        if secret is None:
            return
        created = ApiToken.objects.get(name=data["name"].strip())
        obj.pk, obj.name, obj.prefix, obj.scope = created.pk, created.name, created.prefix, created.scope
        obj.created_at, obj.grants = created.created_at, created.grants
        obj.created_by, obj.created_by_name = created.created_by, created.created_by_name
        self.view_write(request).secret = secret

    def log_addition(self, request: HttpRequest, obj: Any, message: Any) -> Any:
        if obj.pk is None:
            return None
        return super().log_addition(request, obj, message)

    def response_add(self, request: HttpRequest, obj: ApiToken, post_url_continue: str | None = None) -> HttpResponse:
        write = self.view_write(request)
        if write.refused:
            self.message_user(request, f"Not created: {write.refused}", messages.ERROR)
            return TemplateResponse(request, "admin/queenadmin/token_created.html", self._context(request, obj))
        # Rendered here, never stored: the token is in this answer only.
        context = {**self._context(request, obj), "secret": write.secret}
        response = TemplateResponse(request, "admin/queenadmin/token_created.html", context)
        response["Cache-Control"] = "no-store"
        return response

    def _context(self, request: HttpRequest, obj: ApiToken) -> dict[str, Any]:
        return {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "API token",
            "token": obj,
        }

    @admin.action(description="Revoke the selected tokens", permissions=["change"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> TemplateResponse | None:
        def revoke(token: ApiToken, page: Confirmed) -> str | None:
            if token.revoked_at is not None:
                return "revoked already"
            try:
                tokens.token_revoke(name=token.name, who=page.who)
            except QueenError:
                return "revoked already"
            return None

        return self.each_confirmed(
            request,
            queryset,
            revoke,
            done="Revoked",
            perm="change_apitoken",
            title="Revoke tokens",
            warning="Clients using these tokens are refused from now on.",
        )


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    list_display = ("at", "actor", "via", "action", "target", "reason")
    list_filter = ("kind", "via", "action")
    search_fields = ("actor", "target", "reason")
    fields = ("at", "actor", "via", "action", "kind", "target", "before_shown", "after_shown", "reason")
    readonly_fields = fields
    ordering = ("-at", "-id")

    # The times inside before and after (a key's expiry, a timer's due
    # time) as times with their zone, not raw ISO strings.
    @admin.display(description="before")
    def before_shown(self, entry: AuditEntry) -> SafeString:
        return with_times(entry.before)

    @admin.display(description="after")
    def after_shown(self, entry: AuditEntry) -> SafeString:
        return with_times(entry.after)

    def get_actions(self, request: HttpRequest) -> Any:
        return {}
