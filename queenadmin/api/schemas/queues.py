"""Message-log wire schemas (protocol.md sections 6 to 11).

The requests are declared once, in ``api/wire/queues.py`` and
``api/wire/resources.py`` (their parsers read the declarations and the
document shows them); the ``Out`` models are the exact answers, checked by
``tests/api/test_contract.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field, create_model

from queenadmin.api.schemas.common import (
    JSONNumber,
    JSONValue,
    MicrosZTime,
    WireOut,
)
from queenadmin.api.wire.answers import Answer, Key
from queenadmin.domain.queues.options import BOOL_OPTIONS, INT_OPTIONS

# -- answers ------------------------------------------------------------------


class QueueNotFoundOut(WireOut):
    """404 of the queue detail and depth reads."""

    error: Literal["Queue not found"]


#: Every option of a queue, defaults filled in (protocol 10): the domain's table.
QueueOptionsOut = create_model(
    "QueueOptionsOut",
    __base__=WireOut,
    __doc__="Every option of a queue, defaults filled in (protocol 10).",
    **dict.fromkeys(INT_OPTIONS, (int, ...)),  # type: ignore[call-overload]
    **dict.fromkeys(BOOL_OPTIONS, (bool, ...)),
)


class ConfigureOut(WireOut):
    configured: Literal[True]
    queueId: str
    partitionId: None
    queue: str
    namespace: str | None
    task: str | None
    storage: Literal["segments"]
    options: QueueOptionsOut


MESSAGE_COUNTS = Answer(
    "MessageCountsOut",
    total=int,
    pending=Key(int, "not yet completed, leased ones included"),
    processing=Key(int, "under a live lease"),
    completed=int,
    deadLetter=int,
)
if TYPE_CHECKING:
    MessageCountsOut = WireOut
else:
    MessageCountsOut = MESSAGE_COUNTS.model


class SegmentsOut(WireOut):
    segments: int
    messages: int


#: The pause fields (``domain/queues/operator/pause.py``): additive, so the
#: official client, which does not read them, is unaffected.
PAUSED = "every pop of the queue is paused (answers as an empty queue)"
PAUSED_GROUPS = "consumer groups whose pops of the queue are paused"


class QueueSummaryOut(WireOut):
    id: str
    name: str
    queue: str
    namespace: str | None
    task: str | None
    storage: Literal["segments"]
    partitions: int
    segments: SegmentsOut
    messages: MessageCountsOut
    retainedBytes: int
    options: QueueOptionsOut
    createdAt: MicrosZTime
    paused: bool = Field(description=PAUSED)
    pausedGroups: list[str] = Field(description=PAUSED_GROUPS)


class QueueListOut(WireOut):
    queues: list[QueueSummaryOut] = Field(description="newest first")
    kvRows: int
    kvBytes: int
    timerRows: int
    timerBytes: int


class QueueLaneOut(WireOut):
    id: str
    name: str
    queue: str
    partitions: int
    createdAt: MicrosZTime


class QueueLanesOut(WireOut):
    """``?stats=lanes``: the light form."""

    queues: list[QueueLaneOut]
    stats: Literal["lanes"]


class PartitionCountsOut(MessageCountsOut):
    failed: None


class CursorOut(WireOut):
    totalConsumed: int
    batchesConsumed: int


class PartitionDetailOut(WireOut):
    id: str
    name: str
    createdAt: MicrosZTime
    messages: PartitionCountsOut
    stats: PartitionCountsOut
    cursor: CursorOut
    lastActivity: MicrosZTime | None
    oldestMessage: MicrosZTime | None = Field(description="oldest message still pending for the slowest group")
    newestMessage: MicrosZTime | None
    retainedBytes: int


class QueueDetailOut(WireOut):
    id: str
    name: str
    namespace: str | None
    task: str | None
    createdAt: MicrosZTime
    options: QueueOptionsOut
    partitions: list[PartitionDetailOut]
    segments: SegmentsOut
    totals: MessageCountsOut
    retainedBytes: int
    paused: bool = Field(description=PAUSED)
    pausedGroups: list[str] = Field(description=PAUSED_GROUPS)


class PartitionDepthOut(WireOut):
    partition: str
    pending: int
    processing: int
    ready: int


class QueueDepthOut(WireOut):
    """Arithmetic on cursors; a named group never seen counts -1."""

    queue: str
    group: str | None
    pending: int
    processing: int
    ready: int
    partitionsPending: int
    partitionsReady: int
    conflation: bool = Field(description="the named group's stored policy (false without a group)")
    effectivePending: int
    effectiveReady: int
    deadLetter: int
    oldestReadyAgeSeconds: JSONNumber | None
    partitions: list[PartitionDepthOut]


class PauseOut(WireOut):
    """A pause or resume: what it names is now ``paused`` (``changed`` false
    when it already was), with the queue's whole pause state."""

    success: Literal[True]
    queue: str
    consumerGroup: str | None = Field(description="the group the route names; null for the queue's routes")
    paused: bool
    changed: bool
    queuePaused: bool = Field(description="every pop of the queue is paused")
    pausedGroups: list[str]


class QueueDeletedOut(WireOut):
    deleted: Literal[True]
    existed: Literal[True]
    queue: str


class QueueNotDeletedOut(WireOut):
    """Deleting a queue that does not exist is still a 200."""

    deleted: Literal[False]
    existed: Literal[False]
    queue: str
    message: Literal["Queue not found"]


class OverviewCountsOut(MessageCountsOut):
    failed: int


class LagOut(WireOut):
    avg: JSONNumber
    median: JSONNumber
    min: JSONNumber
    max: JSONNumber


class LagsOut(WireOut):
    time: LagOut = Field(description="seconds the oldest ready message has waited, across queues")
    offset: LagOut = Field(description="pending messages per partition")


class OverviewOut(WireOut):
    queues: int
    partitions: int
    namespaces: int
    tasks: int
    messages: OverviewCountsOut
    lag: LagsOut
    timestamp: MicrosZTime
    statsAge: int


class DeadLetterOut(WireOut):
    id: str
    queue: str
    partition: str
    partitionId: str
    consumerGroup: str
    transactionId: str
    messageId: str
    offset: int
    data: JSONValue
    errorMessage: str | None
    retryCount: int
    producerSub: str | None
    createdAt: MicrosZTime
    failedAt: MicrosZTime


class DeadLettersOut(WireOut):
    messages: list[DeadLetterOut] = Field(description="newest first")
    total: int = Field(description="rows matching the filters, all pages")


class QueueBusyOut(WireOut):
    """409: the queue was deleted again and again while the push ran; retry."""

    error: str
    code: Literal["queue_busy"]
