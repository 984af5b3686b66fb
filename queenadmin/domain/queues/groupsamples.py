"""Each consumer group's counters per sampler tick (``GroupSample``).

The statistics sampler (``history.stats_step``) reads every cursor once per
tick for the queues' rows; the same read, split by consumer group
(``history.queue_counters``), is written here as one row per queue and
group that counts for the depth: the named groups, or queue mode when a
queue has none. A row holds the group's cumulative counters (the next
tick's base), what happened during the tick, and its lag at the end of
it, so the rate of a group over the last minutes is a sum
(``rates.group_rates``).

Rows are kept only at the sampler's interval, for
``GROUP_SAMPLES_RETENTION_SECONDS``: their one reader is the rate over the
last minutes, and a deployment of a thousand queues and three groups each
writes 3,000 rows a tick.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from django.db import connection

from queenadmin.models.queues import GroupSample

#: How long a group's rows are kept, in seconds. Internal, not a setting
#: (docs/settings.md, "Internal constants"): three times the longest rate
#: window the dashboard reads (``rates.RATE_WINDOW``).
GROUP_SAMPLES_RETENTION_SECONDS = 900
#: Rows deleted per pruning statement, and statements per step at most.
_PRUNE_BATCH = 5_000
_PRUNE_STATEMENTS = 10


@dataclass(frozen=True)
class GroupCounters:
    """One consumer group's counters on a queue now, as one sample reads them."""

    group: str
    popped: int
    acked: int
    failed: int
    dlq: int
    #: Messages the group has not finished, every partition.
    lag: int


class _Counted(Protocol):
    """What a queue's counters (``history.QueueCounters``) give this module."""

    @property
    def queue_id(self) -> int: ...

    @property
    def queue(self) -> str: ...

    @property
    def groups(self) -> tuple[GroupCounters, ...]: ...


_TOTALS = ("popped_total", "acked_total", "failed_total", "dlq_total")


def group_sample_in_txn(*, now: datetime, tick: datetime, counters: Sequence[_Counted]) -> int:
    """Write (or rewrite) every group's row of ``tick``; the rows written.

    What happened during the tick is measured from the group's row of the
    previous tick written. A group without one counts everything it has
    when a previous tick exists (it appeared since), and nothing when none
    does (when it happened is unknown): the rule of the queues' rows.
    Inside the caller's transaction (asserted).
    """
    assert connection.in_atomic_block
    last_tick = GroupSample.objects.filter(at__lt=tick).order_by("-at").values_list("at", flat=True).first()
    previous: dict[tuple[str, str], tuple[int, tuple[int, ...]]] = {}
    if last_tick is not None:
        for queue, group, queue_id, *totals in GroupSample.objects.filter(at=last_tick).values_list(
            "queue", "group", "queue_id", *_TOTALS
        ):
            previous[(queue, group)] = (queue_id, tuple(totals))
    rows = []
    for c in counters:
        for g in c.groups:
            totals = (g.popped, g.acked, g.failed, g.dlq)
            prev = previous.get((c.queue, g.group))
            if prev is not None and prev[0] == c.queue_id:
                base = prev[1]
            elif last_tick is not None:
                base = (0, 0, 0, 0)
            else:
                base = totals
            popped, acked, failed, dlq = (max(0, n - b) for n, b in zip(totals, base, strict=True))
            rows.append(
                GroupSample(
                    queue_id=c.queue_id,
                    queue=c.queue,
                    group=g.group,
                    at=tick,
                    popped_total=g.popped,
                    acked_total=g.acked,
                    failed_total=g.failed,
                    dlq_total=g.dlq,
                    popped=popped,
                    acked=acked,
                    failed=failed,
                    dlq=dlq,
                    lag=g.lag,
                )
            )
    GroupSample.objects.bulk_create(
        rows,
        update_conflicts=True,
        unique_fields=["queue", "group", "at"],
        update_fields=["queue_id", *_TOTALS, "popped", "acked", "failed", "dlq", "lag"],
        batch_size=500,
    )
    return len(rows)


def group_prune_in_txn(*, now: datetime) -> int:
    """Delete group rows older than ``GROUP_SAMPLES_RETENTION_SECONDS``, in
    bounded batches; the rows deleted. Inside the caller's transaction
    (asserted)."""
    assert connection.in_atomic_block
    old = GroupSample.objects.filter(at__lt=now - timedelta(seconds=GROUP_SAMPLES_RETENTION_SECONDS))
    deleted = 0
    for _ in range(_PRUNE_STATEMENTS):
        ids = list(old.order_by("at").values_list("id", flat=True)[:_PRUNE_BATCH])
        if not ids:
            break
        deleted += GroupSample.objects.filter(id__in=ids).delete()[0]
        if len(ids) < _PRUNE_BATCH:
            break
    return deleted
