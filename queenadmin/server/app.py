"""The one ASGI application ``serve`` runs (``queenadmin/asgi.py`` names it).

Plain HTTP goes to Django's WSGI handler in a thread pool
(``wsgi_bridge``, one thread hop per request, the body read first on the
event loop):
framework-ceilings.md measured Django's ASGI handler at ~1.2 ms CPU per
request against ~0.08 ms under WSGI. The API, ``/health`` and ``/metrics``
take the API's own chain (``handlers.ApiWSGIHandler``), the rest Django's
whole one. Websockets (the dashboard) and long-poll pops, which must wait
without holding a thread, go through ASGI: pops through
``handlers.PopHandler``, a trimmed Django ASGI handler. The lifespan starts
the background loops (reaper, timers) in each worker (``loops``).
Websocket routes are the ones ``QUEENADMIN_WEBSOCKET_ROUTES`` names (the
dashboard's): the server stands below the dashboard and imports none of it.

Importing this module needs Django set up (``queenadmin/asgi.py`` does it).
"""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import unquote_to_bytes

from channels.auth import AuthMiddlewareStack
from channels.routing import URLRouter
from django.core.wsgi import get_wsgi_application
from django.utils.module_loading import import_string

from queenadmin.conf import settings
from queenadmin.server import loops
from queenadmin.server.handlers import ASYNC_PREFIXES, ApiWSGIHandler, PopHandler, StaticFiles, is_api_path
from queenadmin.server.origins import SiteOriginValidator
from queenadmin.server.wsgi_bridge import BufferedWSGI, ThreadHop, http_threads

logger = logging.getLogger("queenadmin.asgi")

_django_wsgi = StaticFiles(get_wsgi_application())
#: One thread pool, so one set of database connections per process.
_wsgi_threads = ThreadHop(http_threads(), "wsgi")
wsgi_app = BufferedWSGI(_django_wsgi, _wsgi_threads)
#: The API, /health and /metrics: MIDDLEWARE without the browser's entries.
api_app = BufferedWSGI(ApiWSGIHandler(), _wsgi_threads)
pop_app = PopHandler()


def _websocket_routes() -> list[Any]:
    # Named by the settings (the dashboard's), as ROOT_URLCONF names the pages.
    path = settings.WEBSOCKET_ROUTES
    return list(import_string(path)) if path else []


#: A handshake from another origin (another port of the host included) is
#: refused before the session is read (``origins``).
websocket_app = SiteOriginValidator(AuthMiddlewareStack(URLRouter(_websocket_routes())))


def _path_is_utf8(scope: dict[str, Any]) -> bool:
    """Whether the percent-decoded path is UTF-8.

    The server decodes ``%ff`` to U+FFFD, so two different keys would
    write the same row; only a path holding U+FFFD needs the check.
    """
    if "\ufffd" not in scope["path"]:
        return True
    try:
        unquote_to_bytes(scope.get("raw_path") or scope["path"].encode()).decode()
    except UnicodeDecodeError:
        return False
    return True


async def _refuse_path(scope: dict[str, Any], send: Any) -> None:
    detail = "the path is not valid UTF-8"
    if scope["path"].startswith("/api/v1/kv/"):
        body: dict[str, Any] = {"error": "kv_bad_request", "reason": "kv_bad_key", "detail": detail}
    else:
        body = {"error": detail, "code": "bad_request"}
    await send({"type": "http.response.start", "status": 400, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": json.dumps(body, separators=(",", ":")).encode()})


async def _websocket(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The dashboard's websockets; a path no route takes is closed.

    Channels' router raises ``ValueError`` for it, which the server logged
    as a 29-line traceback per attempt; here it is one line.
    """
    sent = False

    async def tracked_send(message: dict[str, Any]) -> None:
        nonlocal sent
        sent = True
        await send(message)

    try:
        await websocket_app(scope, receive, tracked_send)
    except ValueError as exc:
        if sent or not str(exc).startswith("No route found"):
            raise
        logger.warning("websocket %s: no such route, closed", scope["path"][:200])
        await send({"type": "websocket.close", "code": 1000})


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    kind = scope["type"]
    if kind == "http":
        if not _path_is_utf8(scope):
            await _refuse_path(scope, send)
        elif scope["path"].startswith(ASYNC_PREFIXES):
            await pop_app(scope, receive, send)
        elif is_api_path(scope["path"]):
            await api_app(scope, receive, send)
        else:
            await wsgi_app(scope, receive, send)
    elif kind == "websocket":
        await _websocket(scope, receive, send)
    elif kind == "lifespan":
        await loops.lifespan(scope, receive, send)
