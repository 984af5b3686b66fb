from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from queenadmin.conf import settings


class BodyLimitMiddleware:
    """Refuse bodies over the protocol's 64 MiB with 413 in plain text."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > settings.MAX_BODY_BYTES:
            return HttpResponse("payload too large\n", status=413, content_type="text/plain")
        return self.get_response(request)
