"""Ephemeral queues (Queen's ``/api/v1/ephemeral``): data shape only.

``EphemeralConfig`` is the one logged table: a declared queue's options,
which survive anything. Every other table holds contents that survive
nothing by contract; on PostgreSQL migration 0018 makes them ``UNLOGGED``
(no WAL, emptied by PostgreSQL after a crash). No foreign keys tie them
to each other or to the config: PostgreSQL refuses a key from a logged
table to an unlogged one, and rows are found by queue name anyway.
Times are epoch milliseconds, as on the wire.
"""

from __future__ import annotations

from django.db import models

from queenadmin.models.fields import ByteOrderTextField


class EphemeralConfig(models.Model):
    """A declared ephemeral queue's options, as the client sent them."""

    queue = ByteOrderTextField(primary_key=True)
    #: The ``options`` object of the configure call, compact JSON.
    options_json = models.TextField()
    updated_at_ms = models.BigIntegerField()

    def __str__(self) -> str:
        return self.queue


class EphemeralQueue(models.Model):
    """The live state of one ephemeral queue's incarnation (unlogged)."""

    queue = ByteOrderTextField(primary_key=True)
    #: Random per incarnation (new row, reset): ids of another epoch are stale.
    epoch = models.BigIntegerField()
    #: The declared options (JSON, as sent), "" for an implicit queue: a
    #: copy of ``EphemeralConfig.options_json``, read with the row lock.
    options_json = models.TextField(default="")
    #: The last sequence number handed out; one counter for every partition.
    last_seq = models.BigIntegerField(default=0)
    depth = models.BigIntegerField(default=0)
    bytes = models.BigIntegerField(default=0)
    drops_bounds = models.BigIntegerField(default=0)
    drops_ttl = models.BigIntegerField(default=0)
    drops_retry = models.BigIntegerField(default=0)
    #: The last push or pop: an implicit queue idle this long is removed.
    touched_at_ms = models.BigIntegerField()

    def __str__(self) -> str:
        return self.queue


class EphemeralMessage(models.Model):
    """One message in a partition's ring (unlogged)."""

    pk = models.CompositePrimaryKey("queue", "seq")
    queue = ByteOrderTextField()
    seq = models.BigIntegerField()
    partition = ByteOrderTextField()
    #: The payload as JSON text, re-emitted verbatim.
    payload = models.TextField()
    size = models.IntegerField()
    created_at_ms = models.BigIntegerField()

    class Meta:
        indexes = [models.Index(fields=["queue", "partition", "seq"], name="ephmsg_partition_seq_idx")]

    def __str__(self) -> str:
        return f"{self.queue}/{self.partition}/{self.seq}"


class EphemeralPartition(models.Model):
    """A partition's ring exists (unlogged): pops without a partition walk
    these in name order, each ring by its index."""

    pk = models.CompositePrimaryKey("queue", "partition")
    queue = ByteOrderTextField()
    partition = ByteOrderTextField()

    def __str__(self) -> str:
        return f"{self.queue}/{self.partition}"


class EphemeralCursor(models.Model):
    """Where one group stands in one partition's ring (unlogged)."""

    pk = models.CompositePrimaryKey("queue", "consumer_group", "partition")
    queue = ByteOrderTextField()
    #: ``__QUEUE_MODE__`` for pops without a group.
    consumer_group = ByteOrderTextField()
    partition = ByteOrderTextField()
    #: The last sequence number delivered to the group in this partition.
    delivered_seq = models.BigIntegerField(default=0)
    #: Messages the group gave up on at ``retryLimit``.
    skipped = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.queue}/{self.consumer_group}/{self.partition}"


class EphemeralLease(models.Model):
    """A message delivered to a group and not acked yet (unlogged)."""

    pk = models.CompositePrimaryKey("queue", "seq", "consumer_group")
    queue = ByteOrderTextField()
    #: ``__QUEUE_MODE__`` for pops without a group.
    consumer_group = ByteOrderTextField()
    seq = models.BigIntegerField()
    partition = ByteOrderTextField()
    attempts = models.IntegerField()
    expires_at_ms = models.BigIntegerField()

    class Meta:
        indexes = [models.Index(fields=["queue", "consumer_group", "expires_at_ms"], name="ephlease_due_idx")]

    def __str__(self) -> str:
        return f"{self.queue}/{self.consumer_group}/{self.seq}"
