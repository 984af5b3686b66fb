"""Process metrics (Queen's ``system-metrics``): ``ops`` samples and reads,
``store`` holds every statement, one class per database."""

from __future__ import annotations

from queenadmin.domain.procmetrics.ops import (
    PORT_ENV,
    Replica,
    ReplicaPoint,
    RequestCounts,
    Stat,
    procmetrics_read_self,
    procmetrics_record,
    procmetrics_replicas,
    procmetrics_requests,
    retention,
)

__all__ = [
    "PORT_ENV",
    "Replica",
    "ReplicaPoint",
    "RequestCounts",
    "Stat",
    "procmetrics_read_self",
    "procmetrics_record",
    "procmetrics_replicas",
    "procmetrics_requests",
    "retention",
]
