"""Ephemeral rows on SQLite: the same tables in the database file.

An IMMEDIATE transaction holds the database's one write lock from BEGIN,
so the queue row needs no lock of its own. The tables are ordinary ones:
on SQLite the contents survive a restart of the (embedded, one-process)
server; a reset or delete empties them.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection

from queenadmin.domain.ephemeral.store.base import L, M, Store


class SqliteStore(Store):
    def insert_messages(
        self, queue: str, partition: str, first_seq: int, payloads: Sequence[str], sizes: Sequence[int], now_ms: int
    ) -> None:
        assert connection.in_atomic_block
        with connection.cursor() as cursor:
            cursor.executemany(
                f'INSERT INTO {M} (queue, seq, "partition", payload, size, created_at_ms) VALUES (%s, %s, %s, %s, %s, %s)',
                [
                    (queue, first_seq + i, partition, p, z, now_ms)
                    for i, (p, z) in enumerate(zip(payloads, sizes, strict=True))
                ],
            )

    def add_leases(self, queue: str, group: str, items: Sequence[tuple[int, str]], expires_at_ms: int) -> None:
        assert connection.in_atomic_block
        with connection.cursor() as cursor:
            cursor.executemany(
                f'INSERT INTO {L} (queue, seq, consumer_group, "partition", attempts, expires_at_ms) '
                "VALUES (%s, %s, %s, %s, 1, %s) "
                "ON CONFLICT (queue, seq, consumer_group) DO UPDATE SET attempts = 1, expires_at_ms = EXCLUDED.expires_at_ms",
                [(queue, s, group, p, expires_at_ms) for s, p in items],
            )
