from __future__ import annotations

from django.apps import AppConfig


class QueenAdminConfig(AppConfig):
    name = "queenadmin"
    label = "queenadmin"
    verbose_name = "Queen admin"
    default_auto_field = "django.db.models.BigAutoField"
