from __future__ import annotations

from django.db import models

from queenadmin.models.fields import ByteOrderTextField
from queenadmin.models.queues import Partition


class StreamQuery(models.Model):
    """A registered streaming query (Queen's ``/streams/v1/queries``).

    Keyed by ``name``; the id is what the client sends back on every call.
    """

    id = models.UUIDField(primary_key=True)
    name = ByteOrderTextField(unique=True)
    source_queue = ByteOrderTextField()
    #: "" when the pipeline ends without ``.to(queue)``.
    sink_queue = models.TextField(blank=True, default="")
    #: sha256 of the pipeline's operator configs; a change needs ``reset``.
    config_hash = models.TextField()
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    def __str__(self) -> str:
        return self.name


class StreamState(models.Model):
    """One key of a query's state on one source partition."""

    query = models.ForeignKey(StreamQuery, on_delete=models.CASCADE, related_name="state")
    partition = models.ForeignKey(Partition, on_delete=models.CASCADE, related_name="+")
    key = ByteOrderTextField()
    #: The value as compact JSON text, stored verbatim.
    value_json = models.TextField()
    #: ``value.windowEnd`` when it is a number (ms): what the idle flush
    #: asks for with ``ripe_at_or_before``. None for rows without a window.
    ripe_at_ms = models.BigIntegerField(null=True, blank=True)
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["query", "partition", "key"], name="streamstate_query_partition_key_uniq")
        ]
        indexes = [models.Index(fields=["query", "partition", "ripe_at_ms"], name="streamstate_ripe_idx")]

    def __str__(self) -> str:
        return f"{self.query_id}/{self.partition_id}/{self.key}"
