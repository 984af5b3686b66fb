"""Every route of the API (``/api/v1``, and the streams routes served
beside it): the token scope it needs, how it meets a token's grants, and
the kinds of resource it touches.

One row per route, so a new route names all three at once. ``scopes.py``
enforces the scope column, ``grants.py`` says what each rule means and
enforces it; ``scopes.ScopedRouter`` refuses a route without a row, and
``scopes.check`` a row without a route.

``touches`` names every kind of resource (``tokens.KINDS``) the route can
read or change, found from the request *or from stored state*: a message,
partition or lease reaches its stored queue; a stream query its stored
source and sink queues; a KV row of ``queen-locks`` its lock. A route's
grant check must cover each of them, so the rule can be checked from this
table alone: a route that touches nothing has the rule ``none``, every
other one ``named``, ``filtered`` or ``store-wide`` (``check_row``), and
``tests/api/test_route_walk.py`` calls every row with a token granted one
prefix of each kind it names against a resource outside that prefix:
403 for ``named`` and ``store-wide``, a filtered 200 otherwise, nothing
changed and nothing of the resource shown.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from queenadmin.domain.tokens import Kind
from queenadmin.models import TokenScope

READ, WRITE, ADMIN = TokenScope.READ, TokenScope.WRITE, TokenScope.ADMIN

#: How a route meets a token's grants (``grants.py``'s docstring).
Rule = Literal["named", "filtered", "store-wide", "none"]
NAMED: Rule = "named"
FILTERED: Rule = "filtered"
EVERY: Rule = "store-wide"
NONE: Rule = "none"

#: What a route touches (the kinds of resource, ``tokens.KINDS``).
NOTHING: tuple[Kind, ...] = ()
QUEUE: tuple[Kind, ...] = ("queue",)
KV: tuple[Kind, ...] = ("kv",)
#: A KV call can name ``queen-locks``, whose rows are the locks' permits.
KV_LOCK: tuple[Kind, ...] = ("kv", "lock")
LOCK: tuple[Kind, ...] = ("lock",)
TIMER: tuple[Kind, ...] = ("timer",)
#: A schedule also pushes onto the queue of the timer's name when it fires.
TIMER_QUEUE: tuple[Kind, ...] = ("timer", "queue")
EVERY_KIND: tuple[Kind, ...] = ("queue", "kv", "lock", "timer")


class Route(NamedTuple):
    """A route's row: the scope it needs, its grant rule, what it touches."""

    scope: TokenScope
    rule: Rule
    touches: tuple[Kind, ...]


def check_row(route: str, row: Route) -> None:
    """Raise ``LookupError`` when ``row``'s rule cannot cover what it touches.

    A route that touches a resource must check grants (``named``,
    ``filtered`` or ``store-wide``); ``none`` is for one that touches none.
    """
    if (row.rule == NONE) != (not row.touches):
        raise LookupError(f"{route}: the rule {row.rule!r} does not fit what it touches {row.touches}")


#: The routes a JWT of Queen's ``write-only`` level may call: they push
#: and read nothing back (``domain/identity/jwt.py``).
WRITE_ONLY: frozenset[str] = frozenset({"POST /push", "POST /timers", "POST /ephemeral/push"})


#: "METHOD /path" (as the routers spell it) -> its row.
ROUTES: dict[str, Route] = {
    # KV: reads, writes; a single-key DELETE is a KV write, not a resource.
    "POST /kv": Route(READ, NAMED, KV_LOCK),
    "GET /kv/{ns}/{path:key}": Route(READ, NAMED, KV_LOCK),
    "PUT /kv/{ns}/{path:key}": Route(WRITE, NAMED, KV_LOCK),
    "DELETE /kv/{ns}/{path:key}": Route(WRITE, NAMED, KV_LOCK),
    "GET /resources/kv/namespaces": Route(READ, FILTERED, KV),
    "POST /resources/kv/list": Route(READ, NAMED, KV_LOCK),
    # History (issue 41): a key's versions read like the key.
    "GET /history/kv/{ns}/{path:key}": Route(READ, NAMED, KV),
    "GET /history/locks/{path:name}": Route(READ, NAMED, LOCK),
    # Locks: get reads; acquire, renew and release write.
    "POST /locks": Route(READ, NAMED, LOCK),
    # Timers: a cancel is a timer write.
    "POST /timers": Route(WRITE, NAMED, TIMER_QUEUE),
    "DELETE /timers/{queue}/{path:timer_key}": Route(WRITE, NAMED, TIMER),
    "GET /timers/{queue}/{path:timer_key}": Route(READ, NAMED, TIMER),
    "GET /timers/{queue}": Route(READ, NAMED, TIMER),
    "POST /transaction": Route(WRITE, NAMED, EVERY_KIND),
    # The message log.
    "POST /configure": Route(WRITE, NAMED, QUEUE),
    "POST /push": Route(WRITE, NAMED, QUEUE),
    "GET /pop/queue/{queue}": Route(WRITE, NAMED, QUEUE),
    "GET /pop/queue/{queue}/partition/{partition}": Route(WRITE, NAMED, QUEUE),
    "GET /pop": Route(WRITE, EVERY, QUEUE),
    "POST /ack": Route(WRITE, NAMED, QUEUE),
    "POST /ack/batch": Route(WRITE, NAMED, QUEUE),
    "POST /lease/{lease_id}/extend": Route(WRITE, NAMED, QUEUE),
    "GET /resources/queues": Route(READ, FILTERED, QUEUE),
    "GET /resources/queues/{path:queue}": Route(READ, NAMED, QUEUE),
    "GET /resources/queues/{queue}/depth": Route(READ, NAMED, QUEUE),
    "DELETE /resources/queues/{path:queue}": Route(ADMIN, NAMED, QUEUE),
    # An operator's pause and resume of a queue, or of one group's pops of it.
    "POST /resources/queues/{queue}/pause": Route(ADMIN, NAMED, QUEUE),
    "POST /resources/queues/{queue}/resume": Route(ADMIN, NAMED, QUEUE),
    "POST /consumer-groups/{group}/queues/{queue}/pause": Route(ADMIN, NAMED, QUEUE),
    "POST /consumer-groups/{group}/queues/{queue}/resume": Route(ADMIN, NAMED, QUEUE),
    "GET /resources/overview": Route(READ, EVERY, QUEUE),
    # Named with ?queue=; without it, a total over every queue.
    "GET /dlq": Route(READ, NAMED, QUEUE),
    # Status and metrics.
    "GET /status": Route(READ, FILTERED, QUEUE),
    "GET /status/queues": Route(READ, FILTERED, QUEUE),
    "GET /status/queues/{name}": Route(READ, NAMED, QUEUE),
    "GET /status/analytics": Route(READ, FILTERED, QUEUE),
    "POST /stats/refresh": Route(WRITE, EVERY, QUEUE),
    "GET /analytics/system-metrics": Route(READ, EVERY, QUEUE),
    "GET /analytics/worker-metrics": Route(READ, EVERY, QUEUE),
    # Offset reads, consumer groups, traces, browsing.
    "POST /fetch": Route(READ, NAMED, QUEUE),
    "POST /partitions/changed": Route(READ, NAMED, QUEUE),
    "GET /consumer-groups": Route(READ, FILTERED, QUEUE),
    "GET /consumer-groups/lagging": Route(READ, FILTERED, QUEUE),
    "GET /consumer-groups/{path:group}": Route(READ, FILTERED, QUEUE),
    "DELETE /consumer-groups/{path:group}": Route(ADMIN, EVERY, QUEUE),
    "POST /consumer-groups/{group}/subscription": Route(WRITE, EVERY, QUEUE),
    "DELETE /consumer-groups/{group}/queues/{path:queue}": Route(ADMIN, NAMED, QUEUE),
    "POST /consumer-groups/{group}/queues/{queue}/seek": Route(WRITE, NAMED, QUEUE),
    "POST /traces": Route(WRITE, NAMED, QUEUE),
    "GET /traces/names": Route(READ, EVERY, QUEUE),
    "GET /traces/by-name/{path:name}": Route(READ, FILTERED, QUEUE),
    "GET /traces/{partition_id}/{transaction_id}": Route(READ, NAMED, QUEUE),
    "GET /resources/namespaces": Route(READ, EVERY, QUEUE),
    "GET /resources/tasks": Route(READ, EVERY, QUEUE),
    "GET /resources/partitions": Route(READ, FILTERED, QUEUE),
    "GET /messages": Route(READ, FILTERED, QUEUE),
    "GET /messages/{partition_id}/{transaction_id}": Route(READ, NAMED, QUEUE),
    "DELETE /messages/{partition_id}/{transaction_id}": Route(ADMIN, NAMED, QUEUE),
    "POST /messages/{partition_id}/{transaction_id}/retry": Route(WRITE, NAMED, QUEUE),
    "POST /messages/{partition_id}/{transaction_id}/dlq": Route(WRITE, NAMED, QUEUE),
    # Queen's DLQ replay: the dead letter's stored queue and the destination.
    "POST /dlq/{id}/replay": Route(WRITE, NAMED, QUEUE),
    # Streams (api/streams.py, served beside /api/v1 with full paths): a
    # worker registers, reads its state and commits cycles.
    # A stream's source and sink queues, those the body names and those
    # stored with the query of its name or id; state and cycles also by the
    # source partition (a query's state lives only on its source's partitions).
    "POST /streams/v1/queries": Route(WRITE, NAMED, QUEUE),
    "POST /streams/v1/state/get": Route(READ, NAMED, QUEUE),
    "POST /streams/v1/cycle": Route(WRITE, NAMED, QUEUE),
    # Ephemeral queues: producers and consumers write; deleting a queue
    # needs admin, as for a durable one. They are queues: a grant on a
    # queue name covers both kinds.
    "POST /ephemeral/configure": Route(WRITE, NAMED, QUEUE),
    "POST /ephemeral/reset": Route(WRITE, NAMED, QUEUE),
    "DELETE /ephemeral/queue/{path:queue}": Route(ADMIN, NAMED, QUEUE),
    "POST /ephemeral/push": Route(WRITE, NAMED, QUEUE),
    "GET /ephemeral/pop": Route(WRITE, NAMED, QUEUE),
    "POST /ephemeral/ack": Route(WRITE, NAMED, QUEUE),
    "GET /ephemeral/queues": Route(READ, FILTERED, QUEUE),
    "GET /ephemeral/queues/{path:queue}/depth": Route(READ, NAMED, QUEUE),
}
