from __future__ import annotations

from typing import Any

#: Websocket routes of the dashboard (filled as pages go live).
websocket_urlpatterns: list[Any] = []
