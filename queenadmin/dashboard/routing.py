"""Websocket routes of the dashboard: ``/ws/<page>/`` for every live page.

``asgi.py`` wraps these in ``AllowedHostsOriginValidator(AuthMiddlewareStack(...))``.
Importing the views registers every page with ``live.register``.
"""

from __future__ import annotations

from typing import Any

from django.urls import re_path

from queenadmin.dashboard import views  # noqa: F401  (registers the live pages)
from queenadmin.dashboard.consumers import DashboardConsumer

websocket_urlpatterns: list[Any] = [
    re_path(r"^ws/(?P<page>[a-z0-9-]+)/$", DashboardConsumer.as_asgi()),  # type: ignore[arg-type]
]
