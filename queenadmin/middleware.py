from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.core.exceptions import TooManyFieldsSent
from django.db import InterfaceError, OperationalError
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


class BodyTooLarge(Exception):
    """A body refused after it was read (its parse would cost too much):
    answered like the body limit, 413 in plain text (``ApiErrorMiddleware``)."""


def _payload_too_large() -> HttpResponse:
    return HttpResponse("payload too large\n", status=413, content_type="text/plain")


def _too_large(request: HttpRequest) -> HttpResponse | None:
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > settings.MAX_BODY_BYTES:
        return _payload_too_large()
    return None


#: Answers Django or ninja give on their own in HTML or plain text, as the
#: protocol's engine family (``{"error", "code"}``) on API routes.
_ENVELOPES = {
    400: ("the request is malformed", "bad_request"),
    403: ("forbidden", "forbidden"),
    404: ("no such route", "not_found"),
    405: ("this method is not allowed on this route", "method_not_allowed"),
    500: ("internal server error", "internal"),
}


def _json_error(detail: str, code: str, status: int) -> HttpResponse:
    body = json.dumps({"error": detail, "code": code}, separators=(",", ":"))
    return HttpResponse(body, status=status, content_type="application/json")


class ApiErrorMiddleware:
    """Every refusal on ``/api/`` in the protocol's JSON envelope.

    Ninja answers a wrong method with a plain-text 405, and Django a query
    string of over ``DATA_UPLOAD_MAX_NUMBER_FIELDS`` fields (or any other
    ``SuspiciousOperation``) with an HTML 400. The 413 of the body limit
    stays plain text, as the protocol says. Sync and async capable.
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase] | AsyncGetResponse) -> None:
        self.get_response = get_response
        self.async_mode = iscoroutinefunction(get_response)
        if self.async_mode:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> HttpResponseBase | Awaitable[HttpResponseBase]:
        if self.async_mode:
            return self.__acall__(request)
        if not request.path.startswith("/api/"):
            return self.get_response(request)
        refusal = _query_refusal(request)
        if refusal is not None:
            return refusal
        return _enveloped(self.get_response(request))  # type: ignore[arg-type]

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        if not request.path.startswith("/api/"):
            return await self.get_response(request)  # type: ignore[misc, no-any-return]
        refusal = _query_refusal(request)
        if refusal is not None:
            return refusal
        return _enveloped(await self.get_response(request))  # type: ignore[misc]

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        """A lost or refused database connection: 503, which clients retry.

        A connection that went away while idle less than a second (see
        ``pgbackend``), a PostgreSQL restart or its connection limit: the
        request did nothing (its transaction rolled back), and the next one
        gets a new connection. Other errors stay 500s.

        A body whose parse would take too much memory (``BodyTooLarge``) is
        answered as the body limit answers, 413 in plain text.
        """
        if isinstance(exception, BodyTooLarge):
            return _payload_too_large()
        if request.path.startswith("/api/") and isinstance(exception, OperationalError | InterfaceError):
            answer = _json_error("the database is unavailable; retry", "unavailable", 503)
            answer["Retry-After"] = "1"
            return answer
        return None


def _query_refusal(request: HttpRequest) -> HttpResponse | None:
    try:
        request.GET  # noqa: B018 - parses the query string once, here
    except TooManyFieldsSent:
        return _json_error("the query string has too many fields", "bad_request", 400)
    return None


def _enveloped(response: HttpResponseBase) -> HttpResponseBase:
    status = response.status_code
    if status < 400 or status == 413 or response.get("Content-Type", "").startswith("application/json"):
        return response
    detail, code = _ENVELOPES.get(status, ("the request was refused", "bad_request" if status < 500 else "internal"))
    answer = _json_error(detail, code, status)
    if response.has_header("Allow"):
        answer["Allow"] = response["Allow"]
    return answer


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
