"""The one ASGI application ``serve`` runs.

Plain HTTP goes to Django's WSGI handler in a thread pool
(``wsgi_bridge``, one thread hop per request, the body read first on the
event loop):
framework-ceilings.md measured Django's ASGI handler at ~1.2 ms CPU per
request against ~0.08 ms under WSGI. Websockets (the dashboard) and
long-poll pops, which must wait without holding a thread, go through ASGI:
pops through ``PopHandler``, a trimmed Django ASGI handler.
The lifespan starts the background loops (reaper, timers) in each worker.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from typing import Any
from urllib.parse import unquote_to_bytes

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "queenadmin.settings")

import django

django.setup()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.staticfiles.handlers import StaticFilesHandler  # noqa: E402
from django.core.exceptions import SuspiciousOperation  # noqa: E402
from django.core.handlers.asgi import ASGIHandler  # noqa: E402
from django.core.handlers.exception import convert_exception_to_response, response_for_exception  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402
from django.http import HttpRequest  # noqa: E402
from django.http.response import HttpResponseBase  # noqa: E402
from django.utils.module_loading import import_string  # noqa: E402

from queenadmin import loops  # noqa: E402
from queenadmin.apihandler import ApiWSGIHandler, is_api_path  # noqa: E402
from queenadmin.dashboard.routing import websocket_urlpatterns  # noqa: E402
from queenadmin.middleware import ARRIVED_KEY, ApiErrorMiddleware, BodyLimitMiddleware, InlineHooks  # noqa: E402
from queenadmin.wsgi_bridge import BufferedWSGI, ThreadHop, http_threads  # noqa: E402

logger = logging.getLogger("queenadmin.asgi")

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
            elif path == "queenadmin.middleware.ApiErrorMiddleware":
                errors = ApiErrorMiddleware(handler)
                # A lost database connection answers 503 here too.
                self._exception_middleware.append(errors.process_exception)
                handler = convert_exception_to_response(errors)
            elif path in POP_INLINE_MIDDLEWARE:
                handler = convert_exception_to_response(InlineHooks(handler, import_string(path)))
            elif path == "queenadmin.api.recording.RecordAnswersMiddleware":
                # The contract test's recorder, installed only when
                # QUEENADMIN_RECORD_ANSWERS is set; async-capable.
                handler = convert_exception_to_response(import_string(path)(handler))
        self._middleware_chain = handler

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        # A pop's timeout runs from its arrival, not from when its view
        # starts: a burst of pops queues on the auth check and the first
        # claim. ``serve``'s protocol notes it when the request's first
        # bytes are parsed; other servers get this moment.
        scope.setdefault(ARRIVED_KEY, asyncio.get_running_loop().time())
        # Django's __call__ without its ThreadSensitiveContext (see above).
        await self.handle(scope, receive, send)


class StaticFiles(StaticFilesHandler):
    """Django's static-file handler, with a path that climbs out answered 400.

    Its ``get_response`` turns only ``Http404`` into an answer: an encoded
    ``..`` (``/static/%2e%2e/...``) raised ``SuspiciousFileOperation`` past
    it, a 500 with a traceback.
    """

    def get_response(self, request: HttpRequest) -> HttpResponseBase:
        try:
            return super().get_response(request)
        except SuspiciousOperation as exc:
            return response_for_exception(request, exc)


_django_wsgi = StaticFiles(get_wsgi_application())
#: One thread pool, so one set of database connections per process.
_wsgi_threads = ThreadHop(http_threads(), "wsgi")
wsgi_app = BufferedWSGI(_django_wsgi, _wsgi_threads)
#: The API, /health and /metrics: MIDDLEWARE without the browser's entries.
api_app = BufferedWSGI(ApiWSGIHandler(), _wsgi_threads)
pop_app = PopHandler()
websocket_app = AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))


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
        await websocket_app(scope, receive, tracked_send)  # type: ignore[arg-type]
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
