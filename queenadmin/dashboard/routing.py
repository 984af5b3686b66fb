"""Websocket routes of the dashboard: ``/ws/<page>/`` for every live page.

Only the live pages (``dashboard/pages.py``) have a route: any other path
is refused at the handshake with one log line (``server/app.py``), like
every unknown websocket path.

``settings.py`` names this list (``QUEENADMIN_WEBSOCKET_ROUTES``) and
``server/app.py`` wraps it in ``SiteOriginValidator(AuthMiddlewareStack(...))``:
only the site's own origins (``server/origins.py``) get a socket.
"""

from __future__ import annotations

import re
from typing import Any

from django.urls import re_path

from queenadmin.dashboard.consumers import DashboardConsumer
from queenadmin.dashboard.pages import PAGES

_PAGE_NAMES = "|".join(re.escape(name) for name in sorted(PAGES))

websocket_urlpatterns: list[Any] = [
    re_path(rf"^ws/(?P<page>{_PAGE_NAMES})/$", DashboardConsumer.as_asgi()),  # type: ignore[arg-type]
]
