"""Which token scope each /api/v1 route needs, and the check of it.

Scopes are a hierarchy, ``read`` < ``write`` < ``admin``, split the way
Queen's proxy roles split routes (read-only: GETs; read-write: everything
a client does), with deletes of whole resources kept for ``admin``:

- ``read``: every GET, and the POSTs that only read (a KV call of reads
  only, a locks call of ``get`` only, ``/fetch``, ``/partitions/changed``,
  ``/resources/kv/list``);
- ``write``: what producers and consumers do: KV writes, locks, timers,
  transactions, configure, push, pop, ack, lease extend, seek and
  resubscribe, traces, a message's retry or move to its DLQ;
- ``admin``: deleting a queue, a consumer group or a message (what cannot
  be undone). The admin's DLQ purge is not on the API at all.

Each route's scope is its row of ``routes.ROUTES`` (beside its grant
rule). Every router is a ``ScopedRouter``: each route it declares gets the
bearer check for its row through ninja's public ``auth=`` argument, and a route
without a row is refused when its module is imported; ``check`` refuses to
start when a row has no route, so a new route cannot slip through with a
default. The two routes whose need depends on the body (``POST /kv``,
``POST /locks``) let any token in and call ``require`` once the operations
are parsed.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest
from django.urls import register_converter
from django.urls.converters import PathConverter
from ninja import Router
from ninja.constants import NOT_SET
from pydantic import BaseModel

from queenadmin.api import grants, routes
from queenadmin.api import routes as routes_table
from queenadmin.api.bearer import check_for, refusal
from queenadmin.api.openapi import body_of
from queenadmin.api.wire.fields import Declared
from queenadmin.domain import kv
from queenadmin.models import TokenScope

READ, WRITE, ADMIN = TokenScope.READ, TokenScope.WRITE, TokenScope.ADMIN

#: Routes that let any token in and decide from their operations (``require``).
PER_OPERATION = frozenset({"POST /kv", "POST /locks"})
#: The OpenAPI extension naming an operation's scope (``openapi.complete``
#: documents its 403 from it).
OPENAPI_KEY = "x-token-scope"
BY_OPERATION = "read, or write when an operation writes"

#: "METHOD /path" -> the scope it needs (``routes.ROUTES``).
ROUTES: dict[str, TokenScope] = {route: row.scope for route, row in routes.ROUTES.items()}

_View = TypeVar("_View", bound=Callable[..., Any])


def kv_call_needs(ops: Sequence[kv.KVOp]) -> TokenScope:
    """``POST /kv``: ``write`` when any operation changes a key, else ``read``."""
    return WRITE if any(isinstance(op, grants.KV_CHANGES) for op in ops) else READ


def locks_call_needs(ops: Iterable[Any]) -> TokenScope:
    """``POST /locks``: ``read`` when every operation is a ``get``, else ``write``."""
    return READ if all(op.op == "get" for op in ops) else WRITE


def require(request: HttpRequest, need: TokenScope) -> None:
    """Raise ``Forbidden`` unless the caller's token (``request.auth``) covers ``need``."""
    scope: TokenScope = request.auth.scope  # type: ignore[attr-defined]
    if not scope.covers(need):
        raise refusal(scope, need)


class RestOfPath(PathConverter):
    """Django's ``path`` converter, newlines included.

    ``path`` is ``.+``, and ``.`` stops at a newline, so a route such as
    ``DELETE /resources/queues/{path:queue}`` answered 404 for a name stored
    with one (``orders.a/\\nb``) and it could not be deleted. Every router
    here serves its ``{path:…}`` parameters through this one instead.
    """

    NAME = "rest"
    regex = r"[\s\S]+"


register_converter(RestOfPath, RestOfPath.NAME)


class ScopedRouter(Router):
    """A router whose every route gets the bearer check its row in ``ROUTES`` names.

    The same row names how the route meets a token's grants, which the
    OpenAPI document names (``x-token-grants``).

    Through ninja's public ``auth=``: the check of the row's scope, async
    for an async view (the token cache on the loop). A route declared with
    an ``auth=`` of its own keeps it. Raise ``ImproperlyConfigured`` for a
    route without a row, or one view serving routes of different scopes.

    ``with_body`` declares a route whose view reads its body by hand.
    """

    def __init__(self, *, errors: dict[int | str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        #: "METHOD /path" of every route declared here (``check`` reads it).
        self.routes: set[str] = set()
        #: The refusals this router's ``with_body`` routes answer unless told otherwise.
        self.errors: dict[int | str, Any] = errors or {}

    def with_body(
        self,
        method: str,
        path: str,
        body: type[BaseModel] | Declared,
        answers: dict[int | str, Any],
        *,
        summary: str,
        description: str | None = None,
        errors: dict[int | str, Any] | None = None,
        required: bool = True,
        array_too: bool = False,
        openapi_extra: dict[str, Any] | None = None,
    ) -> Callable[[_View], _View]:
        """Declare ``method path`` whose view parses its JSON body itself (our wire parsers).

        ninja never sees the body, so ``body`` documents it (``openapi.body_of``
        with ``required`` and ``array_too``), and the responses are ``answers``
        then ``errors``, by default the router's.
        """
        return self.api_operation(
            [method],
            path,
            response={**answers, **(self.errors if errors is None else errors)},
            openapi_extra={**body_of(body, array_too=array_too, required=required), **(openapi_extra or {})},
            summary=summary,
            description=description,
        )

    def add_api_operation(
        self,
        path: str,
        methods: list[str],
        view_func: Callable[..., Any],
        *,
        auth: Any = NOT_SET,
        openapi_extra: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        routes = [f"{method} {path}" for method in methods]
        missing = [route for route in routes if route not in ROUTES]
        if missing:
            raise ImproperlyConfigured(f"{missing[0]} has no scope in queenadmin/api/routes.py")
        needs = {ROUTES[route] for route in routes}
        if len(needs) > 1:
            raise ImproperlyConfigured(f"one view serves {routes} with different scopes")
        need = needs.pop()
        try:
            rule = grants.rule_of(routes)
        except LookupError as exc:
            raise ImproperlyConfigured(str(exc)) from None
        self.routes.update(routes)
        if auth is NOT_SET:
            write_only = all(route in routes_table.WRITE_ONLY for route in routes)
            auth = check_for(need, is_async=inspect.iscoroutinefunction(view_func), write_only=write_only)
        documented = BY_OPERATION if any(r in PER_OPERATION for r in routes) else need.value
        openapi_extra = {**(openapi_extra or {}), OPENAPI_KEY: documented, grants.OPENAPI_KEY: rule}
        path = path.replace("{path:", "{" + RestOfPath.NAME + ":")
        super().add_api_operation(path, methods, view_func, auth=auth, openapi_extra=openapi_extra, **kwargs)


def check(routers: Iterable[ScopedRouter]) -> None:
    """Raise ``ImproperlyConfigured`` when a row of ``ROUTES`` names no route of ``routers``."""
    seen: set[str] = set().union(*(router.routes for router in routers))
    stale = set(ROUTES) - seen
    if stale:
        raise ImproperlyConfigured(f"scopes for routes that do not exist: {', '.join(sorted(stale))}")
    try:
        grants.check(seen)
    except LookupError as exc:
        raise ImproperlyConfigured(str(exc)) from None
