"""Which token scope each /api/v1 route needs: the one table.

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

Every router is a ``ScopedRouter``: each route it declares gets the bearer
check for its row through ninja's public ``auth=`` argument, and a route
without a row is refused when its module is imported; ``check`` refuses to
start when a row has no route, so a new route cannot slip through with a
default. The two routes whose need depends on the body (``POST /kv``,
``POST /locks``) let any token in and call ``require`` once the operations
are parsed.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest
from ninja import Router
from ninja.constants import NOT_SET

from queenadmin.api import grants
from queenadmin.api.bearer import check_for, refusal
from queenadmin.domain import kv
from queenadmin.models import TokenScope

READ, WRITE, ADMIN = TokenScope.READ, TokenScope.WRITE, TokenScope.ADMIN

#: Routes that let any token in and decide from their operations (``require``).
PER_OPERATION = frozenset({"POST /kv", "POST /locks"})
#: The OpenAPI extension naming an operation's scope (``openapi.complete``
#: documents its 403 from it).
OPENAPI_KEY = "x-token-scope"
BY_OPERATION = "read, or write when an operation writes"

#: "METHOD /path" (as the routers spell it) -> the scope it needs.
ROUTES: dict[str, TokenScope] = {
    # KV: reads, writes; a single-key DELETE is a KV write, not a resource.
    "POST /kv": READ,
    "GET /kv/{ns}/{path:key}": READ,
    "PUT /kv/{ns}/{path:key}": WRITE,
    "DELETE /kv/{ns}/{path:key}": WRITE,
    "GET /resources/kv/namespaces": READ,
    "POST /resources/kv/list": READ,
    # Locks: get reads; acquire, renew and release write.
    "POST /locks": READ,
    # Timers: a cancel is a timer write.
    "POST /timers": WRITE,
    "DELETE /timers/{queue}/{path:timer_key}": WRITE,
    "GET /timers/{queue}/{path:timer_key}": READ,
    "GET /timers/{queue}": READ,
    "POST /transaction": WRITE,
    # The message log.
    "POST /configure": WRITE,
    "POST /push": WRITE,
    "GET /pop/queue/{queue}": WRITE,
    "GET /pop/queue/{queue}/partition/{partition}": WRITE,
    "GET /pop": WRITE,
    "POST /ack": WRITE,
    "POST /ack/batch": WRITE,
    "POST /lease/{lease_id}/extend": WRITE,
    "GET /resources/queues": READ,
    "GET /resources/queues/{queue}": READ,
    "GET /resources/queues/{queue}/depth": READ,
    "DELETE /resources/queues/{queue}": ADMIN,
    "GET /resources/overview": READ,
    "GET /dlq": READ,
    # Status and metrics.
    "GET /status": READ,
    "GET /status/queues": READ,
    "GET /status/queues/{name}": READ,
    "GET /status/analytics": READ,
    "POST /stats/refresh": WRITE,
    "GET /analytics/system-metrics": READ,
    "GET /analytics/worker-metrics": READ,
    # Offset reads, consumer groups, traces, browsing.
    "POST /fetch": READ,
    "POST /partitions/changed": READ,
    "GET /consumer-groups": READ,
    "GET /consumer-groups/lagging": READ,
    "GET /consumer-groups/{group}": READ,
    "DELETE /consumer-groups/{group}": ADMIN,
    "POST /consumer-groups/{group}/subscription": WRITE,
    "DELETE /consumer-groups/{group}/queues/{queue}": ADMIN,
    "POST /consumer-groups/{group}/queues/{queue}/seek": WRITE,
    "POST /traces": WRITE,
    "GET /traces/names": READ,
    "GET /traces/by-name/{name}": READ,
    "GET /traces/{partition_id}/{transaction_id}": READ,
    "GET /resources/namespaces": READ,
    "GET /resources/tasks": READ,
    "GET /resources/partitions": READ,
    "GET /messages": READ,
    "GET /messages/{partition_id}/{transaction_id}": READ,
    "DELETE /messages/{partition_id}/{transaction_id}": ADMIN,
    "POST /messages/{partition_id}/{transaction_id}/retry": WRITE,
    "POST /messages/{partition_id}/{transaction_id}/dlq": WRITE,
    # Streams (api/streams.py, served beside /api/v1 with full paths): a
    # worker registers, reads its state and commits cycles.
    "POST /streams/v1/queries": WRITE,
    "POST /streams/v1/state/get": READ,
    "POST /streams/v1/cycle": WRITE,
    # Ephemeral queues: producers and consumers write; deleting a queue
    # (its declaration too) is admin, as for a durable queue.
    "POST /ephemeral/configure": WRITE,
    "POST /ephemeral/reset": WRITE,
    "DELETE /ephemeral/queue/{path:queue}": ADMIN,
    "POST /ephemeral/push": WRITE,
    "GET /ephemeral/pop": WRITE,
    "POST /ephemeral/ack": WRITE,
    "GET /ephemeral/queues": READ,
    "GET /ephemeral/queues/{path:queue}/depth": READ,
}


#: KV commands that change a key. ``check`` is not one: it writes nothing
#: and tells no more than a ``get`` (the rate limit still counts it a write).
_KV_CHANGES = (kv.KVPut, kv.KVDelete, kv.KVIncr)


def kv_call_needs(ops: Sequence[kv.KVOp]) -> TokenScope:
    """``POST /kv``: ``write`` when any operation changes a key, else ``read``."""
    return WRITE if any(isinstance(op, _KV_CHANGES) for op in ops) else READ


def locks_call_needs(ops: Iterable[Any]) -> TokenScope:
    """``POST /locks``: ``read`` when every operation is a ``get``, else ``write``."""
    return READ if all(op.op == "get" for op in ops) else WRITE


def require(request: HttpRequest, need: TokenScope) -> None:
    """Raise ``Forbidden`` unless the caller's token (``request.auth``) covers ``need``."""
    scope: TokenScope = request.auth.scope  # type: ignore[attr-defined]
    if not scope.covers(need):
        raise refusal(scope, need)


class ScopedRouter(Router):
    """A router whose every route gets the bearer check its row in ``ROUTES`` names.

    Each route also needs a row in ``grants.ROUTES`` (how it meets a
    token's grants), which the OpenAPI document names (``x-token-grants``).

    Through ninja's public ``auth=``: the check of the row's scope, async
    for an async view (the token cache on the loop). A route declared with
    an ``auth=`` of its own keeps it. Raise ``ImproperlyConfigured`` for a
    route without a row, or one view serving routes of different scopes.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        #: "METHOD /path" of every route declared here (``check`` reads it).
        self.routes: set[str] = set()

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
            raise ImproperlyConfigured(f"{missing[0]} has no scope in queenadmin/api/scopes.py")
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
            auth = check_for(need, is_async=inspect.iscoroutinefunction(view_func))
        documented = BY_OPERATION if any(r in PER_OPERATION for r in routes) else need.value
        openapi_extra = {**(openapi_extra or {}), OPENAPI_KEY: documented, grants.OPENAPI_KEY: rule}
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
