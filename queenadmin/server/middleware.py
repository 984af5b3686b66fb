"""Middleware of the serving machinery.

- ``BodyLimitMiddleware``: bodies over the protocol's limit answered 413.
- ``InlineHooks``: a ``MiddlewareMixin``'s hooks run on the event loop,
  for the pops' chain (``handlers.PopHandler``).

The base our middleware share is ``plumbing/middleware.py``; the API's
error envelope is ``api/envelope.py``.
"""

from __future__ import annotations

from asgiref.sync import markcoroutinefunction
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.utils.deprecation import MiddlewareMixin

from queenadmin.conf import settings
from queenadmin.plumbing.middleware import AsyncGetResponse, DualModeMiddleware, payload_too_large


class BodyLimitMiddleware(DualModeMiddleware):
    """Refuse bodies over the protocol's 64 MiB with 413 in plain text."""

    def before(self, request: HttpRequest) -> HttpResponseBase | None:
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > settings.MAX_BODY_BYTES:
            return payload_too_large()
        return None


class InlineHooks:
    """Run one ``MiddlewareMixin``'s hooks on the event loop (async only).

    Under ASGI, Django runs each ``process_request`` and ``process_response``
    of such a middleware through ``sync_to_async``: a thread hop apiece. Use
    this only for middleware whose hooks do no I/O (they read the request and
    set headers or answer a redirect) and that has no ``process_view``,
    ``process_exception`` or ``process_template_response``.
    """

    sync_capable = False
    async_capable = True

    def __init__(self, get_response: AsyncGetResponse, middleware: type[MiddlewareMixin]) -> None:
        self.get_response = get_response
        self.middleware = middleware(get_response)
        markcoroutinefunction(self)

    async def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response: HttpResponseBase | None = None
        process_request = getattr(self.middleware, "process_request", None)
        if process_request is not None:
            response = process_request(request)
        if response is None:
            response = await self.get_response(request)
        process_response = getattr(self.middleware, "process_response", None)
        if process_response is not None:
            response = process_response(request, response)
        return response
