"""The REST face: Queen MQ's /api/v1 wire protocol on django-ninja."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError
from ninja.errors import ValidationError as NinjaValidationError
from ninja.security import HttpBearer

from queenadmin.api import dbthreads, openapi, scopes
from queenadmin.api import errors as error_table
from queenadmin.api.http import json_response
from queenadmin.conf import settings
from queenadmin.domain import tokens
from queenadmin.errors import QueenError, Unauthorized
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


class BearerToken(HttpBearer):
    """The bearer check of one operation: a known token whose scope covers ``need``.

    ``scopes.apply`` gives each operation its own, from the scope table. No
    token or an unknown one answers 401; a token below ``need`` answers 403.
    """

    openapi_description = "Create one with `python manage.py apitoken create NAME [--scope read|write|admin]`."

    def __init__(self, need: TokenScope = TokenScope.ADMIN) -> None:
        super().__init__()
        self.need = need

    def __call__(self, request: HttpRequest) -> Any:
        if settings.OPEN_API:
            return tokens.OPEN
        token = bearer_token(request)
        return None if token is None else self.admit(self.authenticate(request, token))

    def authenticate(self, request: HttpRequest, token: str) -> tokens.TokenAuth | None:
        return tokens.token_check(token)

    def admit(self, auth: tokens.TokenAuth | None) -> tokens.TokenAuth | None:
        if auth is not None and not auth.scope.covers(self.need):
            raise scopes.refusal(auth.scope, self.need)
        return auth


class AsyncBearerToken(BearerToken):
    """The bearer check for async views: the token cache on the loop, else a database thread."""

    async def __call__(self, request: HttpRequest) -> Any:
        if settings.OPEN_API:
            return tokens.OPEN
        token = bearer_token(request)
        if token is None:
            return None
        auth = tokens.token_check_cached(token) or await dbthreads.run(tokens.token_check, token)
        return self.admit(auth)


class QueenNinjaAPI(NinjaAPI):
    def get_openapi_schema(self, *args: Any, **kwargs: Any) -> Any:
        # Request bodies parsed by hand are documented through body_of(), and
        # the answers no response= names (401, the body limit) by complete().
        return openapi.complete(super().get_openapi_schema(*args, **kwargs))


api = QueenNinjaAPI(
    title="queenadmin",
    version="1",
    description="Queen MQ's /api/v1 wire protocol: KV, locks, timers, transactions and the message log.",
    auth=BearerToken(),
    urls_namespace="api",
    docs_url="/docs",
)


@api.exception_handler(QueenError)
def on_queen_error(request: HttpRequest, exc: QueenError) -> HttpResponse:
    status, body = error_table.render(exc)
    return json_response(body, status, error_table.headers(exc))


@api.exception_handler(AuthenticationError)
def on_auth_error(request: HttpRequest, exc: Exception) -> HttpResponse:
    status, body = error_table.render(Unauthorized())
    return json_response(body, status, {"WWW-Authenticate": "Bearer"})


@api.exception_handler(NinjaValidationError)
def on_validation_error(request: HttpRequest, exc: NinjaValidationError) -> HttpResponse:
    first = exc.errors[0] if exc.errors else {}
    where = ".".join(str(p) for p in first.get("loc", ()))
    detail = f"{where}: {first.get('msg', 'invalid')}" if where else "invalid request"
    return json_response({"error": detail, "code": "bad_request"}, 400)


def _register() -> None:
    # One router per concept; each module exposes ``router``.
    from queenadmin.api import admin, kv, locks, queues, status, timers, transactions

    for module in (kv, locks, queues, status, timers, transactions, admin):
        api.add_router("/", module.router)
    scopes.apply(api, BearerToken, AsyncBearerToken)


_register()
