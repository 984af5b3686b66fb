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


class KVNamespaceCount(models.Model):
    """Keys of one KV namespace as the statistics sampler last counted them.

    Counting every key is one scan of the store; the sampler does it once a
    tick (``domain/kv``), so the overview reads these rows instead of
    scanning at every render. Expired-but-unreaped keys are counted, as
    ``/kv/`` counts them.
    """

    namespace = ByteOrderTextField(unique=True)
    keys = models.BigIntegerField()
    counted_at = models.DateTimeField()

    class Meta:
        verbose_name = "KV namespace count"

    def __str__(self) -> str:
        return f"{self.namespace}: {self.keys} keys"


class KVVersion(models.Model):
    """One write of a key, kept for its history (issue 41).

    Written by the write itself, in its statement or transaction
    (``domain/kv/store``), so a version is here exactly when it committed.
    A lock permit (``queen-locks``) is kept without its owner, a
    credential: only who took it (``domain/kv/keep.py``); its rows are a
    lock's life (``domain/locks/history.py``).
    """

    namespace = ByteOrderTextField()
    key = ByteOrderTextField()
    #: The key's version this write made; a delete draws one of its own, so
    #: a key's versions are distinct and rise in commit order.
    version = models.BigIntegerField()
    #: ``put``, ``incr`` or ``delete``.
    op = models.CharField(max_length=8)
    #: The value as compact JSON text; None for a delete, or for a value
    #: over ``KV_HISTORY_VALUE_BYTES`` (then ``digest`` is set).
    value_json = models.TextField(null=True, blank=True)  # noqa: DJ001
    #: The sha256 of a value too large to keep, in hex.
    digest = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001
    #: The value's JSON text in UTF-8 bytes (0 for a delete).
    size = models.IntegerField(default=0)
    at = models.DateTimeField()
    #: When the value written expires (None: forever, or a delete).
    expires_at = models.DateTimeField(null=True, blank=True)
    #: Who wrote: a token's name or a JWT's ``sub``, or the operator.
    actor = models.TextField(null=True, blank=True)  # noqa: DJ001

    class Meta:
        verbose_name = "KV version"
        constraints = [
            models.UniqueConstraint(
                "namespace", "key", models.F("version").desc(), name="kvversion_ns_key_version_uniq"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.key} v{self.version} {self.op}"
