"""The operator's status reads: sampled history in time buckets, leases
out now, the DLQ's state, and per-partition activity.

Everything comes from the sampler's rows (``history``), cursors and the
dead-letter table; nothing counts messages. Nothing here writes or locks.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, Max, Sum

from queenadmin.domain import clock
from queenadmin.domain.queues.history import Interval, SamplePoint, queue_series
from queenadmin.domain.queues.stats import where_given
from queenadmin.models.queues import ConsumerCursor, DeadLetter, Queue


@dataclass(frozen=True)
class QueueRow:
    """A queue as the status reads list it."""

    id: int
    name: str
    namespace: str | None
    task: str | None
    created_at: datetime
    #: Whose pops are paused (``operator/pause.py``): every one, and the
    #: groups paused on their own (sorted).
    paused: bool = False
    paused_groups: tuple[str, ...] = ()


def queues_matching(*, queue: str | None, namespace: str | None, task: str | None) -> list[QueueRow]:
    """The queues a status filter names (every queue without one), newest first."""
    rows = where_given(Queue.objects.all(), name=queue, namespace=namespace, task=task)
    return [
        QueueRow(qid, name, namespace, task, created_at, paused, tuple(groups or ()))
        for qid, name, namespace, task, created_at, paused, groups in rows.order_by("-created_at", "-id").values_list(
            "id", "name", "namespace", "task", "created_at", "paused", "paused_groups"
        )
    ]


def bucket_minutes(span: timedelta) -> int:
    """Queen's bucket size for a time range: about 60 points or fewer."""
    minutes = span.total_seconds() / 60
    for limit, size in ((60, 1), (360, 5), (1440, 15), (10080, 60)):
        if minutes <= limit:
            return size
    return 360


@dataclass(frozen=True)
class Bucket(Interval):
    """Sampled intervals that start in ``[at, at + size)``, summed.

    Ages are the oldest claimable message's, in seconds: the mean and the
    largest over the samples.
    """

    samples: int
    avg_age: float
    max_age: float


def status_buckets(*, since: datetime, until: datetime, size: timedelta, queues: Sequence[str] | None) -> list[Bucket]:
    """Every queue's history (or that of ``queues``), in buckets of ``size``.

    Buckets are aligned to multiples of ``size`` since the epoch, oldest
    first; a bucket with no sample is left out.
    """
    if queues is not None and not queues:
        return []
    return _bucketed(queue_series(queue=None, queues=queues, since=since, until=until), since, size)


def _bucketed(series: Sequence[SamplePoint], since: datetime, size: timedelta) -> list[Bucket]:
    seconds = max(1, int(size.total_seconds()))
    grouped: dict[datetime, list[SamplePoint]] = defaultdict(list)
    for point in series:
        if point.at >= since:
            grouped[clock.align(point.at, seconds)].append(point)
    return [
        Bucket(
            at=at,
            pushed=sum(p.pushed for p in points),
            popped=sum(p.popped for p in points),
            acked=sum(p.acked for p in points),
            failed=sum(p.failed for p in points),
            dlq=sum(p.dlq for p in points),
            samples=len(points),
            avg_age=sum(p.oldest_claimable_age for p in points) / len(points),
            max_age=max(p.oldest_claimable_age for p in points),
        )
        for at, points in sorted(grouped.items())
    ]


@dataclass(frozen=True)
class LeaseSummary:
    """Batches out under a live lease now: one per (partition, group)."""

    active: int
    partitions: int
    #: Messages in those batches not yet acked.
    messages: int


def lease_summary(*, queue_ids: Collection[int] | None, now: datetime) -> LeaseSummary:
    """Live leases of the queues ``queue_ids`` (every queue: None)."""
    rows = ConsumerCursor.objects.filter(lease_id__isnull=False, leased_until__gt=now)
    if queue_ids is not None:
        rows = rows.filter(partition__queue_id__in=list(queue_ids))
    active = messages = 0
    seen: set[int] = set()
    for pid, committed, batch_last in rows.values_list("partition_id", "committed_offset", "batch_last"):
        active += 1
        seen.add(pid)
        messages += max(0, batch_last - committed)
    return LeaseSummary(active, len(seen), messages)


@dataclass(frozen=True)
class DeadLetterSummary:
    """Dead letters filed in a time range."""

    messages: int
    partitions: int
    #: The most frequent error texts with their counts, most frequent first.
    top_errors: tuple[tuple[str | None, int], ...]


def dlq_summary(
    *, queue_ids: Collection[int] | None, since: datetime, until: datetime, top: int = 10
) -> DeadLetterSummary:
    """Dead letters of ``queue_ids`` (every queue: None) failed in the range.

    Reads the dead-letter table through its (queue, failed_at) index.
    """
    rows = DeadLetter.objects.filter(failed_at__gte=since, failed_at__lte=until)
    if queue_ids is not None:
        rows = rows.filter(queue_id__in=list(queue_ids))
    totals = rows.aggregate(messages=Count("id"), partitions=Count("partition_id", distinct=True))
    errors = rows.values("error").annotate(count=Count("id")).order_by("-count", "error")[:top]
    return DeadLetterSummary(totals["messages"], totals["partitions"], tuple((e["error"], e["count"]) for e in errors))


@dataclass(frozen=True)
class PartitionActivity:
    """What the consumers of one partition did, over every group."""

    acked: int
    failed: int
    dead_lettered: int
    last_claim_at: datetime | None


def partition_activity(*, queue_id: int) -> dict[int, PartitionActivity]:
    """Per partition of the queue: counters summed over its cursors."""
    rows = (
        ConsumerCursor.objects.filter(partition__queue_id=queue_id)
        .values("partition_id")
        .annotate(acked=Sum("acked"), failed=Sum("failed"), dead=Sum("dead_lettered"), last=Max("last_claim_at"))
        .order_by()
    )
    return {
        r["partition_id"]: PartitionActivity(r["acked"] or 0, r["failed"] or 0, r["dead"] or 0, r["last"]) for r in rows
    }
