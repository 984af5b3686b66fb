"""The message log: the only writer of queues, partitions, messages,
cursors and dead letters. Callers import this package
(``from queenadmin.domain import queues``); what each submodule holds:
docs/design.md, "The message log's modules". SQL lives in ``store/`` only.

Every function takes typed commands (``PushItem``, ``PopRequest``, ...)
built by the caller. Every write comes in two forms: ``queue_<verb>``
opens its own durable transaction, and ``queue_<verb>_in_txn`` runs inside
the caller's (asserting one is open), so several writes share one.
"""

from __future__ import annotations

from queenadmin.domain.queues.consume import (
    ACK_STATUSES,
    AckItem,
    AckOutcome,
    AckStatus,
    Claim,
    ConflationPolicy,
    Delivered,
    LeaseExtension,
    PopRequest,
    SubscriptionMode,
    queue_ack,
    queue_ack_batch_in_txn,
    queue_ack_in_txn,
    queue_claim,
    queue_claim_in_txn,
    queue_conflation_policy,
    queue_lease_extend,
    queue_lease_extend_in_txn,
    queue_position_in_txn,
)
from queenadmin.domain.queues.history import (
    QueueCounters,
    SamplePoint,
    queue_counters,
    queue_series,
    queues_depth_series,
    stats_refresh,
)
from queenadmin.domain.queues.ids import is_uuid, uuid7
from queenadmin.domain.queues.lifecycle import (
    ConfigureRequest,
    QueueConfig,
    QueueSettings,
    queue_configure,
    queue_configure_in_txn,
    queue_delete,
    queue_delete_in_txn,
    queue_settings,
)
from queenadmin.domain.queues.operator import queue_operator_configure
from queenadmin.domain.queues.options import QueueOptions
from queenadmin.domain.queues.push import (
    DEFAULT_PARTITION,
    PushItem,
    PushResult,
    queue_appended_in_txn,
    queue_dead_letter_in_txn,
    queue_push,
    queue_push_in_txn,
)
from queenadmin.domain.queues.retention import RetentionSweep, queue_retention_sweep
from queenadmin.domain.queues.stats import (
    DeadLetterQuery,
    DeadLetterRow,
    Overview,
    PartitionDepth,
    QueueStats,
    QueueTotals,
    dlq_list,
    queue_list,
    queue_overview,
    queue_stats,
)
from queenadmin.models.queues import NEVER_LOGGED, QUEUE_MODE

__all__ = [
    "ACK_STATUSES",
    "DEFAULT_PARTITION",
    "NEVER_LOGGED",
    "QUEUE_MODE",
    "AckItem",
    "AckOutcome",
    "AckStatus",
    "Claim",
    "ConfigureRequest",
    "ConflationPolicy",
    "DeadLetterQuery",
    "DeadLetterRow",
    "Delivered",
    "LeaseExtension",
    "Overview",
    "PartitionDepth",
    "PopRequest",
    "PushItem",
    "PushResult",
    "QueueConfig",
    "QueueCounters",
    "QueueOptions",
    "QueueSettings",
    "QueueStats",
    "QueueTotals",
    "RetentionSweep",
    "SamplePoint",
    "SubscriptionMode",
    "dlq_list",
    "is_uuid",
    "queue_ack",
    "queue_ack_batch_in_txn",
    "queue_ack_in_txn",
    "queue_appended_in_txn",
    "queue_claim",
    "queue_claim_in_txn",
    "queue_configure",
    "queue_configure_in_txn",
    "queue_conflation_policy",
    "queue_counters",
    "queue_dead_letter_in_txn",
    "queue_delete",
    "queue_delete_in_txn",
    "queue_lease_extend",
    "queue_lease_extend_in_txn",
    "queue_list",
    "queue_operator_configure",
    "queue_overview",
    "queue_position_in_txn",
    "queue_push",
    "queue_push_in_txn",
    "queue_retention_sweep",
    "queue_series",
    "queue_settings",
    "queue_stats",
    "queues_depth_series",
    "stats_refresh",
    "uuid7",
]
