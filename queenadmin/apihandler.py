"""The API's own Django handler: MIDDLEWARE without the browser's entries.

``/api/``, ``/health`` and ``/metrics`` are called by services with a bearer
token (or nothing); none of them reads a session, a CSRF token, the signed
in user, flash messages or htmx headers, and ninja's views are CSRF-exempt.
Those five middleware still cost every API call their work (a session
lookup object, a lazy user, the CSRF cookie check, about 40 objects left in
reference cycles) and about a fifth of a KV put's server CPU (issue 15).
``asgi.application`` routes these paths here by prefix; the dashboard and
the admin keep the whole chain. Everything else is kept in MIDDLEWARE's
order: the body limit, the API's error envelope, the security, common and
X-Frame-Options headers, and any entry added later (the tests' answer
recorder, a deployment's own).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured, MiddlewareNotUsed
from django.core.handlers.exception import convert_exception_to_response
from django.core.handlers.wsgi import WSGIHandler
from django.http import HttpRequest
from django.urls import ResolverMatch, get_resolver
from django.utils.module_loading import import_string

#: Paths served by ``ApiWSGIHandler``: these, and every path under ``/api/``.
API_PATHS = frozenset({"/api", "/health", "/metrics"})


def is_api_path(path: str) -> bool:
    return path.startswith("/api/") or path in API_PATHS


#: MIDDLEWARE entries that only browser pages use.
BROWSER_ONLY_MIDDLEWARE = frozenset(
    {
        "django.contrib.sessions.middleware.SessionMiddleware",
        "django.middleware.csrf.CsrfViewMiddleware",
        "django.contrib.auth.middleware.AuthenticationMiddleware",
        "django.contrib.messages.middleware.MessageMiddleware",
        "django_htmx.middleware.HtmxMiddleware",
    }
)


def api_middleware() -> list[str]:
    """MIDDLEWARE without the browser-only entries, in its order."""
    return [path for path in settings.MIDDLEWARE if path not in BROWSER_ONLY_MIDDLEWARE]


class ApiWSGIHandler(WSGIHandler):
    """Django's WSGI handler with ``api_middleware()`` as its chain.

    ``BaseHandler.load_middleware`` for a sync chain (the WSGI threads run
    it), over another list; the request signals, URL resolving and
    exception handling are Django's own.
    """

    def load_middleware(self, is_async: bool = False) -> None:
        self._view_middleware: list[Any] = []
        self._template_response_middleware: list[Any] = []
        self._exception_middleware: list[Any] = []
        handler: Any = convert_exception_to_response(self._get_response)  # type: ignore[attr-defined]
        for path in reversed(api_middleware()):
            middleware = import_string(path)
            if not getattr(middleware, "sync_capable", True):
                raise ImproperlyConfigured(f"Middleware {path} must be sync-capable to serve the API.")
            try:
                instance = middleware(handler)
            except MiddlewareNotUsed:
                continue
            if instance is None:
                raise ImproperlyConfigured(f"Middleware factory {path} returned None.")
            if hasattr(instance, "process_view"):
                self._view_middleware.insert(0, instance.process_view)
            if hasattr(instance, "process_template_response"):
                self._template_response_middleware.append(instance.process_template_response)
            if hasattr(instance, "process_exception"):
                self._exception_middleware.append(instance.process_exception)
            handler = convert_exception_to_response(instance)
        self._middleware_chain = handler
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
