"""The message log: the only writer of queues, partitions, messages,
cursors and dead letters. See the submodules:

- ``push``: append with dedup;
- ``consume``: claim (pop), ack, lease extend;
- ``admin``: configure, delete, depth and the other reads;
- ``wakeups``: how a push wakes long-poll pops, here and on other replicas.
"""

from __future__ import annotations

from queenadmin.domain.queues.admin import (
    DeadLetterRow,
    PartitionDepth,
    QueueConfig,
    QueueStats,
    dlq_list,
    queue_configure,
    queue_delete,
    queue_list,
    queue_stats,
)
from queenadmin.domain.queues.common import QUEUE_MODE, Delivered, uuid7
from queenadmin.domain.queues.consume import (
    AckItem,
    AckOutcome,
    Claim,
    LeaseExtension,
    PopRequest,
    ack_in_transaction,
    queue_ack,
    queue_claim,
    queue_lease_extend,
)
from queenadmin.domain.queues.push import PushItem, PushResult, parse_push_items, push_in_transaction, queue_push

__all__ = [
    "QUEUE_MODE",
    "AckItem",
    "AckOutcome",
    "Claim",
    "DeadLetterRow",
    "Delivered",
    "LeaseExtension",
    "PartitionDepth",
    "PopRequest",
    "PushItem",
    "PushResult",
    "QueueConfig",
    "QueueStats",
    "ack_in_transaction",
    "dlq_list",
    "parse_push_items",
    "push_in_transaction",
    "queue_ack",
    "queue_claim",
    "queue_configure",
    "queue_delete",
    "queue_lease_extend",
    "queue_list",
    "queue_push",
    "queue_stats",
    "uuid7",
]
