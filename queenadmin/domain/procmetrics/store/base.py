"""The process-sample store: the rows both databases keep alike.

Plain ORM statements on ``ProcessSample``; ``postgres.py`` and
``sqlite.py`` are where a vendor difference would go (none so far).
Writes assert the caller's transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import connection

from queenadmin.models import ProcessSample


@dataclass(frozen=True, slots=True)
class SampleRow:
    """One process's reading of itself (a ``ProcessSample`` row)."""

    host: str
    port: int
    pid: int
    at: datetime
    cpu_user_seconds: float
    cpu_system_seconds: float
    rss_bytes: int | None
    virtual_bytes: int | None
    threads: int
    push_requests: int
    pop_requests: int
    ack_requests: int
    requests: int


_FIELDS = (
    "host",
    "port",
    "pid",
    "at",
    "cpu_user_seconds",
    "cpu_system_seconds",
    "rss_bytes",
    "virtual_bytes",
    "threads",
    "push_requests",
    "pop_requests",
    "ack_requests",
    "requests",
)


class Store:
    def insert(self, row: SampleRow) -> None:
        assert connection.in_atomic_block
        ProcessSample.objects.create(**{name: getattr(row, name) for name in _FIELDS})

    def rows_between(self, since: datetime, until: datetime) -> list[SampleRow]:
        """Rows with ``since <= at <= until``, per process, oldest first."""
        rows = (
            ProcessSample.objects.filter(at__gte=since, at__lte=until)
            .order_by("host", "port", "pid", "at", "id")
            .values_list(*_FIELDS)
        )
        return [SampleRow(*values) for values in rows]

    def delete_before(self, cutoff: datetime, *, batch: int) -> int:
        """Delete up to ``batch`` rows older than ``cutoff``; the count deleted."""
        assert connection.in_atomic_block
        ids = list(ProcessSample.objects.filter(at__lt=cutoff).order_by("at").values_list("id", flat=True)[:batch])
        if not ids:
            return 0
        return ProcessSample.objects.filter(id__in=ids).delete()[0]
