"""The base every middleware of ours shares, and the protocol's 413.

``DualModeMiddleware`` is the sync/async skeleton (django-htmx's pattern):
a subclass says what happens before and after the rest of the chain. The
server's, the API's and the dashboard's middleware all build on it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase

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
