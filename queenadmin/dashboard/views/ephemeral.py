"""``/ephemeral/``: every ephemeral queue with its gauges and effective options.

Read-only. Ephemeral writes broadcast no events (a push is meant to cost
one round trip), so the region goes stale by itself every
``REFRESH_SECONDS`` and the socket pushes it again.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.http import QueryDict

from queenadmin.dashboard import live
from queenadmin.dashboard.permissions import User
from queenadmin.dashboard.views.access import page_view
from queenadmin.domain import clock, ephemeral

#: How often the live page re-reads the gauges.
REFRESH_SECONDS = 5


def ephemeral_context(user: User, params: QueryDict) -> dict[str, Any]:
    views, cell = ephemeral.eph_queues()
    return {
        "queues": views,
        "cell_bytes": cell,
        "stale_at": clock.now() + timedelta(seconds=REFRESH_SECONDS),
        "refresh_seconds": REFRESH_SECONDS,
    }


EPHEMERAL = live.one_region_page(
    "ephemeral", "queenadmin/ephemeral.html", ephemeral_context, "eph-table", nav="ephemeral", perm="queues"
)
ephemeral_page = page_view(EPHEMERAL)
