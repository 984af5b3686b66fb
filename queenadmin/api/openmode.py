"""Open-API mode (``QUEENADMIN_OPEN_API=1``): the API without tokens, for
local development only.

Without a token, nothing but the browser stands between another site's page
and the API: a page can make the developer's browser send a request to
``127.0.0.1`` (a form, ``fetch`` in ``no-cors`` mode, an ``<img>``), and
what it cannot send without asking first (a CORS preflight, which this
server never grants) is all that is safe. So in this mode a request a
browser could send from another page without a preflight is refused:

- a body whose ``Content-Type`` is not JSON or the official client's binary
  push (``application/x-queen-push``), or a body without one: a form's
  types, ``text/plain`` and a typeless blob need no preflight (415);
- an ``Origin`` that is not the site's own (``server/origins.py``: the
  address the request came to, or ``QUEENADMIN_ORIGINS``) (403);
- ``Sec-Fetch-Site: cross-site`` or ``same-site``: a GET from an ``<img>``
  or a link carries no ``Origin``, and a pop is a GET that writes (403).

The official client sends JSON or its binary push, and neither ``Origin``
nor ``Sec-Fetch-Site``; Swagger UI at ``/api/v1/docs`` is the site's own
page. ``serve`` warns at start and refuses the mode on a host that is not a
loopback address unless ``QUEENADMIN_OPEN_API_ANY_HOST=1``
(``start_refusal``).
"""

from __future__ import annotations

import ipaddress

from django.core.exceptions import DisallowedHost
from django.http import HttpRequest

from queenadmin.api.wire import binary
from queenadmin.errors import Forbidden, UnsupportedMediaType
from queenadmin.server.origins import origin_allowed

#: Request body types the API reads (the essence, before any parameter).
BODY_TYPES = frozenset({"application/json", binary.CONTENT_TYPE})
#: ``Sec-Fetch-Site`` values of a request another page made.
OTHER_SITES = frozenset({"cross-site", "same-site"})


def refuse_foreign(request: HttpRequest) -> None:
    """Raise unless ``request`` is one another site's page could not have sent.

    ``Forbidden`` (403) for a foreign ``Origin`` or ``Sec-Fetch-Site``,
    ``UnsupportedMediaType`` (415) for a body that is not JSON or a binary push.
    """
    meta = request.META
    fetch_site = meta.get("HTTP_SEC_FETCH_SITE", "").strip().lower()
    if fetch_site in OTHER_SITES:
        raise Forbidden(f"open-API mode: the browser says this request came from another page ({fetch_site})")
    origin = meta.get("HTTP_ORIGIN")
    if origin is not None and not origin_allowed(origin, secure=request.is_secure(), host=_host(request)):
        raise Forbidden(f"open-API mode: a request from {origin[:200]!r}, not this site's own origin")
    if request.body:
        content_type = meta.get("CONTENT_TYPE", "")
        if content_type.split(";", 1)[0].strip().lower() not in BODY_TYPES:
            raise UnsupportedMediaType(
                f"open-API mode: a body of type {content_type[:100] or '(none)'!r}; "
                "send application/json (or application/x-queen-push)"
            )


def _host(request: HttpRequest) -> str | None:
    try:
        return request.get_host()
    except DisallowedHost:
        return None


def is_loopback(host: str) -> bool:
    """Whether ``serve --host`` names a loopback address (``localhost`` counts)."""
    name = host.strip().removeprefix("[").removesuffix("]")
    if name.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def start_refusal(host: str, *, any_host: bool) -> str | None:
    """Why ``serve`` must not start open-API mode on ``host``, or None."""
    if any_host or is_loopback(host):
        return None
    return (
        f"QUEENADMIN_OPEN_API=1 serves the API without tokens; refusing it on --host {host}, "
        "which is not a loopback address (anyone who reaches it could read, write and delete "
        "everything). Serve on 127.0.0.1, or set QUEENADMIN_OPEN_API_ANY_HOST=1 as well."
    )


def start_warning(host: str, port: int) -> str:
    """The line ``serve`` logs when it starts in open-API mode."""
    return (
        f"QUEENADMIN_OPEN_API=1: the API on {host} port {port} takes no token; whoever reaches it "
        "may read, write and delete everything (local development only)"
    )
