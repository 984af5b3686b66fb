"""Pop, ack and lease extend: the consumer side of the log.

A consumer group has one cursor row per partition. ``committed_offset``
says everything up to it is done; the one leased batch is
``committed_offset + 1 .. batch_last`` under ``lease_id`` until
``leased_until``. So one batch per (partition, group) is out at a time,
FIFO holds per partition, and an expired lease makes the same offsets
claimable again with ``deliveryAttempt + 1``.

Every claim starts at ``committed_offset + 1``, so ``delivery_runs`` (how
many times each pending offset went out) only grows by whole prefixes and
is trimmed as the cursor advances: ``deliveryAttempt`` is exact per message
however batch sizes, partial acks and redeliveries interleave.

- ``commands``: ``PopRequest``, ``AckItem`` and the results;
- ``pop``: the claim (``queue_claim``) and the group's conflation policy;
- ``ack``: ack, lease extend and a transaction's positions.
"""

from __future__ import annotations

from queenadmin.domain.queues.consume.ack import (
    BAD_LEASE,
    UNRESOLVABLE,
    queue_ack,
    queue_ack_batch_in_txn,
    queue_ack_in_txn,
    queue_lease_extend,
    queue_lease_extend_in_txn,
    queue_position_in_txn,
)
from queenadmin.domain.queues.consume.commands import (
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
)
from queenadmin.domain.queues.consume.pop import queue_claim, queue_claim_in_txn, queue_conflation_policy

__all__ = [
    "ACK_STATUSES",
    "BAD_LEASE",
    "UNRESOLVABLE",
    "AckItem",
    "AckOutcome",
    "AckStatus",
    "Claim",
    "ConflationPolicy",
    "Delivered",
    "LeaseExtension",
    "PopRequest",
    "SubscriptionMode",
    "queue_ack",
    "queue_ack_batch_in_txn",
    "queue_ack_in_txn",
    "queue_claim",
    "queue_claim_in_txn",
    "queue_conflation_policy",
    "queue_lease_extend",
    "queue_lease_extend_in_txn",
    "queue_position_in_txn",
]
