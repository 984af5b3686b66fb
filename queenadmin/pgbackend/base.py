"""Django's PostgreSQL backend, health-checking only connections left idle.

With ``CONN_HEALTH_CHECKS`` Django runs ``SELECT 1`` before the first query
of every request on a persistent connection: half the statements of a
single KV put, and a quarter of PostgreSQL's CPU per call (issue 15). A
connection that ran a statement less than ``DB_HEALTH_CHECK_IDLE_SECONDS``
ago is taken as alive. If the server went away in that window, the one
request that finds out fails; the error marks the connection and Django's
end-of-request check (``close_if_unusable_or_obsolete``, kept, as are the
request signals) closes it, so the connection's next request reconnects.
Pooled connections (``OPTIONS["pool"]``) keep Django's check: the wrapper
holds a different one each time.
"""

from __future__ import annotations

import time
from typing import Any

from django.db.backends.postgresql import base

from queenadmin.conf import settings


class DatabaseWrapper(base.DatabaseWrapper):
    #: ``time.monotonic()`` when the connection last gave out a cursor.
    used_at: float = float("-inf")

    def close_if_health_check_failed(self) -> None:
        if (
            self.connection is not None
            and self.health_check_enabled  # type: ignore[attr-defined]
            and not self.health_check_done  # type: ignore[has-type]
            and not self.settings_dict["OPTIONS"].get("pool")
            and time.monotonic() - self.used_at < settings.DB_HEALTH_CHECK_IDLE_SECONDS
        ):
            self.health_check_done = True
            return
        super().close_if_health_check_failed()

    def raw_connection(self) -> Any:
        """The psycopg connection, opened and health-checked as ``cursor()``
        would, without making a Django cursor (``db.server_cursor``)."""
        self.close_if_health_check_failed()
        self.ensure_connection()
        self.validate_thread_sharing()
        self.used_at = time.monotonic()
        return self.connection

    def create_cursor(self, name: Any = None) -> Any:
        # Every cursor, plain or named (chunked), is made here, after the
        # health check and the connect.
        cursor = super().create_cursor(name)
        self.used_at = time.monotonic()
        return cursor
