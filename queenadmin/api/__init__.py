"""The REST face: Queen MQ's /api/v1 wire protocol on django-ninja."""

from __future__ import annotations

import copy
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.test.signals import setting_changed
from ninja import NinjaAPI, Swagger
from ninja.errors import AuthenticationError
from ninja.errors import ValidationError as NinjaValidationError

from queenadmin.api import errors as error_table
from queenadmin.api import openapi, scopes
from queenadmin.api.bearer import AsyncBearerToken, BearerToken, bearer_token
from queenadmin.api.http import json_response
from queenadmin.errors import QueenError, Unauthorized

__all__ = ["AsyncBearerToken", "BearerToken", "api", "bearer_token", "streams_api"]


def on_queen_error(request: HttpRequest, exc: QueenError) -> HttpResponse:
    status, body = error_table.render(exc)
    return json_response(body, status, error_table.headers(exc))


def on_auth_error(request: HttpRequest, exc: Exception) -> HttpResponse:
    status, body = error_table.render(Unauthorized())
    return json_response(body, status, {"WWW-Authenticate": "Bearer"})


def on_validation_error(request: HttpRequest, exc: NinjaValidationError) -> HttpResponse:
    first = exc.errors[0] if exc.errors else {}
    where = ".".join(str(p) for p in first.get("loc", ()))
    detail = f"{where}: {first.get('msg', 'invalid')}" if where else "invalid request"
    return json_response({"error": detail, "code": "bad_request"}, 400)


class QueenNinjaAPI(NinjaAPI):
    """An API of Queen's: bearer tokens, and one error format for every refusal."""

    def __init__(self, **kwargs: Any) -> None:
        # Every route has the check of its scope (scopes.ScopedRouter); this
        # default, the strictest, only covers a route added some other way.
        super().__init__(version="1", auth=BearerToken(), **kwargs)
        self.exception_handler(QueenError)(on_queen_error)
        self.exception_handler(AuthenticationError)(on_auth_error)
        self.exception_handler(NinjaValidationError)(on_validation_error)
        #: The document per path prefix: it follows from the code and the
        #: settings alone, and making it costs 0.15-0.25 s of CPU (337 KB).
        self.documents: dict[str, Any] = {}
        setting_changed.connect(lambda **kwargs: self.documents.clear(), weak=False)

    def get_openapi_schema(self, *, path_prefix: str | None = None, path_params: Any = None) -> Any:
        # Request bodies parsed by hand are documented through body_of()
        # (ScopedRouter.with_body), and the answers no response= names (401,
        # the body limit) by complete().
        prefix = self.get_root_path(path_params or {}) if path_prefix is None else path_prefix
        if prefix not in self.documents:
            self.documents[prefix] = openapi.complete(super().get_openapi_schema(path_prefix=prefix))
        # A copy (a tenth of the making): a caller may change what it gets.
        return copy.deepcopy(self.documents[prefix])


#: The docs page (templates/ninja/swagger.html). No deep links: Swagger UI
#: draws each as a link inside the operation's button, which screen readers
#: and keyboards cannot tell apart (axe: nested-interactive).
DOCS = Swagger(settings={"deepLinking": False})

api = QueenNinjaAPI(
    title="queenadmin",
    description="Queen MQ's /api/v1 wire protocol: KV, locks, timers, transactions and the message log.",
    urls_namespace="api",
    docs_url="/docs",
    docs=DOCS,
)


#: Queen serves its Streams SDK routes beside /api/v1, at /streams/v1: an
#: API of its own, mounted at the root, whose routes spell their full paths.
streams_api = QueenNinjaAPI(
    title="queenadmin streams",
    description="Queen MQ's /streams/v1 routes: stream queries, their state, atomic cycles.",
    urls_namespace="streams",
    docs_url="/streams/v1/docs",
    openapi_url="/streams/v1/openapi.json",
    docs=DOCS,
)


def _register() -> None:
    # One router per concept; each module exposes ``router``.
    from queenadmin.api import ephemeral, history, kv, locks, messages, queues, status, streams, timers, transactions

    modules = (kv, locks, queues, status, timers, transactions, messages, ephemeral, history)
    for module in modules:
        api.add_router("/", module.router)
    streams_api.add_router("/", streams.router)
    scopes.check([*(module.router for module in modules), streams.router])


_register()
