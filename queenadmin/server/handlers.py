"""The Django handlers ``server.app`` serves with, and the one chain builder.

- ``ApiWSGIHandler``: ``/api/``, ``/health`` and ``/metrics``, with
  MIDDLEWARE without the browser's entries. These paths are called by
  services with a bearer token (or nothing); none of them reads a session,
  a CSRF token, the signed in user, flash messages or htmx headers, and
  ninja's views are CSRF-exempt. Those five middleware still cost every API
  call their work (a session lookup object, a lazy user, the CSRF cookie
  check, about 40 objects left in reference cycles) and about a fifth of a
  KV put's server CPU (issue 15). Everything else is kept in MIDDLEWARE's
  order: the body limit, the API's error envelope, the security, common
  and X-Frame-Options headers, and any entry added later (the tests'
  answer recorder, a deployment's own).
- ``PopHandler``: long-poll pops, on the event loop, holding no thread.
- ``StaticFiles``: Django's static-file handler (the dashboard and the
  admin keep Django's whole chain behind it).

``load_chain`` is ``BaseHandler.load_middleware`` over a list of our
choosing; both the API's and the pops' handlers use it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.staticfiles.handlers import StaticFilesHandler
from django.core.cache import caches, close_caches
from django.core.cache.backends.base import BaseCache
from django.core.exceptions import ImproperlyConfigured, MiddlewareNotUsed, RequestAborted, SuspiciousOperation
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.core.handlers.base import BaseHandler, reset_urlconf
from django.core.handlers.exception import convert_exception_to_response, response_for_exception
from django.core.handlers.wsgi import WSGIHandler, get_script_name
from django.core.signals import request_finished, request_started
from django.db import close_old_connections, connections, reset_queries
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.urls import ResolverMatch, get_resolver, set_script_prefix, set_urlconf
from django.utils.module_loading import import_string

from queenadmin.plumbing import ARRIVED_KEY, compat
from queenadmin.server.middleware import BodyLimitMiddleware, InlineHooks

#: A middleware factory: the next step of the chain in, the step out.
Factory = Callable[[compat.GetResponse], Any]


def load_chain(handler: BaseHandler, entries: Iterable[tuple[str, Factory]], *, is_async: bool) -> None:
    """Make ``entries`` (name and factory, outermost first) ``handler``'s chain.

    ``BaseHandler.load_middleware`` over another list than MIDDLEWARE, and
    without its adapting between modes: each factory must make a
    middleware of the chain's mode. A factory raising ``MiddlewareNotUsed``
    is left out; the hooks of the rest (``process_view``,
    ``process_template_response``, ``process_exception``) are called as
    Django calls them.
    """
    view: list[Any] = []
    template_response: list[Any] = []
    exception: list[Any] = []
    chain: Any = convert_exception_to_response(compat.middleware_base(handler, is_async=is_async))
    for name, factory in reversed(list(entries)):
        try:
            instance = factory(chain)
        except MiddlewareNotUsed:
            continue
        if instance is None:
            raise ImproperlyConfigured(f"Middleware factory {name} returned None.")
        if hasattr(instance, "process_view"):
            view.insert(0, instance.process_view)
        if hasattr(instance, "process_template_response"):
            template_response.append(instance.process_template_response)
        if hasattr(instance, "process_exception"):
            exception.append(instance.process_exception)
        chain = convert_exception_to_response(instance)
    compat.install_middleware(handler, chain, view=view, template_response=template_response, exception=exception)


#: Paths served by ``ApiWSGIHandler``: these, and every path under ``/api/``
#: and ``/streams/`` (Queen's Streams SDK routes).
API_PATHS = frozenset({"/api", "/streams", "/health", "/metrics"})
API_PREFIXES = ("/api/", "/streams/")


def is_api_path(path: str) -> bool:
    return path.startswith(API_PREFIXES) or path in API_PATHS


#: MIDDLEWARE entries that only browser pages use.
BROWSER_ONLY_MIDDLEWARE = frozenset(
    {
        "django.contrib.sessions.middleware.SessionMiddleware",
        "django.middleware.csrf.CsrfViewMiddleware",
        "django.contrib.auth.middleware.AuthenticationMiddleware",
        "django.contrib.messages.middleware.MessageMiddleware",
        "django_htmx.middleware.HtmxMiddleware",
        # Logins: cookies, second factors and lockouts (the API has none).
        "queenadmin.server.secure_cookies.SecureCookiesMiddleware",
        "django_otp.middleware.OTPMiddleware",
        "queenadmin.dashboard.twofactor.SecondFactorMiddleware",
        "axes.middleware.AxesMiddleware",
        # JSON and text answers need no Content-Security-Policy (server/csp.py).
        "queenadmin.server.csp.CSPMiddleware",
        # The API refuses bad text in its own envelope.
        "queenadmin.dashboard.middleware.RefuseUnstorable",
    }
)


def api_middleware() -> list[str]:
    """MIDDLEWARE without the browser-only entries, in its order."""
    return [path for path in settings.MIDDLEWARE if path not in BROWSER_ONLY_MIDDLEWARE]


def _sync_middleware(path: str) -> Factory:
    middleware = import_string(path)
    if not getattr(middleware, "sync_capable", True):
        raise ImproperlyConfigured(f"Middleware {path} must be sync-capable to serve the API.")
    return middleware  # type: ignore[no-any-return]


#: Django's own receivers of the request signals (``django.db``,
#: ``django.core.cache``, ``django.core.handlers.base``).
DJANGO_STARTED_RECEIVERS = frozenset({reset_queries, close_old_connections})
DJANGO_FINISHED_RECEIVERS = frozenset({close_old_connections, close_caches, reset_urlconf})


def request_begins() -> None:
    """``request_started``'s Django receivers in one pass over the connections."""
    for conn in connections.all(initialized_only=True):
        conn.queries_log.clear()
        conn.close_if_unusable_or_obsolete()


#: ``settings.CACHES`` as last seen, and whether a backend of it has a
#: ``close`` that does something (``LocMemCache``'s, the default, does not).
_caches_seen: tuple[Any, bool] = (None, True)


def _caches_close() -> bool:
    global _caches_seen
    configured = settings.CACHES
    seen, close = _caches_seen
    if seen is not configured:
        close = any(import_string(cache["BACKEND"]).close is not BaseCache.close for cache in configured.values())
        _caches_seen = (configured, close)
    return close


def request_ends() -> None:
    """``request_finished``'s Django receivers in one pass over the
    connections; caches are closed unless no backend's ``close`` does anything."""
    for conn in connections.all(initialized_only=True):
        conn.close_if_unusable_or_obsolete()
    if _caches_close():
        caches.close_all()
    set_urlconf(None)


class ApiWSGIHandler(WSGIHandler):
    """Django's WSGI handler with ``api_middleware()`` as its chain.

    A sync chain (the WSGI threads run it); URL resolving and exception
    handling are Django's own, and so are the request signals' receivers.
    While those are the only ones connected (always, when serving), their
    work is done directly (``request_begins``, ``request_ends``): sending the
    two signals was about half of Django's CPU for a ``/health`` answer
    (bench/README.md, "Where the time goes"). Any other receiver (one a
    deployment connects, or Django's test client disconnecting its own) and
    the signals are sent as Django sends them.
    """

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        # Django's WSGIHandler.__call__, with the signals' work done in place.
        set_script_prefix(get_script_name(environ))
        if compat.only_receivers(request_started, DJANGO_STARTED_RECEIVERS):
            request_begins()
        else:
            request_started.send(sender=self.__class__, environ=environ)
        request = self.request_class(environ)
        response = self.get_response(request)
        response._handler_class = self.__class__  # type: ignore[attr-defined]
        # An instance attribute: the server's close() of the answer (and a file
        # wrapper's, below) runs it.
        response.close = partial(compat.close_response, response, self._finished)  # type: ignore[method-assign]
        status = f"{response.status_code} {response.reason_phrase}"
        headers = [*response.items(), *(("Set-Cookie", c.output(header="")) for c in response.cookies.values())]
        start_response(status, headers)
        if getattr(response, "file_to_stream", None) is not None and environ.get("wsgi.file_wrapper"):
            response.file_to_stream.close = response.close  # type: ignore[attr-defined]
            return environ["wsgi.file_wrapper"](response.file_to_stream, response.block_size)  # type: ignore[attr-defined]
        return response

    def _finished(self) -> None:
        if compat.only_receivers(request_finished, DJANGO_FINISHED_RECEIVERS):
            request_ends()
        else:
            request_finished.send(sender=self.__class__)

    def load_middleware(self, is_async: bool = False) -> None:
        load_chain(self, [(path, _sync_middleware(path)) for path in api_middleware()], is_async=False)
        self._literal_routes: dict[str, ResolverMatch] = {}
        #: The resolver the kept matches came from.
        self._routes_resolver: Any = None

    def resolve_request(self, request: HttpRequest) -> Any:
        """Django's resolving, remembered for routes that are literal paths.

        Resolving walks the URL patterns with a regex each and builds a
        ``ResolverMatch`` per level, ~7% of a KV put's Django CPU, for an
        answer that never changes for ``/api/v1/kv`` or ``/api/v1/push``. A
        match is kept only when its route is the path itself with no
        arguments (so the map is at most one entry per such route, never
        one per path a client makes up), and only while the resolver it came
        from is Django's: ``override_settings(ROOT_URLCONF=...)`` or
        ``clear_url_caches()`` give a new resolver and the map is dropped.
        The view gets a new empty kwargs dict each time, so a view
        middleware that adds to it cannot leak into the next request.
        """
        if hasattr(request, "urlconf"):
            return super().resolve_request(request)
        resolver = get_resolver()
        if resolver is not self._routes_resolver:
            self._literal_routes, self._routes_resolver = {}, resolver
        path = request.path_info
        match = self._literal_routes.get(path)
        if match is None:
            match = resolver.resolve(path)
            if match.args or match.kwargs or match.route != path[1:]:
                request.resolver_match = match
                return match
            self._literal_routes[path] = match
        request.resolver_match = match
        return match.func, (), {}


#: Path prefixes served by ``PopHandler`` (async views that wait). Every
#: async view must be here: under the WSGI bridge it would run on an event
#: loop of its own per request, and binding the long-poll hub to that loop
#: resets the hub of every waiting pop.
ASYNC_PREFIXES: tuple[str, ...] = ("/api/v1/pop", "/api/v1/ephemeral/pop")

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

#: MIDDLEWARE entries pops run as they are: ours, all async-capable. The
#: envelope's ``process_exception`` answers a lost database connection 503
#: here too; the answer recorder is installed only when the tests set
#: ``QUEENADMIN_RECORD_ANSWERS``.
POP_ASYNC_MIDDLEWARE = frozenset(
    {
        f"{BodyLimitMiddleware.__module__}.{BodyLimitMiddleware.__qualname__}",
        "queenadmin.api.envelope.ApiErrorMiddleware",
        "queenadmin.api.recording.RecordAnswersMiddleware",
    }
)


def _pop_middleware(path: str) -> Factory:
    if path in POP_INLINE_MIDDLEWARE:
        middleware = import_string(path)
        return lambda get_response: InlineHooks(get_response, middleware)
    return import_string(path)  # type: ignore[no-any-return]


#: Pop paths whose URL match ``PopHandler`` keeps (one per queue and
#: partition popped; a few hundred bytes each).
POP_ROUTES_KEPT = 1024


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
    850-1,150 us. ``request_started``/``request_finished`` cost two more hops
    (on the shared thread) per pop; ``handle_direct``, a copy of Django's
    ``handle``, does their work in place.
    """

    def load_middleware(self, is_async: bool = False) -> None:
        # The entries pops use, in MIDDLEWARE's order.
        kept = [path for path in settings.MIDDLEWARE if path in POP_INLINE_MIDDLEWARE | POP_ASYNC_MIDDLEWARE]
        load_chain(self, [(path, _pop_middleware(path)) for path in kept], is_async=True)
        self._kept_routes: dict[str, ResolverMatch] = {}
        #: The resolver the kept matches came from.
        self._routes_resolver: Any = None

    def resolve_request(self, request: HttpRequest) -> Any:
        """Django's resolving, remembered per path for the last few paths.

        A pop's path names its queue (and partition), so it has arguments
        and ``ApiWSGIHandler``'s literal-route map does not apply; resolving
        it again each time was ~2.5% of the server's CPU of a pop and its
        ack. At most ``POP_ROUTES_KEPT`` paths are kept (the map starts
        over when full), only while the resolver is Django's (as
        ``ApiWSGIHandler``), and each view gets its own copy of the
        keyword arguments.
        """
        if hasattr(request, "urlconf"):
            return super().resolve_request(request)
        resolver = get_resolver()
        if resolver is not self._routes_resolver:
            self._kept_routes, self._routes_resolver = {}, resolver
        path = request.path_info
        match = self._kept_routes.get(path)
        if match is None:
            match = resolver.resolve(path)
            if len(self._kept_routes) >= POP_ROUTES_KEPT:
                self._kept_routes.clear()
            self._kept_routes[path] = match
        request.resolver_match = match
        return match.func, match.args, dict(match.kwargs)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        # A pop's timeout runs from its arrival, not from when its view
        # starts: a burst of pops queues on the auth check and the first
        # claim. ``serve``'s protocol notes it when the request's first
        # bytes are parsed; other servers get this moment.
        scope.setdefault(ARRIVED_KEY, asyncio.get_running_loop().time())
        # Django's __call__ without its ThreadSensitiveContext (see above).
        if compat.only_receivers(request_started, DJANGO_STARTED_RECEIVERS) and compat.only_receivers(
            request_finished, DJANGO_FINISHED_RECEIVERS
        ):
            await self.handle_direct(scope, receive, send)
        else:
            await self.handle(scope, receive, send)

    async def handle_direct(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Django's ``handle`` with the request signals' work done in place.

        While only Django's own receivers are connected, the work of
        ``request_started`` and ``request_finished`` is done without a
        thread: they touch the database connections of the request's
        context, and a pop opens none there (its database work runs on
        ``api.dbthreads``, which closes old connections around each job),
        so what remains is resetting the URL conf. Sending the two signals
        through ``sync_to_async`` was two thread hops per pop, about an
        eighth of the server CPU of a pop and its ack (bench/README.md,
        "Where the time goes"). Should a connection be open in the
        request's context after all, or a cache backend need closing, that
        work runs on a thread as Django runs it.
        """
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        set_script_prefix(get_script_prefix(scope))
        if connections.all(initialized_only=True):
            await sync_to_async(request_begins)()
        request, error_response = self.create_request(scope, body_file)
        if request is None:
            assert error_response is not None
            body_file.close()
            await self.send_response(error_response, send)
            await self._ends(error_response)
            return

        async def process_request(request: HttpRequest, send: Any) -> HttpResponseBase:
            response = await self.run_get_response(request)
            with contextlib.suppress(asyncio.CancelledError):
                # The client left while the answer was sent.
                await self.send_response(response, send)
            return response

        # As Django's: a client that leaves ends the view (a waiting pop).
        tasks = [
            asyncio.create_task(self.listen_for_disconnect(receive)),
            asyncio.create_task(process_request(request, send)),
        ]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            if task.done():
                try:
                    task.result()
                except RequestAborted:
                    pass
                except AssertionError:
                    body_file.close()
                    raise
            else:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        try:
            response = tasks[1].result()
        except asyncio.CancelledError:
            await self._ends(None)
        else:
            await self._ends(response)
        body_file.close()

    async def _ends(self, response: HttpResponseBase | None) -> None:
        # ``response.close()`` without its ``request_finished``, then that
        # signal's work (``request_ends``) in place where it is all there is.
        if response is not None:
            compat.close_response(response, _nothing)
        if connections.all(initialized_only=True) or _caches_close():
            await sync_to_async(request_ends)()
        else:
            set_urlconf(None)


def _nothing() -> None:
    return None


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
