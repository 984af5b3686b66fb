"""``QueueRef``: a queue as the writers need it, read once per call."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from queenadmin.domain.queues.store import store


@dataclass(frozen=True)
class QueueRef:
    """A queue's id and name, with typed reads of its stored options."""

    id: int
    name: str
    #: ``Queue.options`` as stored (see ``options.py``).
    options: Mapping[str, Any]
    #: ``Queue.paused`` and ``Queue.paused_groups``, where the caller read
    #: them (a claim's); else not paused.
    paused: bool = False
    paused_groups: tuple[str, ...] = ()

    def paused_for(self, group: str) -> bool:
        """Whether pops of ``group`` (or queue mode) are paused."""
        return self.paused or group in self.paused_groups

    @property
    def lease_seconds(self) -> int:
        lease = int(self.options.get("leaseTime") or 0)
        return lease if lease > 0 else 60

    @property
    def retry_limit(self) -> int:
        return int(self.options.get("retryLimit", 3))

    @property
    def dedup_window_seconds(self) -> int:
        return int(self.options.get("dedupWindowSeconds", 3600))

    @property
    def window_buffer_seconds(self) -> int:
        """``windowBuffer``: a partition delivers once it had no push this long."""
        return max(0, int(self.options.get("windowBuffer") or 0))

    @property
    def max_size(self) -> int:
        """``maxSize``: the most messages the queue holds unconsumed (0: no cap)."""
        return max(0, int(self.options.get("maxSize") or 0))

    @property
    def priority(self) -> int:
        """``priority``: pops of a namespace or task serve higher ones first."""
        return int(self.options.get("priority") or 0)

    @property
    def delay_seconds(self) -> int:
        """``delayedProcessing``: a message is claimable this long after its push."""
        return max(0, int(self.options.get("delayedProcessing") or 0))


def lock_queue_rows(ids: Iterable[int], *, exclusive: bool = False) -> set[int]:
    """Lock the rows of queues ``ids`` for this transaction; the ids that exist.

    Every writer of a queue's partitions, messages, cursors or dead letters
    takes its queue rows first (``FOR KEY SHARE``, in id order), and a
    delete takes its row ``FOR UPDATE``: so a delete waits for the writers
    in flight and the writers after it find the queue gone, instead of
    meeting halfway in foreign-key violations and deadlocks. Without row
    locks (one writer at a time) the ids are only checked.
    """
    return store().lock_queue_ids(sorted(set(ids)), exclusive=exclusive)
