"""The message log: the only writer of queues, partitions, messages,
cursors and dead letters. Callers import this package
(``from queenadmin.domain import queues``); the submodules are:

- ``push``: append with dedup (``queue_push``);
- ``consume``: claim (pop), ack, lease extend;
- ``lifecycle``: create or configure a queue, delete one;
- ``retention``: delete old messages, move each partition's log start;
- ``stats``: the reads: depth, queue lists, the overview, the DLQ;
- ``history``: statistics over time (``queue_series``, ``queues_series``, ``stats_refresh``);
  ``sampler`` is the loop that samples them;
- ``reads``: reads by offset (``queue_fetch``) and partition discovery;
- ``browse``: the operator's reads: namespaces, tasks, partitions,
  consumer groups, messages one by one;
- ``groups``: consumer-group delete, seek and re-subscribe;
- ``operator``: an operator's actions, audited: a queue's options
  (``configure``), a group's seek, reset and delete and a queue purge
  (``recovery``), DLQ replay and purge (``dlq``), and one message's delete,
  retry and move to the DLQ (``messages``);
- ``leases``: the operator's reads of message leases (holders masked) and
  of one message's delivery state per consumer group;
- ``traces``: message trace events (the one writer of ``Trace``);
- ``options``: option defaults, the rules on values, merging;
- ``delivery``: the per-offset delivery counts a cursor keeps;
- ``refs``, ``ids``: a queue as the writers read it; UUIDv7 ids;
- ``wakeups``: how a push wakes long-poll pops, here and on other replicas;
- ``store``: every SQL statement of the above, one class per database
  (``store/base.py`` the interface and the shared statements, one module
  per database the rest); the modules above call its typed methods and
  hold no SQL and never ask which database they run on.

Every function takes typed commands (``PushItem``, ``PopRequest``,
``AckItem``, ``ConfigureRequest``...) built by the caller; the protocol's
JSON is parsed in ``api/wire/queues.py``. Every write comes in two forms:
``queue_<verb>`` opens its own durable transaction, and
``queue_<verb>_in_txn`` runs inside the caller's (asserting one is open)
at a time the caller gives, so several writes can share one transaction.
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
    queues_series,
    stats_refresh,
)
from queenadmin.domain.queues.ids import is_uuid, uuid7
from queenadmin.domain.queues.lifecycle import (
    ConfigureRequest,
    QueueConfig,
    queue_configure,
    queue_configure_in_txn,
    queue_delete,
    queue_delete_in_txn,
)
from queenadmin.domain.queues.operator import queue_operator_configure
from queenadmin.domain.queues.options import QueueOptions
from queenadmin.domain.queues.push import (
    DEFAULT_PARTITION,
    PushItem,
    PushResult,
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
    "queue_stats",
    "queues_series",
    "stats_refresh",
    "uuid7",
]
