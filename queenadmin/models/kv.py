from __future__ import annotations

from datetime import datetime

from django.db import models
from django.db.models import Q

from queenadmin.models.fields import ByteOrderTextField


class KVEntryQuerySet(models.QuerySet["KVEntry"]):
    def live(self, now: datetime) -> KVEntryQuerySet:
        return self.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))

    def expired(self, now: datetime) -> KVEntryQuerySet:
        return self.filter(expires_at__lte=now)


class KVEntry(models.Model):
    """One key of the versioned KV store (locks are rows of it too)."""

    namespace = ByteOrderTextField()
    key = ByteOrderTextField()
    #: The value as compact JSON text, kept verbatim so numbers round-trip
    #: exactly (``incr`` is decimal arithmetic, not float).
    value_json = models.TextField()
    #: Drawn from the one store-wide counter at every write; never reused,
    #: so it doubles as a fencing token.
    version = models.BigIntegerField()
    #: None means forever. A row is live while ``expires_at > now``.
    expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    objects = KVEntryQuerySet.as_manager()

    class Meta:
        verbose_name = "KV entry"
        verbose_name_plural = "KV entries"
        constraints = [
            models.UniqueConstraint(fields=["namespace", "key"], name="kventry_ns_key_uniq"),
        ]
        indexes = [models.Index(fields=["expires_at"], name="kventry_expires_idx")]

    def __str__(self) -> str:
        # A lock permit's version is its fencing token, a credential: the
        # admin shows this text in lists, confirmations and its log.
        if self.namespace == "queen-locks":
            return f"{self.namespace}/{self.key}"
        return f"{self.namespace}/{self.key} v{self.version}"


class VersionCounter(models.Model):
    """The store-wide version counter on SQLite (PostgreSQL uses a sequence).

    Bumped inside the IMMEDIATE write transaction, so draws follow commit
    order: SQLite has one writer at a time.
    """

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    value = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"version counter at {self.value}"
