"""The stream store interface, its rows, and what both databases share."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from django.db import connection

from queenadmin.domain.kv.store.base import prefix_range
from queenadmin.models import StreamState


@dataclass(frozen=True, slots=True)
class StateRow:
    """One key of a query's state on one partition, as stored."""

    key: str
    value_json: str
    ripe_at_ms: int | None
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class StateFilter:
    """Which rows a state read answers; the filters combine with AND."""

    #: Empty means every key.
    keys: tuple[str, ...] = ()
    key_prefix: str = ""
    #: Only rows whose window ended at or before this (ms).
    ripe_at_or_before: int | None = None


class Store:
    """State rows of (query, partition, key). Writes assert a transaction."""

    def lock_partition(self, query_id: UUID, partition_id: int) -> None:
        """Serialise the cycles of one (query, partition) until commit."""
        raise NotImplementedError

    def upsert(self, query_id: UUID, partition_id: int, rows: Sequence[StateRow]) -> None:
        assert connection.in_atomic_block
        if not rows:
            return
        StreamState.objects.bulk_create(
            [
                StreamState(
                    query_id=query_id,
                    partition_id=partition_id,
                    key=row.key,
                    value_json=row.value_json,
                    ripe_at_ms=row.ripe_at_ms,
                    updated_at=row.updated_at,
                )
                for row in rows
            ],
            update_conflicts=True,
            unique_fields=["query", "partition", "key"],
            update_fields=["value_json", "ripe_at_ms", "updated_at"],
        )

    def delete(self, query_id: UUID, partition_id: int, keys: Sequence[str]) -> None:
        assert connection.in_atomic_block
        if keys:
            StreamState.objects.filter(query_id=query_id, partition_id=partition_id, key__in=keys).delete()

    def delete_query(self, query_id: UUID) -> int:
        assert connection.in_atomic_block
        deleted, _ = StreamState.objects.filter(query_id=query_id).delete()
        return deleted

    def read(self, query_id: UUID, partition_id: int, which: StateFilter) -> list[StateRow]:
        rows = StreamState.objects.filter(query_id=query_id, partition_id=partition_id)
        if which.keys:
            rows = rows.filter(key__in=which.keys)
        if which.key_prefix:
            rows = rows.filter(prefix_range("key", which.key_prefix))
        if which.ripe_at_or_before is not None:
            rows = rows.filter(ripe_at_ms__lte=which.ripe_at_or_before)
        return [
            StateRow(key, value_json, ripe_at_ms, updated_at)
            for key, value_json, ripe_at_ms, updated_at in rows.order_by("key").values_list(
                "key", "value_json", "ripe_at_ms", "updated_at"
            )
        ]
