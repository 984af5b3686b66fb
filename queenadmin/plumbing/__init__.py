"""The ground floor: plumbing every layer may use, importing none of them.

- ``db``: the database seam (the vendor, the time adapters, the JSON text
  we store, statements prepared on the server, the pooler's rules).
- ``compat``: every private name of Django, uvicorn and
  prometheus_client that queenadmin relies on, each behind a function.
- ``middleware``: the sync/async middleware base ours share, and the
  protocol's answer to a body over its limit.
- ``files``: the data folder and its private files (no Django imports:
  ``settings.py`` uses them before Django is configured).

``tests/unit/test_layers.py`` keeps it there: no module here imports one
from a layer above.
"""

from __future__ import annotations

#: The ASGI scope key where ``serve``'s protocol (``server.httpproto``)
#: notes when a request began to arrive (event-loop time);
#: ``server.handlers.PopHandler`` sets it for other servers. A long-poll
#: pop's timeout runs from then (``api.queues``).
ARRIVED_KEY = "queenadmin.arrived"
