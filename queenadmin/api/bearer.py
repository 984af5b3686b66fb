"""The bearer check: the one parser of ``Authorization`` and an auth class per scope.

``scopes.ScopedRouter`` hands every route the check for the scope its row
in ``scopes.ROUTES`` needs, through ninja's public ``auth=`` argument.

With ``JWT_ENABLED`` a bearer token that is a JWT (``identity.looks_like_jwt``:
two dots, no ``qa_`` prefix) is Queen's and checked by
``domain/identity/jwt.py``; any other is one of our tokens, as before. A
JWT passes a route when its levels hold the route's Queen level
(``LEVELS``: read-only, write-only, read-write, admin), else 403
``Insufficient permissions``; the paths of ``JWT_SKIP_PATHS`` need no token.
Our token of the ``write-only`` scope carries the levels of a JWT of that
role (``tokens.WRITE_ONLY_LEVELS``) and meets the same check
(``require_level``), so one rule decides what write-only may call: the
routes of ``routes.WRITE_ONLY``.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja.security import HttpBearer

from queenadmin.api import dbthreads, openmode
from queenadmin.conf import settings
from queenadmin.domain import identity, tokens
from queenadmin.errors import Forbidden
from queenadmin.models import TokenScope

#: The Queen level a route of each scope needs; a write route of
#: ``routes.WRITE_ONLY`` needs ``write-only`` instead (a push, not a read).
LEVELS: dict[TokenScope, identity.Level] = {
    TokenScope.READ: "read-only",
    TokenScope.WRITE: "read-write",
    TokenScope.ADMIN: "admin",
}
#: ``request.auth`` on a path of ``JWT_SKIP_PATHS``: Queen serves those
#: without any check, so nothing here limits them either.
SKIPPED = tokens.TokenAuth(name="skipped", scope=TokenScope.ADMIN)


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


def require_level(auth: tokens.TokenAuth, level: identity.Level) -> None:
    """Raise 403 ``Insufficient permissions`` unless ``auth`` may call what
    needs Queen's ``level``: the one check of a caller's levels (a JWT's, our
    write-only token's); a caller without levels (our other tokens) passes,
    its scope decides."""
    if auth.levels is not None and level not in auth.levels:
        raise identity.InsufficientPermissions()


def refusal(scope: TokenScope, need: TokenScope) -> Forbidden:
    return Forbidden(f"this token's scope is {scope.value}; the call needs {need.value}")


class BearerToken(HttpBearer):
    """The bearer check of a sync operation: a known token whose scope covers ``need``.

    No token or an unknown one answers 401; a token below ``need`` answers
    403. A JWT, or our write-only token, must hold ``level`` (``LEVELS``, or
    ``write-only``).
    """

    openapi_description = (
        "Create one with `python manage.py apitoken create NAME [--scope read|write-only|write|admin]`."
    )

    def __init__(self, need: TokenScope = TokenScope.ADMIN, *, write_only: bool = False) -> None:
        super().__init__()
        self.need = need
        self.level: identity.Level = "write-only" if write_only and need == TokenScope.WRITE else LEVELS[need]

    def __call__(self, request: HttpRequest) -> Any:
        if settings.OPEN_API:
            openmode.refuse_foreign(request)
            return tokens.OPEN
        token = self.token_of(request)
        if token is None or isinstance(token, tokens.TokenAuth):
            return token
        return self.admit(self.authenticate(request, token))

    def authenticate(self, request: HttpRequest, token: str) -> tokens.TokenAuth | None:
        if settings.JWT_ENABLED and identity.looks_like_jwt(token):
            return identity.jwt_check(token)
        return tokens.token_check(token)

    def token_of(self, request: HttpRequest) -> str | tokens.TokenAuth | None:
        """The bearer token; ``SKIPPED`` on a path JWTs skip; None (401) without one."""
        token = bearer_token(request)
        if settings.JWT_ENABLED:
            if identity.jwt_skips(request.path):
                return SKIPPED
            if token is None:
                raise identity.TokenRefused("Authentication required")
        return token

    def admit(self, auth: tokens.TokenAuth | None) -> tokens.TokenAuth | None:
        if auth is None:
            return None
        if auth.levels is not None:
            require_level(auth, self.level)
            return auth
        if not auth.scope.covers(self.need):
            raise refusal(auth.scope, self.need)
        return auth


class AsyncBearerToken(BearerToken):
    """The bearer check for async views: the token cache on the loop, else a database thread."""

    async def __call__(self, request: HttpRequest) -> Any:
        if settings.OPEN_API:
            openmode.refuse_foreign(request)
            return tokens.OPEN
        token = self.token_of(request)
        if token is None or isinstance(token, tokens.TokenAuth):
            return token
        if settings.JWT_ENABLED and identity.looks_like_jwt(token):
            # A miss may fetch the JWKS: off the loop.
            auth = identity.jwt_check_cached(token) or await dbthreads.run(identity.jwt_check, token)
            return self.admit(auth)
        auth = tokens.token_check_cached(token) or await dbthreads.run(tokens.token_check, token)
        return self.admit(auth)


#: One check per scope, write-only route or not, and kind of view, shared
#: by every route that needs it.
CHECKS: dict[tuple[TokenScope, bool, bool], BearerToken] = {
    (scope, write_only, is_async): (AsyncBearerToken if is_async else BearerToken)(scope, write_only=write_only)
    for scope in TokenScope
    for write_only in (False, True)
    for is_async in (False, True)
}


def check_for(need: TokenScope, *, is_async: bool, write_only: bool = False) -> BearerToken:
    """The bearer check admitting tokens that cover ``need``, for a sync or an async view.

    ``write_only``: the route is one Queen's write-only level may call (a
    JWT of that role, our write-only token).
    """
    return CHECKS[need, write_only, is_async]
