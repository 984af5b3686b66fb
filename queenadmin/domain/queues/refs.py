"""``QueueRef``: a queue as the writers need it, read once per call."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class QueueRef:
    """A queue's id and name, with typed reads of its stored options."""

    id: int
    name: str
    #: ``Queue.options`` as stored (see ``options.py``).
    options: Mapping[str, Any]

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
    def delay_seconds(self) -> int:
        """``delayedProcessing``: a message is claimable this long after its push."""
        return max(0, int(self.options.get("delayedProcessing") or 0))
