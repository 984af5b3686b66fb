from __future__ import annotations

from queenadmin.models.auth import WRITE_ONLY_SCOPE, ApiToken, AuditEntry, TokenScope
from queenadmin.models.ephemeral import (
    EphemeralConfig,
    EphemeralCursor,
    EphemeralLease,
    EphemeralMessage,
    EphemeralPartition,
    EphemeralQueue,
)
from queenadmin.models.kv import KVEntry, KVNamespaceCount, KVVersion, VersionCounter
from queenadmin.models.process import ProcessSample
from queenadmin.models.queues import (
    AttentionThreshold,
    ConsumerCursor,
    ConsumerGroup,
    DeadLetter,
    DeadLetterReplay,
    GroupSample,
    Message,
    Partition,
    Queue,
    QueueSample,
    QueueSampleTotal,
    Trace,
    TraceName,
    TraceNameSummary,
)
from queenadmin.models.streams import StreamQuery, StreamState
from queenadmin.models.timers import Timer

__all__ = [
    "WRITE_ONLY_SCOPE",
    "ApiToken",
    "AttentionThreshold",
    "AuditEntry",
    "ConsumerCursor",
    "ConsumerGroup",
    "DeadLetter",
    "DeadLetterReplay",
    "EphemeralConfig",
    "EphemeralCursor",
    "EphemeralLease",
    "EphemeralMessage",
    "EphemeralPartition",
    "EphemeralQueue",
    "GroupSample",
    "KVEntry",
    "KVNamespaceCount",
    "KVVersion",
    "Message",
    "Partition",
    "ProcessSample",
    "Queue",
    "QueueSample",
    "QueueSampleTotal",
    "StreamQuery",
    "StreamState",
    "Timer",
    "TokenScope",
    "Trace",
    "TraceName",
    "TraceNameSummary",
    "VersionCounter",
]
