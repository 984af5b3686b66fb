"""Where ephemeral queues live: one interface, one class per database."""

from __future__ import annotations

from collections.abc import Callable

from queenadmin.domain.ephemeral.store.base import (
    Delivery,
    Due,
    GroupGauge,
    PartitionGauge,
    QueueRow,
    Store,
)
from queenadmin.domain.ephemeral.store.postgres import PostgresStore
from queenadmin.domain.ephemeral.store.sqlite import SqliteStore
from queenadmin.plumbing import db

__all__ = [
    "Delivery",
    "Due",
    "GroupGauge",
    "PartitionGauge",
    "PostgresStore",
    "QueueRow",
    "SqliteStore",
    "Store",
    "store",
]

store: Callable[[], Store] = db.by_vendor(postgres=PostgresStore(), sqlite=SqliteStore())
