"""Every route of the API (``/api/v1``, and the streams routes served
beside it): the token scope it needs and how it meets a token's grants.

One row per route, so a new route names both at once. ``scopes.py``
enforces the scope column, ``grants.py`` says what each rule means and
enforces it; ``scopes.ScopedRouter`` refuses a route without a row, and
``scopes.check`` a row without a route.
"""

from __future__ import annotations

from typing import Literal

from queenadmin.models import TokenScope

READ, WRITE, ADMIN = TokenScope.READ, TokenScope.WRITE, TokenScope.ADMIN

#: How a route meets a token's grants (``grants.py``'s docstring).
Rule = Literal["named", "filtered", "store-wide", "none"]
NAMED: Rule = "named"
FILTERED: Rule = "filtered"
EVERY: Rule = "store-wide"
NONE: Rule = "none"

#: "METHOD /path" (as the routers spell it) -> (the scope it needs, its grant rule).
ROUTES: dict[str, tuple[TokenScope, Rule]] = {
    # KV: reads, writes; a single-key DELETE is a KV write, not a resource.
    "POST /kv": (READ, NAMED),
    "GET /kv/{ns}/{path:key}": (READ, NAMED),
    "PUT /kv/{ns}/{path:key}": (WRITE, NAMED),
    "DELETE /kv/{ns}/{path:key}": (WRITE, NAMED),
    "GET /resources/kv/namespaces": (READ, FILTERED),
    "POST /resources/kv/list": (READ, NAMED),
    # Locks: get reads; acquire, renew and release write.
    "POST /locks": (READ, NAMED),
    # Timers: a cancel is a timer write.
    "POST /timers": (WRITE, NAMED),
    "DELETE /timers/{queue}/{path:timer_key}": (WRITE, NAMED),
    "GET /timers/{queue}/{path:timer_key}": (READ, NAMED),
    "GET /timers/{queue}": (READ, NAMED),
    "POST /transaction": (WRITE, NAMED),
    # The message log.
    "POST /configure": (WRITE, NAMED),
    "POST /push": (WRITE, NAMED),
    "GET /pop/queue/{queue}": (WRITE, NAMED),
    "GET /pop/queue/{queue}/partition/{partition}": (WRITE, NAMED),
    "GET /pop": (WRITE, EVERY),
    "POST /ack": (WRITE, NAMED),
    "POST /ack/batch": (WRITE, NAMED),
    "POST /lease/{lease_id}/extend": (WRITE, NAMED),
    "GET /resources/queues": (READ, FILTERED),
    "GET /resources/queues/{queue}": (READ, NAMED),
    "GET /resources/queues/{queue}/depth": (READ, NAMED),
    "DELETE /resources/queues/{queue}": (ADMIN, NAMED),
    "GET /resources/overview": (READ, EVERY),
    # Named with ?queue=; without it, a total over every queue.
    "GET /dlq": (READ, NAMED),
    # Status and metrics.
    "GET /status": (READ, FILTERED),
    "GET /status/queues": (READ, FILTERED),
    "GET /status/queues/{name}": (READ, NAMED),
    "GET /status/analytics": (READ, FILTERED),
    "POST /stats/refresh": (WRITE, EVERY),
    "GET /analytics/system-metrics": (READ, EVERY),
    "GET /analytics/worker-metrics": (READ, EVERY),
    # Offset reads, consumer groups, traces, browsing.
    "POST /fetch": (READ, NAMED),
    "POST /partitions/changed": (READ, NAMED),
    "GET /consumer-groups": (READ, FILTERED),
    "GET /consumer-groups/lagging": (READ, FILTERED),
    "GET /consumer-groups/{group}": (READ, FILTERED),
    "DELETE /consumer-groups/{group}": (ADMIN, EVERY),
    "POST /consumer-groups/{group}/subscription": (WRITE, EVERY),
    "DELETE /consumer-groups/{group}/queues/{queue}": (ADMIN, NAMED),
    "POST /consumer-groups/{group}/queues/{queue}/seek": (WRITE, NAMED),
    "POST /traces": (WRITE, NAMED),
    "GET /traces/names": (READ, EVERY),
    "GET /traces/by-name/{name}": (READ, FILTERED),
    "GET /traces/{partition_id}/{transaction_id}": (READ, NAMED),
    "GET /resources/namespaces": (READ, EVERY),
    "GET /resources/tasks": (READ, EVERY),
    "GET /resources/partitions": (READ, FILTERED),
    "GET /messages": (READ, FILTERED),
    "GET /messages/{partition_id}/{transaction_id}": (READ, NAMED),
    "DELETE /messages/{partition_id}/{transaction_id}": (ADMIN, NAMED),
    "POST /messages/{partition_id}/{transaction_id}/retry": (WRITE, NAMED),
    "POST /messages/{partition_id}/{transaction_id}/dlq": (WRITE, NAMED),
    # Streams (api/streams.py, served beside /api/v1 with full paths): a
    # worker registers, reads its state and commits cycles.
    # A stream's source and sink queues; state and cycles by the source
    # partition (a query's state lives only on its source's partitions).
    "POST /streams/v1/queries": (WRITE, NAMED),
    "POST /streams/v1/state/get": (READ, NAMED),
    "POST /streams/v1/cycle": (WRITE, NAMED),
    # Ephemeral queues: producers and consumers write; deleting a queue
    # needs admin, as for a durable one. They are queues: a grant on a
    # queue name covers both kinds.
    "POST /ephemeral/configure": (WRITE, NAMED),
    "POST /ephemeral/reset": (WRITE, NAMED),
    "DELETE /ephemeral/queue/{path:queue}": (ADMIN, NAMED),
    "POST /ephemeral/push": (WRITE, NAMED),
    "GET /ephemeral/pop": (WRITE, NAMED),
    "POST /ephemeral/ack": (WRITE, NAMED),
    "GET /ephemeral/queues": (READ, FILTERED),
    "GET /ephemeral/queues/{path:queue}/depth": (READ, NAMED),
}
