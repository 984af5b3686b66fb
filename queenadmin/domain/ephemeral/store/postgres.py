"""Ephemeral rows on PostgreSQL: the queue row locked, bulk writes through arrays.

The content tables are ``UNLOGGED`` (migration 0018): no WAL, so a commit
that touched only them does not wait for a WAL flush, and PostgreSQL
empties them after a crash.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection

from queenadmin.domain.ephemeral.store.base import L, M, Store, _run


class PostgresStore(Store):
    FOR_UPDATE = " FOR UPDATE"

    def insert_messages(
        self, queue: str, partition: str, first_seq: int, payloads: Sequence[str], sizes: Sequence[int], now_ms: int
    ) -> None:
        assert connection.in_atomic_block
        _run(
            f'INSERT INTO {M} (queue, seq, "partition", payload, size, created_at_ms) '
            "SELECT %s, %s + n - 1, %s, p, z, %s FROM unnest(%s::text[], %s::int[]) WITH ORDINALITY AS t(p, z, n)",
            [queue, first_seq, partition, now_ms, list(payloads), list(sizes)],
        )

    def add_leases(self, queue: str, group: str, items: Sequence[tuple[int, str]], expires_at_ms: int) -> None:
        assert connection.in_atomic_block
        if not items:
            return
        _run(
            f'INSERT INTO {L} (queue, seq, consumer_group, "partition", attempts, expires_at_ms) '
            "SELECT %s, s, %s, p, 1, %s FROM unnest(%s::bigint[], %s::text[]) AS t(s, p) "
            "ON CONFLICT (queue, seq, consumer_group) DO UPDATE SET attempts = 1, expires_at_ms = EXCLUDED.expires_at_ms",
            [queue, group, expires_at_ms, [s for s, _ in items], [p for _, p in items]],
        )
