"""Websocket routes of the dashboard: ``/ws/<page>/`` for every live page.

Only registered pages have a route: any other path is refused at the
handshake with one log line (``asgi``), like every unknown websocket path.

``asgi.py`` wraps these in ``AllowedHostsOriginValidator(AuthMiddlewareStack(...))``.
Importing the views registers every page with ``live.register``.
"""

from __future__ import annotations

import re
from typing import Any

from django.urls import re_path

from queenadmin.dashboard import live, views  # noqa: F401  (views registers the live pages)
from queenadmin.dashboard.consumers import DashboardConsumer

_PAGE_NAMES = "|".join(re.escape(name) for name in sorted(live.PAGES))

websocket_urlpatterns: list[Any] = [
    re_path(rf"^ws/(?P<page>{_PAGE_NAMES})/$", DashboardConsumer.as_asgi()),  # type: ignore[arg-type]
]
