"""The bearer check: the one parser of ``Authorization`` and an auth class per scope.

``scopes.ScopedRouter`` hands every route the check for the scope its row
in ``scopes.ROUTES`` needs, through ninja's public ``auth=`` argument.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja.security import HttpBearer

from queenadmin.api import dbthreads, openmode
from queenadmin.conf import settings
from queenadmin.domain import tokens
from queenadmin.errors import Forbidden
from queenadmin.models import TokenScope


def bearer_token(request: HttpRequest) -> str | None:
    """The token of ``Authorization: Bearer <token>``, else None.

    The one parser of the header for every route (sync and async): the
    scheme in any case, one space, then a token without whitespace.
    ``Bearer  token`` (two spaces) or a trailing space is no token.

    Read from ``META`` rather than ``request.headers``: the latter builds a
    mapping of every header on first use, ~6% of a KV put's Django CPU for
    the one header the API reads (WSGI and ASGI requests both fill META).
    """
    scheme, space, token = (request.META.get("HTTP_AUTHORIZATION") or "").partition(" ")
    if scheme.lower() != "bearer" or not space or not token or token != "".join(token.split()):
        return None
    return token


def refusal(scope: TokenScope, need: TokenScope) -> Forbidden:
    return Forbidden(f"this token's scope is {scope.value}; the call needs {need.value}")


class BearerToken(HttpBearer):
    """The bearer check of a sync operation: a known token whose scope covers ``need``.

    No token or an unknown one answers 401; a token below ``need`` answers 403.
    """

    openapi_description = "Create one with `python manage.py apitoken create NAME [--scope read|write|admin]`."

    def __init__(self, need: TokenScope = TokenScope.ADMIN) -> None:
        super().__init__()
        self.need = need

    def __call__(self, request: HttpRequest) -> Any:
        if settings.OPEN_API:
            openmode.refuse_foreign(request)
            return tokens.OPEN
        token = bearer_token(request)
        return None if token is None else self.admit(self.authenticate(request, token))

    def authenticate(self, request: HttpRequest, token: str) -> tokens.TokenAuth | None:
        return tokens.token_check(token)

    def admit(self, auth: tokens.TokenAuth | None) -> tokens.TokenAuth | None:
        if auth is not None and not auth.scope.covers(self.need):
            raise refusal(auth.scope, self.need)
        return auth


class AsyncBearerToken(BearerToken):
    """The bearer check for async views: the token cache on the loop, else a database thread."""

    async def __call__(self, request: HttpRequest) -> Any:
        if settings.OPEN_API:
            openmode.refuse_foreign(request)
            return tokens.OPEN
        token = bearer_token(request)
        if token is None:
            return None
        auth = tokens.token_check_cached(token) or await dbthreads.run(tokens.token_check, token)
        return self.admit(auth)


#: One check per scope and kind of view, shared by every route that needs it.
CHECKS: dict[tuple[TokenScope, bool], BearerToken] = {
    (scope, is_async): (AsyncBearerToken if is_async else BearerToken)(scope)
    for scope in TokenScope
    for is_async in (False, True)
}


def check_for(need: TokenScope, *, is_async: bool) -> BearerToken:
    """The bearer check admitting tokens that cover ``need``, for a sync or an async view."""
    return CHECKS[need, is_async]
