"""Consumer heartbeats for tests, as queen-mq 2.6.0's ``supervision()`` writes them.

The status document is the official client's own (``Supervision.document``);
the two KV keys around it are written as its ``publish`` writes them (read
from ``queen/consumer/supervision.py``: the same namespace, keys, head and
chunk), through the KV domain, at a chosen time.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime
from typing import Any

from queen.consumer.supervision import Supervision

from queenadmin.domain.kv import kv_put

NAMESPACE = "queen-supervisor"
FORMAT = "queen.supervisor.remote-status/v1"


def client_document(
    *,
    queue: str | None = "orders",
    group: str | None = "billing",
    concurrency: int = 4,
    state: str = "running",
    namespace: str | None = None,
    task: str | None = None,
) -> tuple[str, dict[str, Any]]:
    """(instance id, status document) of a supervised ``consume`` of the real client."""
    options = {"queue": queue, "group": group, "concurrency": concurrency, "namespace": namespace, "task": task}
    supervision = Supervision(None, {"group": "billing-app"}, options)
    return supervision.id, supervision.document(state)


def write_beat(
    *,
    now: datetime,
    application: str = "billing-app",
    instance: str | None = None,
    document: Any = None,
    head: Any = None,
    chunks: list[Any] | None = None,
    ttl: int = 60,
    **options: Any,
) -> str:
    """Store one heartbeat at ``now``; its slot (``application/instance``).

    By default the real client's document for ``options``; ``document``
    replaces it (any JSON value, or ``bytes`` as the chunk's raw data),
    ``head`` and ``chunks`` replace the stored values themselves.
    """
    made_id, made = client_document(**options)
    instance = instance or made_id
    document = made if document is None else document
    raw = document if isinstance(document, bytes) else json.dumps(document).encode()
    write = "a" * 32
    slot = f"{application}/{instance}"
    if head is None:
        head = {"format": FORMAT, "write": write, "chunks": 1, "bytes": len(raw)}
    if chunks is None:
        chunks = [{"write": write, "index": 0, "data": base64.b64encode(raw).decode("ascii")}]
    kv_put(namespace=NAMESPACE, key=f"{slot}/head", value=head, ttl=ttl, now=now)
    for index, chunk in enumerate(chunks):
        kv_put(namespace=NAMESPACE, key=f"{slot}/chunk/{index:04d}", value=chunk, ttl=ttl, now=now)
    return slot
