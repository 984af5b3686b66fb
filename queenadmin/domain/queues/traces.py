"""Message traces: events a consumer records on a message, filed by name.

``trace_record`` is the one writer of ``Trace`` and ``TraceName``; the
reads page through indexes: a message's traces by (partition,
transactionId), a name's by (name, time).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, Max

from queenadmin.domain import clock, events
from queenadmin.domain.queues.ids import uuid7
from queenadmin.domain.queues.refs import lock_queue_rows
from queenadmin.errors import MessageNotFound
from queenadmin.models.queues import Message, Partition, Trace, TraceName


@dataclass(frozen=True)
class TraceRow:
    """One trace event, with its message's place and payload when asked."""

    trace_id: str
    partition_id: int
    transaction_id: str
    group: str
    event_type: str
    data_json: str
    worker_id: str | None
    created_at: datetime
    names: tuple[str, ...]
    queue: str | None = None
    partition: str | None = None
    payload_json: str | None = None


@dataclass(frozen=True)
class TraceNameStats:
    name: str
    traces: int
    messages: int
    last_seen: datetime


@transaction.atomic(durable=True)
def trace_record(
    *,
    partition_id: int,
    transaction_id: str,
    group: str,
    event_type: str,
    data_json: str,
    names: Sequence[str] = (),
    worker_id: str | None = None,
) -> str:
    """File a trace event on a message; return its trace id (a UUIDv7).

    ``names`` (duplicates dropped) make it findable by name. Raises
    ``MessageNotFound`` when the partition has no message with
    ``transaction_id``. Must be the outermost transaction
    (``trace_record_in_txn`` runs inside one).
    """
    return trace_record_in_txn(
        partition_id=partition_id,
        transaction_id=transaction_id,
        group=group,
        event_type=event_type,
        data_json=data_json,
        names=names,
        worker_id=worker_id,
        now=clock.now(),
    )


def trace_record_in_txn(
    *,
    partition_id: int,
    transaction_id: str,
    group: str,
    event_type: str,
    data_json: str,
    names: Sequence[str],
    worker_id: str | None,
    now: datetime,
) -> str:
    """``trace_record`` inside the caller's transaction (asserted)."""
    assert connection.in_atomic_block
    queue_id = Partition.objects.filter(id=partition_id).values_list("queue_id", flat=True).first()
    # The queue row first, as every writer of a queue's rows: a queue delete
    # then waits for this trace or makes it find the partition gone.
    if queue_id is None or not lock_queue_rows([queue_id]):
        raise MessageNotFound()
    offset = (
        Message.objects.filter(partition_id=partition_id, transaction_id=transaction_id)
        .order_by("offset")
        .values_list("offset", flat=True)
        .first()
    )
    if offset is None:
        raise MessageNotFound()
    trace = Trace.objects.create(
        trace_id=uuid7(),
        partition_id=partition_id,
        transaction_id=transaction_id,
        offset=offset,
        group=group,
        event_type=event_type,
        data=data_json,
        worker_id=worker_id,
        created_at=now,
    )
    unique = sorted(set(names))
    TraceName.objects.bulk_create([TraceName(trace=trace, name=n, created_at=now) for n in unique])
    events.broadcast_on_commit(events.QUEUES_GROUP, {"type": "queues.changed", "traces": unique})
    return trace.trace_id


def _names_of(ids: list[int]) -> dict[int, tuple[str, ...]]:
    names: dict[int, list[str]] = defaultdict(list)
    for tid, name in TraceName.objects.filter(trace_id__in=ids).order_by("name").values_list("trace_id", "name"):
        names[tid].append(name)
    return {tid: tuple(n) for tid, n in names.items()}


_FIELDS = (
    "id",
    "trace_id",
    "partition_id",
    "transaction_id",
    "group",
    "event_type",
    "data",
    "worker_id",
    "created_at",
)


def _row(r: Sequence[Any], names: tuple[str, ...], **extra: Any) -> TraceRow:
    return TraceRow(r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], names, **extra)


def traces_for_message(*, partition_id: int, transaction_id: str, limit: int = 1000) -> list[TraceRow]:
    """The first ``limit`` trace events of one message, oldest first."""
    rows = list(
        Trace.objects.filter(partition_id=partition_id, transaction_id=transaction_id)
        .order_by("id")
        .values_list(*_FIELDS)[:limit]
    )
    names = _names_of([r[0] for r in rows])
    return [_row(r, names.get(r[0], ())) for r in rows]


def traces_by_name(*, name: str, limit: int, offset: int) -> tuple[list[TraceRow], bool]:
    """A page of the events filed under ``name``, oldest first; and whether more follow.

    Each row carries its queue, partition and the traced message's payload
    (None when the message is gone). Reads ``limit + 1`` index entries
    past ``offset``: never counts the name's events.
    """
    page = list(
        TraceName.objects.filter(name=name)
        .order_by("created_at", "trace_id")
        .values_list("trace_id", flat=True)[offset : offset + limit + 1]
    )
    more = len(page) > limit
    ids = page[:limit]
    found = {
        r[0]: r
        for r in Trace.objects.filter(id__in=ids).values_list(
            *_FIELDS, "partition__queue__name", "partition__name", "offset"
        )
    }
    payloads = {
        (pid, off): payload
        for pid, off, payload in Message.objects.filter(
            partition_id__in={r[2] for r in found.values()}, offset__in={r[11] for r in found.values()}
        ).values_list("partition_id", "offset", "payload")
    }
    names = _names_of(ids)
    result = []
    for tid in ids:
        r = found[tid]
        result.append(
            _row(r, names.get(tid, ()), queue=r[9], partition=r[10], payload_json=payloads.get((r[2], r[11])))
        )
    return result, more


def trace_names(*, limit: int, offset: int) -> list[TraceNameStats]:
    """A page of trace names, most recently used first, with their counts.

    Aggregates the name index (one row per name and event), never the
    messages.
    """
    rows = (
        TraceName.objects.values("name")
        .annotate(
            traces=Count("trace_id"), messages=Count("trace__transaction_id", distinct=True), last=Max("created_at")
        )
        .order_by("-last", "name")[offset : offset + limit]
    )
    return [TraceNameStats(r["name"], r["traces"], r["messages"], r["last"]) for r in rows]
