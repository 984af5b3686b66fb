from __future__ import annotations

from collections.abc import Awaitable, Callable

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.utils.deprecation import MiddlewareMixin

from queenadmin.conf import settings

#: The ASGI scope key where ``asgi.PopHandler`` notes when a pop arrived
#: (event-loop time): its timeout runs from then.
ARRIVED_KEY = "queenadmin.arrived"

AsyncGetResponse = Callable[[HttpRequest], Awaitable[HttpResponseBase]]


class BodyLimitMiddleware:
    """Refuse bodies over the protocol's 64 MiB with 413 in plain text.

    Sync and async capable (django-htmx's pattern), so Django's ASGI handler
    never adapts the chain through a thread on its account.
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase] | AsyncGetResponse) -> None:
        self.get_response = get_response
        self.async_mode = iscoroutinefunction(get_response)
        if self.async_mode:
            # Mark the instance, and switch inside __call__ rather than
            # swapping out dunder methods.
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> HttpResponseBase | Awaitable[HttpResponseBase]:
        if self.async_mode:
            return self.__acall__(request)
        refusal = _too_large(request)
        if refusal is not None:
            return refusal
        return self.get_response(request)

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        refusal = _too_large(request)
        if refusal is not None:
            return refusal
        return await self.get_response(request)  # type: ignore[misc, no-any-return]


def _too_large(request: HttpRequest) -> HttpResponse | None:
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > settings.MAX_BODY_BYTES:
        return HttpResponse("payload too large\n", status=413, content_type="text/plain")
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
