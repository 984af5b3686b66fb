"""Message traces: events a consumer records on a message, filed by name.

``trace_record`` is the one writer of ``Trace`` and ``TraceName``; the
reads page through indexes: a message's traces by (partition,
transactionId), a name's by (name, time). A queue delete removes its
traces with the queue store's statements (``store.delete_queue_traces``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, F, TextField, Value
from django.db.models.functions import Cast, Concat, Greatest

from queenadmin.domain import clock, events
from queenadmin.domain.names import check_engine_name
from queenadmin.domain.queues.ids import uuid7
from queenadmin.domain.queues.refs import lock_queue_rows
from queenadmin.domain.queues.store import store
from queenadmin.errors import MessageNotFound
from queenadmin.models.queues import Message, Partition, Trace, TraceName, TraceNameSummary


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
    for name in names:
        check_engine_name(name, "traceNames[]")
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
    if unique:
        _count_in(unique, trace, now)
    events.broadcast_on_commit(events.QUEUES_GROUP, {"type": "queues.changed", "traces": unique})
    return trace.trace_id


def _count_in(names: list[str], trace: Trace, now: datetime) -> None:
    """Add ``trace`` to its names' summaries (rows locked in name order)."""
    TraceNameSummary.objects.bulk_create(
        [TraceNameSummary(name=n, last_seen=now) for n in names], ignore_conflicts=True
    )
    list(TraceNameSummary.objects.filter(name__in=names).order_by("name").select_for_update())
    # Names the message already had before this event: through the
    # message's few traces (trace_message_idx), not the name's many.
    seen = set(
        TraceName.objects.filter(
            trace__partition_id=trace.partition_id, trace__transaction_id=trace.transaction_id, name__in=names
        )
        .exclude(trace=trace)
        .values_list("name", flat=True)
    )
    for n in names:
        TraceNameSummary.objects.filter(name=n).update(
            traces=F("traces") + 1,
            messages=F("messages") + (0 if n in seen else 1),
            last_seen=Greatest("last_seen", Value(now)),
        )


def traces_delete_for_queue_in_txn(*, queue_id: int) -> None:
    """Delete a queue's traces and take them out of their names' summaries.

    For ``queue_delete_in_txn``, which holds the queue row: costs
    O(traces of the queue), like deleting its messages.
    """
    assert connection.in_atomic_block
    mine = TraceName.objects.filter(trace__partition__queue_id=queue_id)
    message_key = Concat(
        Cast("trace__partition_id", TextField()), Value(":"), "trace__transaction_id", output_field=TextField()
    )
    counts = {
        r["name"]: (r["traces"], r["messages"])
        for r in mine.values("name").annotate(traces=Count("id"), messages=Count(message_key, distinct=True))
    }
    store().delete_queue_traces(queue_id)
    if not counts:
        return
    names = sorted(counts)
    list(TraceNameSummary.objects.filter(name__in=names).order_by("name").select_for_update())
    for n in names:
        traces, messages = counts[n]
        last = TraceName.objects.filter(name=n).order_by("-created_at").values_list("created_at", flat=True).first()
        summary = TraceNameSummary.objects.filter(name=n)
        if last is None:
            summary.delete()
        else:
            summary.update(traces=F("traces") - traces, messages=F("messages") - messages, last_seen=last)


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

    Reads the names' summaries (kept by every trace write): O(page).
    """
    rows = TraceNameSummary.objects.order_by("-last_seen", "name").values_list(
        "name", "traces", "messages", "last_seen"
    )[offset : offset + limit]
    return [TraceNameStats(*r) for r in rows]
