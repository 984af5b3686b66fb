"""Ephemeral queues (Queen's ``/api/v1/ephemeral``): ``ops`` holds the
rules, ids and results, ``calls`` configure, push, take, ack and the
reads, ``store`` every statement, one class per database. Callers import
this package."""

from __future__ import annotations

from queenadmin.domain.ephemeral.calls import (
    eph_ack,
    eph_collect_idle,
    eph_configure,
    eph_delete,
    eph_depth,
    eph_push,
    eph_queues,
    eph_reset,
    eph_take,
)
from queenadmin.domain.ephemeral.ops import (
    DEFAULT_PARTITION,
    QUEUE_MODE,
    AckItem,
    Deleted,
    Delivered,
    DepthView,
    Options,
    QueueView,
    Take,
    check_options,
    effective,
    now_ms,
    wake_key,
)

__all__ = [
    "DEFAULT_PARTITION",
    "QUEUE_MODE",
    "AckItem",
    "Deleted",
    "Delivered",
    "DepthView",
    "Options",
    "QueueView",
    "Take",
    "check_options",
    "effective",
    "eph_ack",
    "eph_collect_idle",
    "eph_configure",
    "eph_delete",
    "eph_depth",
    "eph_push",
    "eph_queues",
    "eph_reset",
    "eph_take",
    "now_ms",
    "wake_key",
]
