from __future__ import annotations

from django.apps import AppConfig
from django.db.models.signals import pre_migrate


class QueenAdminConfig(AppConfig):
    name = "queenadmin"
    label = "queenadmin"
    verbose_name = "Queen admin"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # A logout closes the dashboard's sockets of that login; a lockout
        # writes its audit entry.
        from queenadmin.dashboard import lockout, sessions  # noqa: F401
        from queenadmin.upgrade import refuse_partly_migrated

        pre_migrate.connect(refuse_partly_migrated, sender=self, dispatch_uid="queenadmin.upgrade")
