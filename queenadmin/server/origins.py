"""The origins this site serves, for the live socket and open-API mode.

An origin is allowed when it is the one the request itself came to (its
scheme and its ``Host`` header, port included, the host one of
``ALLOWED_HOSTS``) or one of ``CSRF_TRUSTED_ORIGINS``, which
``settings.py`` fills from ``QUEENADMIN_ORIGINS`` (a proxy's public
address). This is the rule of Django's CSRF check (``CsrfViewMiddleware``
compares a form's ``Origin`` the same way, wildcards such as
``https://*.example.com`` included), over the same list: a page whose forms
Django accepts can open the socket, and no other.

A page on another port, scheme or host of the same machine is another
origin: it does not get the operator's live data through the operator's
session cookie (cookies are shared across ports).
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host
from django.utils.http import is_same_domain

log = logging.getLogger("queenadmin.asgi")


def parse_origins(text: str, *, name: str) -> list[str]:
    """The comma-separated origins of ``text``; raise ``ValueError`` naming
    the setting ``name`` for one that is not ``scheme://host[:port]``."""
    found: list[str] = []
    for item in text.split(","):
        origin = item.strip()
        if not origin:
            continue
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.path or parts.query or parts.fragment:
            raise ValueError(
                f"{name}: {origin!r} is not an origin; write scheme://host[:port] "
                "(http or https, no path), e.g. https://queen.example.com"
            )
        found.append(origin)
    return found


def _own_host(host: str) -> bool:
    """Whether ``host`` (a Host header) names this site, as ``request.get_host`` decides."""
    allowed = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]
    domain, _port = split_domain_port(host)
    return bool(domain) and validate_host(domain, allowed)


def origin_allowed(origin: str | None, *, secure: bool, host: str | None) -> bool:
    """Whether ``origin`` (an ``Origin`` header) is this site's, for a request
    that came to ``host`` (its ``Host`` header) over HTTPS if ``secure``.

    No ``Origin`` (or ``null``) is not this site's.
    """
    if not origin or origin == "null":
        return False
    if host and _own_host(host) and origin == f"{'https' if secure else 'http'}://{host}":
        return True
    trusted = settings.CSRF_TRUSTED_ORIGINS
    if origin in trusted:
        return True
    try:
        parts = urlsplit(origin)
    except ValueError:
        return False
    return any(
        is_same_domain(parts.netloc, pattern.netloc.lstrip("*"))
        for pattern in (urlsplit(o) for o in trusted if "*" in o)
        if pattern.scheme == parts.scheme
    )


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


class SiteOriginValidator:
    """Refuse a websocket handshake whose ``Origin`` is not this site's (403).

    A handshake without ``Origin`` is refused too: browsers always send it
    on a websocket, so only a tool leaves it out, and the live socket
    serves the dashboard's pages only.
    """

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        origin = _header(scope, b"origin")
        # uvicorn says wss for TLS, or for a trusted proxy's X-Forwarded-Proto.
        secure = scope.get("scheme") in ("wss", "https")
        host = _header(scope, b"host")
        if origin_allowed(origin, secure=secure, host=host):
            return await self.application(scope, receive, send)
        # One line an operator behind a proxy can act on (QUEENADMIN_ORIGINS).
        log.warning(
            "websocket %s: origin %s is neither %s://%s nor in QUEENADMIN_ORIGINS: refused",
            scope["path"][:200],
            (origin or "(none)")[:200],
            "https" if secure else "http",
            (host or "")[:200],
        )
        return await WebsocketDenier()(scope, receive, send)  # type: ignore[arg-type]
