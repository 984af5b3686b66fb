"""The dashboard's views, one module per page.

Each page's template (``templates/queenadmin/<page>.html``) names its live
regions as partials (django-template-partials), so the full page, an htmx
request and a websocket push render the same HTML (``dashboard/live.py``).
Importing this package registers every live page.
"""

from __future__ import annotations

from queenadmin.dashboard.views import audit, kv, locks, overview, queues, search, timers

__all__ = ["audit", "kv", "locks", "overview", "queues", "search", "timers"]
