"""Middleware of the serving machinery, and the base our middleware share.

- ``DualModeMiddleware``: the sync/async skeleton (django-htmx's pattern)
  of every middleware of ours; a subclass says what happens before and
  after the rest of the chain.
- ``BodyLimitMiddleware``: bodies over the protocol's limit answered 413.
- ``InlineHooks``: a ``MiddlewareMixin``'s hooks run on the event loop,
  for the pops' chain (``handlers.PopHandler``).

The API's error envelope is ``queenadmin/api/envelope.py``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.utils.deprecation import MiddlewareMixin

from queenadmin.conf import settings

AsyncGetResponse = Callable[[HttpRequest], Awaitable[HttpResponseBase]]
SyncGetResponse = Callable[[HttpRequest], HttpResponseBase]


class DualModeMiddleware:
    """A middleware that runs in the mode of the chain it is put in.

    Sync and async capable, so Django's ASGI handler never adapts the chain
    through a thread on its account. ``before`` may answer in place of the
    rest of the chain; ``after`` may replace the chain's answer. Both run
    on the request's own thread or event loop, so neither may block.
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: SyncGetResponse | AsyncGetResponse) -> None:
        self.get_response = get_response
        self.async_mode = iscoroutinefunction(get_response)
        if self.async_mode:
            # Mark the instance, and switch inside __call__ rather than
            # swapping out dunder methods.
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> HttpResponseBase | Awaitable[HttpResponseBase]:
        if self.async_mode:
            return self.__acall__(request)
        answer = self.before(request)
        if answer is not None:
            return answer
        return self.after(request, self.get_response(request))  # type: ignore[arg-type]

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        answer = self.before(request)
        if answer is not None:
            return answer
        return self.after(request, await self.get_response(request))  # type: ignore[misc]

    def before(self, request: HttpRequest) -> HttpResponseBase | None:
        """An answer that replaces the rest of the chain, or None."""
        return None

    def after(self, request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        """The answer to give for the chain's ``response``."""
        return response


def payload_too_large() -> HttpResponse:
    """The protocol's answer to a body over its limit: 413 in plain text."""
    return HttpResponse("payload too large\n", status=413, content_type="text/plain")


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
