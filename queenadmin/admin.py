"""The Django admin: reads freely, writes only through ``domain/``."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from queenadmin.domain import tokens
from queenadmin.errors import QueenError
from queenadmin.models import ApiToken, AuditEntry, KVEntry


class ReadOnlyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(ApiToken)
class ApiTokenAdmin(ReadOnlyAdmin):
    list_display = ("name", "prefix", "created_at", "revoked_at")
    search_fields = ("name",)
    exclude = ("token_hash",)
    actions = ("revoke",)

    @admin.action(description="Revoke the selected tokens", permissions=["view"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        if not request.user.has_perm("queenadmin.change_apitoken"):
            self.message_user(request, "Revoking needs the change permission.", messages.ERROR)
            return
        for token in queryset.filter(revoked_at__isnull=True):
            try:
                tokens.token_revoke(name=token.name)
            except QueenError as exc:
                self.message_user(request, exc.detail, messages.ERROR)
            else:
                self.message_user(request, f"Revoked {token.name}.")


@admin.register(KVEntry)
class KVEntryAdmin(ReadOnlyAdmin):
    list_display = ("namespace", "key", "version", "expires_at", "updated_at")
    list_filter = ("namespace",)
    search_fields = ("namespace", "key")
    ordering = ("namespace", "key")


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    list_display = ("at", "actor", "action", "target")
    search_fields = ("actor", "action", "target")
