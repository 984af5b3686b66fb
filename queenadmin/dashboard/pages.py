"""Every live page of the dashboard: the registry the websocket serves.

A page is live when it is in ``PAGES``: ``routing.py`` gives each a
``/ws/<name>/`` route and ``consumers.DashboardConsumer`` looks the page up
here. How to write a live page: docs/design.md, "The dashboard's live pages".
"""

from __future__ import annotations

from queenadmin.dashboard import live
from queenadmin.dashboard.views import audit, deadletters, ephemeral, kv, locks, messages, overview, queues, timers

#: Every live page by name (its ``/ws/<name>/`` path).
PAGES: dict[str, live.LivePage] = live.registry(
    [
        overview.OVERVIEW,
        queues.QUEUES,
        queues.QUEUE,
        deadletters.DLQ,
        ephemeral.EPHEMERAL,
        messages.QUEUE_LEASES,
        messages.QUEUE_MESSAGE,
        locks.LOCKS,
        timers.TIMERS,
        kv.KV,
        kv.KV_KEYS,
        kv.KV_KEY,
        audit.AUDIT,
    ]
)
