"""The one ASGI application ``serve`` runs.

Plain HTTP goes to Django's WSGI handler in a thread pool
(``wsgi_bridge``, one thread hop per request; a2wsgi for large bodies):
framework-ceilings.md measured Django's ASGI handler at ~1.2 ms CPU per
request against ~0.08 ms under WSGI. Websockets (the dashboard) and
long-poll pops, which must wait without holding a thread, go through ASGI:
pops through ``PopHandler``, a trimmed Django ASGI handler.
The lifespan starts the background loops (reaper, timers) in each worker.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "queenadmin.settings")

import django

django.setup()

from a2wsgi import WSGIMiddleware  # noqa: E402
from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.staticfiles.handlers import StaticFilesHandler  # noqa: E402
from django.core.handlers.asgi import ASGIHandler  # noqa: E402
from django.core.handlers.exception import convert_exception_to_response  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402
from django.utils.module_loading import import_string  # noqa: E402

from queenadmin import loops  # noqa: E402
from queenadmin.dashboard.routing import websocket_urlpatterns  # noqa: E402
from queenadmin.middleware import ARRIVED_KEY, BodyLimitMiddleware, InlineHooks  # noqa: E402
from queenadmin.wsgi_bridge import BufferedWSGI  # noqa: E402

#: Path prefixes served by ``PopHandler`` (async views that wait).
ASYNC_PREFIXES: tuple[str, ...] = ("/api/v1/pop",)

#: The MIDDLEWARE entries whose hooks pops run on the event loop: they only
#: check the host and set headers (Content-Length, nosniff, X-Frame-Options),
#: so pop answers carry the same headers as the rest of the API.
POP_INLINE_MIDDLEWARE = frozenset(
    {
        "django.middleware.security.SecurityMiddleware",
        "django.middleware.common.CommonMiddleware",
        "django.middleware.clickjacking.XFrameOptionsMiddleware",
    }
)


class PopHandler(ASGIHandler):
    """Django's ASGI handler trimmed so that a waiting pop holds no thread.

    Django's own handler held one thread per waiting pop (200 waiting pops:
    215 threads against 15 idle) for two reasons:

    - It enters a ``ThreadSensitiveContext`` per request, which gives the
      request a sync thread of its own at its first thread-sensitive call
      (``request_started``'s receivers, before any middleware) and keeps
      that thread until the request ends. Without the context those calls
      run on asgiref's one shared sync thread.
    - Under ASGI, Django runs every ``MiddlewareMixin`` hook through
      ``sync_to_async``: with all of MIDDLEWARE, about a dozen thread hops
      per pop. Pops need no session, CSRF, user, messages or htmx (the API
      authenticates with a bearer token, in the view), so they skip those;
      the body limit runs async and the header middleware inline.

    Measured on the 2-core box, server CPU per ``wait=false`` pop on an
    empty queue (3,000 pops at concurrency 8, load from other jobs, so
    ranges): Django's handler with all of MIDDLEWARE 2,300-3,200 us; the
    same without the context 1,600-2,000 us; no middleware and no context
    850-1,150 us. ``request_started``/``request_finished`` still cost two hops
    (on the shared thread) per pop: dropping them measured 700-1,000 us but
    means copying Django's ``handle``.
    """

    def load_middleware(self, is_async: bool = False) -> None:
        # BaseHandler.load_middleware for the entries pops use, in
        # MIDDLEWARE's order.
        self._view_middleware: list[Any] = []
        self._template_response_middleware: list[Any] = []
        self._exception_middleware: list[Any] = []
        handler: Any = convert_exception_to_response(self._get_response_async)  # type: ignore[attr-defined]
        for path in reversed(settings.MIDDLEWARE):
            if path == "queenadmin.middleware.BodyLimitMiddleware":
                handler = convert_exception_to_response(BodyLimitMiddleware(handler))
            elif path in POP_INLINE_MIDDLEWARE:
                handler = convert_exception_to_response(InlineHooks(handler, import_string(path)))
            elif path == "queenadmin.api.recording.RecordAnswersMiddleware":
                # The contract test's recorder, installed only when
                # QUEENADMIN_RECORD_ANSWERS is set; async-capable.
                handler = convert_exception_to_response(import_string(path)(handler))
        self._middleware_chain = handler

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        # A pop's timeout runs from here, not from when its view starts: a
        # burst of pops queues on the auth check and the first claim.
        scope[ARRIVED_KEY] = asyncio.get_running_loop().time()
        # Django's __call__ without its ThreadSensitiveContext (see above).
        await self.handle(scope, receive, send)


#: 8, not 16: fewer threads queue less on the GIL (bench/README.md: one process
#: served ~1,200 single puts/s at concurrency 16 with 16 threads, ~1,450 with 8).
_threads = int(os.environ.get("QUEENADMIN_HTTP_THREADS", "8"))
_django_wsgi = StaticFilesHandler(get_wsgi_application())
_a2wsgi_app = WSGIMiddleware(_django_wsgi, workers=_threads)  # type: ignore[arg-type]
#: One thread pool (so one set of DB connections) for both paths; the
#: buffered one takes every request with a small declared body.
wsgi_app = BufferedWSGI(_django_wsgi, _a2wsgi_app.executor, fallback=_a2wsgi_app)
pop_app = PopHandler()
websocket_app = AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    kind = scope["type"]
    if kind == "http":
        if scope["path"].startswith(ASYNC_PREFIXES):
            await pop_app(scope, receive, send)
        else:
            await wsgi_app(scope, receive, send)
    elif kind == "websocket":
        await websocket_app(scope, receive, send)  # type: ignore[arg-type]
    elif kind == "lifespan":
        await loops.lifespan(scope, receive, send)
