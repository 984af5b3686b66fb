"""Failed logins in the admin: axes' access attempts, and unlocking them.

Axes' own admin pages are off (``AXES_ENABLE_ADMIN = False``): this list
shows the attempts read-only, and its one action unlocks the accounts and
addresses of the selected rows through ``domain.logins.login_unlock``,
which writes the audit entry. It needs ``axes.delete_accessattempt``
(superusers have it).
"""

from __future__ import annotations

from typing import Any

from axes.models import AccessAttempt
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse

from queenadmin.admin.domain_admin import ReadOnlyAdmin
from queenadmin.domain import clock, logins

UNLOCK_PERM = "axes.delete_accessattempt"


@admin.register(AccessAttempt)
class AccessAttemptAdmin(ReadOnlyAdmin):
    list_display = ("attempt_time", "username", "ip_address", "failures_since_start", "locked", "path_info")
    search_fields = ("=username", "=ip_address")
    ordering = ("-attempt_time",)
    readonly_fields = ("attempt_time", "username", "ip_address", "user_agent", "path_info", "failures_since_start")
    fields = readonly_fields
    actions = ("unlock",)

    @admin.display(description="locked now")
    def locked(self, attempt: AccessAttempt) -> str:
        lockout = logins.lockout_of(username=attempt.username, address=attempt.ip_address, now=clock.now())
        return "yes" if lockout.until is not None else "no"

    def get_actions(self, request: HttpRequest) -> Any:
        found = super().get_actions(request)
        if not request.user.has_perm(UNLOCK_PERM):
            found.pop("unlock", None)
        return found

    @admin.action(description="Unlock the accounts and addresses of the selected attempts")
    def unlock(self, request: HttpRequest, queryset: QuerySet[AccessAttempt]) -> TemplateResponse | None:
        confirmed = self.confirmed(
            request,
            queryset,
            perm=UNLOCK_PERM,
            title="Unlock logins",
            warning="Their failed logins are forgotten: each may try again at once.",
        )
        if isinstance(confirmed, TemplateResponse):
            return confirmed
        who = confirmed.who
        pairs = sorted({(row.username or "", row.ip_address or "") for row in queryset})
        forgotten = 0
        for username, address in pairs:
            forgotten += logins.login_unlock(who=who, username=username or None, address=address or None).records
        self.message_user(
            request,
            f"Unlocked {len(pairs)} account and address pair{'s' if len(pairs) != 1 else ''} "
            f"({forgotten} failed-login record{'s' if forgotten != 1 else ''} forgotten).",
            messages.SUCCESS,
        )
        return None
