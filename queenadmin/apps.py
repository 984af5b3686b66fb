from __future__ import annotations

from django.apps import AppConfig
from django.contrib.admin.apps import AdminConfig
from django.db.models.signals import pre_migrate


class QueenAdminConfig(AppConfig):
    name = "queenadmin"
    label = "queenadmin"
    verbose_name = "queenadmin"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # A logout closes the dashboard's sockets of that login; a lockout
        # writes its audit entry; an account that goes takes its tokens along.
        from queenadmin import accounts  # noqa: F401
        from queenadmin.dashboard import lockout, sessions  # noqa: F401
        from queenadmin.upgrade import refuse_partly_migrated

        pre_migrate.connect(refuse_partly_migrated, sender=self, dispatch_uid="queenadmin.upgrade")


class AdminSiteConfig(AdminConfig):
    """django.contrib.admin whose ``admin.site`` asks staff who need one for
    their second factor at login (``queenadmin/admin_site.py``)."""

    default_site = "queenadmin.admin_site.QueenAdminSite"
