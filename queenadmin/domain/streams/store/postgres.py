"""Stream state on PostgreSQL: a transaction-scoped advisory lock per (query, partition)."""

from __future__ import annotations

from uuid import UUID

from django.db import connection

from queenadmin.domain.streams.store.base import Store
from queenadmin.plumbing.db import pg_run

#: First argument of the two-int advisory lock form for stream cycles
#: (the KV store's key locks use 0x51AD, capped queues 0x51AD_0002).
CYCLE_LOCK_CLASS = 0x51AD_0003


class PostgresStore(Store):
    def lock_partition(self, query_id: UUID, partition_id: int) -> None:
        assert connection.in_atomic_block
        # Transaction-scoped, so it is safe behind a transaction pooler.
        pg_run("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [CYCLE_LOCK_CLASS, f"{query_id}/{partition_id}"])
