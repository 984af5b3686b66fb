"""Counts for the dashboard's overview that belong to no single concept.

Reads only; a fixed number of statements whatever the data holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count

from queenadmin.domain.kv import LOCKS_NAMESPACE
from queenadmin.models import KVEntry


@dataclass(frozen=True)
class NamespaceCount:
    namespace: str
    keys: int

    @property
    def is_locks(self) -> bool:
        return self.namespace == LOCKS_NAMESPACE


def kv_namespace_counts(*, now: datetime) -> list[NamespaceCount]:
    """Live keys per KV namespace, by name; lock permits count in theirs.

    One grouped statement over the live rows (a KV store of 100,000 keys
    reads in a few milliseconds; the messages table is never touched).
    """
    rows = KVEntry.objects.live(now).values_list("namespace").annotate(n=Count("id")).order_by("namespace")
    return [NamespaceCount(ns, int(n)) for ns, n in rows]
