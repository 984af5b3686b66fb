"""Cookies set in an answer to an HTTPS request are ``Secure``.

A request is HTTPS when it came over TLS, or through a proxy listed in
uvicorn's ``FORWARDED_ALLOW_IPS`` that said so in ``X-Forwarded-Proto``
(uvicorn then sets the request's scheme; the header from anyone else is
ignored). Django marks the session and CSRF cookies ``Secure`` only by
setting, on every answer alike (``QUEENADMIN_HTTPS=1`` does that); this
marks those of HTTPS answers in any case, so a cookie a browser got over
HTTPS is never sent back over plain HTTP.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponseBase


class SecureCookiesMiddleware:
    """Mark every cookie of an answer to an HTTPS request ``Secure``.

    Sync only: it runs in the browser pages' WSGI chain (the API's chain
    leaves it out: the API sets no cookies).
    """

    sync_capable = True
    async_capable = False

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        if request.is_secure():
            for morsel in response.cookies.values():
                morsel["secure"] = True
        return response
