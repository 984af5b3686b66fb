"""API tokens in the admin: create (shown once), list, revoke; audit entries."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.safestring import SafeString

from queenadmin.admin.common import (
    Confirmed,
    DomainAdmin,
    ReadOnlyAdmin,
    reason_field,
)
from queenadmin.domain import tokens
from queenadmin.errors import QueenError
from queenadmin.models import ApiToken, AuditEntry, TokenScope
from queenadmin.templatetags.dashboard import with_times


class TokenCreateForm(forms.ModelForm):  # type: ignore[type-arg]
    reason = reason_field()

    class Meta:
        model = ApiToken
        fields = ["name", "scope"]
        help_texts = {
            "scope": "read: GETs and reads. write: also writes, pops and acks. "
            "admin: also deletes queues, consumer groups and messages."
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # A post without a scope gets the default one (write), as on the command line.
        self.fields["scope"].required = False

    def validate_unique(self) -> None:
        # The domain answers a taken name (revoked tokens included).
        return None


@admin.register(ApiToken)
class ApiTokenAdmin(DomainAdmin):
    list_display = ("name", "prefix", "scope", "created_at", "revoked_at", "state")
    list_filter = (("revoked_at", admin.EmptyFieldListFilter), "scope")
    search_fields = ("name", "=prefix")
    ordering = ("name",)
    readonly_fields = ("name", "prefix", "scope", "created_at", "revoked_at")
    actions = ("revoke",)

    @admin.display(description="state")
    def state(self, token: ApiToken) -> str:
        return "revoked" if token.revoked_at else "active"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("queenadmin.add_apitoken"))

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Changing a token means revoking it (the action); the form is a view.
        return obj is None and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        if obj is None:
            kwargs["form"] = TokenCreateForm
        return super().get_form(request, obj, change, **kwargs)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ("name", "scope", "reason") if obj is None else self.readonly_fields

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return () if obj is None else self.readonly_fields

    def save_model(self, request: HttpRequest, obj: ApiToken, form: Any, change: bool) -> None:
        data = form.cleaned_data
        secret = self.in_view(
            request,
            lambda: tokens.token_create_in_txn(
                name=data["name"],
                scope=data["scope"] or TokenScope.WRITE,
                who=self.who(request, data["reason"]),
            ),
        )
        if secret is None:
            return
        created = ApiToken.objects.get(name=data["name"].strip())
        obj.pk, obj.name, obj.prefix, obj.scope = created.pk, created.name, created.prefix, created.scope
        obj.created_at = created.created_at
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
