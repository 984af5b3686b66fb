"""Process metrics (Queen's ``system-metrics``): ``ops`` stores the samples
each process reads of itself (``metrics.process``) and reads them back,
``store`` holds every statement, one class per database."""

from __future__ import annotations

from queenadmin.domain.procmetrics.ops import (
    Replica,
    ReplicaPoint,
    RequestCounts,
    Stat,
    procmetrics_record,
    procmetrics_replicas,
    procmetrics_requests,
    retention,
)
from queenadmin.domain.procmetrics.store import SampleRow

__all__ = [
    "Replica",
    "ReplicaPoint",
    "RequestCounts",
    "SampleRow",
    "Stat",
    "procmetrics_record",
    "procmetrics_replicas",
    "procmetrics_requests",
    "retention",
]
