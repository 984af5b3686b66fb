"""``app.application`` with request metrics (``serve`` runs it unless
``QUEENADMIN_METRICS_REQUESTS`` is off).

Counting at the ASGI edge sees every HTTP request, whichever path serves it
(WSGI threads, the async pop handler, static files) and the status it
really got, at the cost of one wrapped ``send`` per request.
"""

from __future__ import annotations

import time
from typing import Any

from queenadmin.metrics import request_finished, request_started, route_class
from queenadmin.server.app import application as _application


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        await _application(scope, receive, send)
        return
    route = route_class(scope["path"])
    request_started(route)
    started = time.perf_counter()
    status = 500

    async def send_noting_status(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        await send(message)

    try:
        await _application(scope, receive, send_noting_status)
    finally:
        request_finished(route, status, time.perf_counter() - started)
