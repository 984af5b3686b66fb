from __future__ import annotations

from queenadmin.models.auth import ApiToken, AuditEntry, TokenScope
from queenadmin.models.ephemeral import (
    EphemeralConfig,
    EphemeralCursor,
    EphemeralLease,
    EphemeralMessage,
    EphemeralPartition,
    EphemeralQueue,
)
from queenadmin.models.kv import KVEntry, KVVersion, VersionCounter
from queenadmin.models.process import ProcessSample
from queenadmin.models.queues import (
    ConsumerCursor,
    ConsumerGroup,
    DeadLetter,
    Message,
    Partition,
    Queue,
    QueueSample,
    Trace,
    TraceName,
    TraceNameSummary,
)
from queenadmin.models.streams import StreamQuery, StreamState
from queenadmin.models.timers import Timer

__all__ = [
    "ApiToken",
    "AuditEntry",
    "ConsumerCursor",
    "ConsumerGroup",
    "DeadLetter",
    "EphemeralConfig",
    "EphemeralCursor",
    "EphemeralLease",
    "EphemeralMessage",
    "EphemeralPartition",
    "EphemeralQueue",
    "KVEntry",
    "KVVersion",
    "Message",
    "Partition",
    "ProcessSample",
    "Queue",
    "QueueSample",
    "StreamQuery",
    "StreamState",
    "Timer",
    "TokenScope",
    "Trace",
    "TraceName",
    "TraceNameSummary",
    "VersionCounter",
]
