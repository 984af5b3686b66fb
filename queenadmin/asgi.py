"""The one ASGI application ``serve`` runs.

Plain HTTP goes to Django's WSGI handler in a thread pool
(``wsgi_bridge``, one thread hop per request; a2wsgi for large bodies):
framework-ceilings.md measured Django's ASGI handler at ~1.2 ms CPU per
request against ~0.08 ms under WSGI. Websockets (the dashboard) and
long-poll pops, which must wait without holding a thread, go through ASGI.
The lifespan starts the background loops (reaper, timers) in each worker.
"""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "queenadmin.settings")

import django

django.setup()

from a2wsgi import WSGIMiddleware  # noqa: E402
from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.contrib.staticfiles.handlers import StaticFilesHandler  # noqa: E402
from django.core.asgi import get_asgi_application  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402

from queenadmin import loops  # noqa: E402
from queenadmin.dashboard.routing import websocket_urlpatterns  # noqa: E402
from queenadmin.wsgi_bridge import BufferedWSGI  # noqa: E402

#: Path prefixes served by Django's ASGI handler (async views that wait).
ASYNC_PREFIXES: tuple[str, ...] = ("/api/v1/pop",)

#: 8, not 16: fewer threads queue less on the GIL (bench/README.md: one process
#: served ~1,200 single puts/s at concurrency 16 with 16 threads, ~1,450 with 8).
_threads = int(os.environ.get("QUEENADMIN_HTTP_THREADS", "8"))
_django_wsgi = StaticFilesHandler(get_wsgi_application())
_a2wsgi_app = WSGIMiddleware(_django_wsgi, workers=_threads)  # type: ignore[arg-type]
#: One thread pool (so one set of DB connections) for both paths; the
#: buffered one takes every request with a small declared body.
#: ``QUEENADMIN_HTTP_BRIDGE=a2wsgi`` sends everything through a2wsgi (for
#: comparing the two with bench/kv.py).
wsgi_app: Any = BufferedWSGI(_django_wsgi, _a2wsgi_app.executor, fallback=_a2wsgi_app)
if os.environ.get("QUEENADMIN_HTTP_BRIDGE") == "a2wsgi":
    wsgi_app = _a2wsgi_app
django_asgi_app = get_asgi_application()
websocket_app = AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    kind = scope["type"]
    if kind == "http":
        if scope["path"].startswith(ASYNC_PREFIXES):
            await django_asgi_app(scope, receive, send)
        else:
            await wsgi_app(scope, receive, send)
    elif kind == "websocket":
        await websocket_app(scope, receive, send)  # type: ignore[arg-type]
    elif kind == "lifespan":
        await loops.lifespan(scope, receive, send)
