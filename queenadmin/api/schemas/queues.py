"""Message-log wire schemas (protocol.md sections 6 to 11).

The requests are declared once, in ``api/wire/queues.py`` and
``api/wire/resources.py`` (their parsers read the declarations and the
document shows them); the ``Out`` models are the exact answers, checked by
``tests/api/test_contract.py``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import astuple
from typing import TYPE_CHECKING, Any, Literal

from pydantic import create_model

from queenadmin.api.schemas.common import (
    JSONNumber,
    JSONValue,
    MicrosZTime,
    WireOut,
)
from queenadmin.api.wire.answers import Answer, Key, Many
from queenadmin.domain import clock, queues
from queenadmin.domain.queues.options import BOOL_OPTIONS, INT_OPTIONS

# -- answers ------------------------------------------------------------------


#: Every option of a queue, defaults filled in (protocol 10): the domain's table.
QueueOptionsOut = create_model(
    "QueueOptionsOut",
    __base__=WireOut,
    __doc__="Every option of a queue, defaults filled in (protocol 10).",
    **dict.fromkeys(INT_OPTIONS, (int, ...)),  # type: ignore[call-overload]
    **dict.fromkeys(BOOL_OPTIONS, (bool, ...)),
)


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


#: The pause fields (``domain/queues/operator/pause.py``): additive, so the
#: official client, which does not read them, is unaffected.
PAUSED = "every pop of the queue is paused (answers as an empty queue)"
PAUSED_GROUPS = "consumer groups whose pops of the queue are paused"


_TIME = Key(MicrosZTime, via=clock.iso_micros_z)
_ID = Key(str, via=str)
_OPTIONS = Key(QueueOptionsOut, via=dict)
#: Of the ``queues.QueueConfig``.
CONFIGURED = Answer(
    "ConfigureOut",
    configured=Literal[True],
    queueId=Key(str, src="id", via=str),
    partitionId=None,
    queue=Key(str, src="name"),
    namespace=str | None,
    task=str | None,
    storage=Literal["segments"],
    options=_OPTIONS,
)
_PAUSED: dict[str, Any] = {
    "paused": Key(bool, PAUSED),
    "pausedGroups": Key(list[str], PAUSED_GROUPS, src="paused_groups", via=list),
}
#: Of a message count: the log holds no segments.
SEGMENTS = Answer("SegmentsOut", segments=Key(int, const=0), messages=Key(int, src="."))
QUEUE_SUMMARY = Answer(
    "QueueSummaryOut",
    id=_ID,
    name=str,
    queue=Key(str, src="name"),
    namespace=str | None,
    task=str | None,
    storage=Literal["segments"],
    partitions=Key(int, via=len),
    segments=Key(SEGMENTS, src="partitions", via=lambda partitions: sum(p.total for p in partitions)),
    messages=Key(MESSAGE_COUNTS, src="totals"),
    retainedBytes=int,
    options=_OPTIONS,
    createdAt=_TIME,
    **_PAUSED,
)
#: The queues, and the KV store's rows and bytes.
QUEUE_LIST = Answer(
    "QueueListOut",
    args=("kv_rows", "kv_bytes"),
    queues=Key(Many(QUEUE_SUMMARY), "newest first", src="."),
    kvRows=int,
    kvBytes=int,
    timerRows=Key(int, const=0),
    timerBytes=Key(int, const=0),
)
_LANE = Answer(
    "QueueLaneOut", id=_ID, name=str, queue=Key(str, src="name"), partitions=Key(int, via=len), createdAt=_TIME
)
LANES = Answer(
    "QueueLanesOut",
    doc="``?stats=lanes``: the light form.",
    queues=Key(Many(_LANE), src="."),
    stats=Literal["lanes"],
)
_PARTITION_COUNTS = Answer("PartitionCountsOut", **MESSAGE_COUNTS.keys, failed=None)
_CURSOR = Answer(
    "CursorOut",
    totalConsumed=Key(int, src=".", via=lambda p: p.completed + p.dead_letter),
    batchesConsumed=Key(int, const=0),
)
_PARTITION_DETAIL = Answer(
    "PartitionDetailOut",
    id=_ID,
    name=str,
    createdAt=_TIME,
    messages=Key(_PARTITION_COUNTS, src="."),
    stats=Key(_PARTITION_COUNTS, src="."),
    cursor=Key(_CURSOR, src="."),
    lastActivity=Key(MicrosZTime | None, src="last_push_at", via=clock.iso_micros_z),
    oldestMessage=Key(
        MicrosZTime | None,
        "oldest message still pending for the slowest group",
        src="oldest_message_at",
        via=clock.iso_micros_z,
    ),
    newestMessage=Key(MicrosZTime | None, src="newest_message_at", via=clock.iso_micros_z),
    retainedBytes=int,
)
QUEUE_DETAIL = Answer(
    "QueueDetailOut",
    id=_ID,
    name=str,
    namespace=str | None,
    task=str | None,
    createdAt=_TIME,
    options=_OPTIONS,
    partitions=Many(_PARTITION_DETAIL),
    segments=Key(SEGMENTS, src="totals.total"),
    totals=MESSAGE_COUNTS,
    retainedBytes=int,
    **_PAUSED,
)
_DEPTH = Answer("PartitionDepthOut", partition=Key(str, src="name"), pending=int, processing=int, ready=int)
QUEUE_DEPTH = Answer(
    "QueueDepthOut",
    doc="Arithmetic on cursors; a named group never seen counts -1.",
    queue=Key(str, src="name"),
    group=str | None,
    pending=Key(int, src="totals.pending"),
    processing=Key(int, src="totals.processing"),
    ready=Key(int, src="totals.ready"),
    partitionsPending=Key(int, src="totals.partitions_pending"),
    partitionsReady=Key(int, src="totals.partitions_ready"),
    # A conflating group's work is one handler call per partition.
    conflation=Key(bool, "the named group's stored policy (false without a group)"),
    effectivePending=Key(int, src=".", via=lambda s: s.totals.partitions_pending if s.conflation else s.totals.pending),
    effectiveReady=Key(int, src=".", via=lambda s: s.totals.partitions_ready if s.conflation else s.totals.ready),
    deadLetter=Key(int, src="totals.dead_letter"),
    oldestReadyAgeSeconds=Key(JSONNumber | None, src="oldest_ready_age"),
    partitions=Many(_DEPTH),
)
PAUSE = Answer(
    "PauseOut",
    doc="""A pause or resume: what it names is now ``paused`` (``changed`` false
    when it already was), with the queue's whole pause state.""",
    success=Literal[True],
    queue=Key(str, src="state.queue"),
    consumerGroup=Key(str | None, "the group the route names; null for the queue's routes", src="group"),
    paused=bool,
    changed=bool,
    queuePaused=Key(bool, "every pop of the queue is paused", src="state.paused"),
    pausedGroups=Key(list[str], src="state.paused_groups", via=list),
)
QUEUE_DELETED = Answer("QueueDeletedOut", args=("queue",), deleted=Literal[True], existed=Literal[True], queue=str)
QUEUE_NOT_DELETED = Answer(
    "QueueNotDeletedOut",
    doc="Deleting a queue that does not exist is still a 200.",
    args=("queue",),
    deleted=Literal[False],
    existed=Literal[False],
    queue=str,
    message=Literal["Queue not found"],
)


def _summed(stats: Sequence[queues.QueueStats]) -> queues.QueueTotals:
    return queues.QueueTotals(*map(sum, zip(*map(astuple, (_NO_TOTALS, *(q.totals for q in stats))), strict=True)))


def _time_lag(times: Sequence[float]) -> tuple[float, int, int, float]:
    return (sum(times) / len(times) if times else 0), 0, 0, max(times, default=0)


def _offset_lag(lags: Sequence[int]) -> tuple[float, int, int, int]:
    """Of the pending counts, ascending."""
    if not lags:
        return 0, 0, 0, 0
    return sum(lags) / len(lags), lags[len(lags) // 2], lags[0], lags[-1]


_NO_TOTALS = queues.QueueTotals.of(())
#: Of a lag's figures, in the order of its keys.
_LAG = Answer(
    "LagOut",
    avg=Key(JSONNumber, src="0"),
    median=Key(JSONNumber, src="1"),
    min=Key(JSONNumber, src="2"),
    max=Key(JSONNumber, src="3"),
)
#: Of the ``queues.Overview``.
OVERVIEW = Answer(
    "OverviewOut",
    queues=Key(int, via=len),
    partitions=int,
    namespaces=int,
    tasks=int,
    messages=Key(
        Answer("OverviewCountsOut", **MESSAGE_COUNTS.keys, failed=Key(int, const=0)), src="queues", via=_summed
    ),
    lag=Key(
        Answer(
            "LagsOut",
            time=Key(
                _LAG,
                "seconds the oldest ready message has waited, across queues",
                src="time_lags",
                via=_time_lag,
            ),
            offset=Key(_LAG, "pending messages per partition", src="offset_lags", via=_offset_lag),
        ),
        src=".",
    ),
    timestamp=Key(MicrosZTime, src="taken_at", via=clock.iso_micros_z),
    statsAge=Key(int, const=0),
)


_DEAD_LETTER = Answer(
    "DeadLetterOut",
    id=_ID,
    queue=str,
    partition=str,
    partitionId=_ID,
    consumerGroup=Key(str, src="group"),
    transactionId=str,
    messageId=str,
    offset=int,
    data=Key(JSONValue, src="payload_json", via=json.loads),
    errorMessage=Key(str | None, src="error"),
    retryCount=int,
    producerSub=str | None,
    createdAt=_TIME,
    failedAt=_TIME,
)
#: A page of dead letters, and how many match the filters.
DEAD_LETTERS = Answer(
    "DeadLettersOut",
    args=("total",),
    messages=Key(Many(_DEAD_LETTER), "newest first", src="."),
    total=Key(int, "rows matching the filters, all pages"),
)
