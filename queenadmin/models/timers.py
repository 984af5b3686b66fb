"""Timers: messages scheduled for later, keyed by (queue, timer key)."""

from __future__ import annotations

from django.db import models

from queenadmin.models.fields import ByteOrderTextField


class Timer(models.Model):
    """A pending timer. Firing appends its message and deletes the row.

    The row is the whole state: there is no tombstone, so a timer that is
    gone was cancelled or fired (the log has the fired message under
    ``txn``).
    """

    queue = ByteOrderTextField()
    timer_key = ByteOrderTextField()
    partition = models.TextField(default="Default")
    #: The message is appended no earlier than this.
    deliver_at = models.DateTimeField()
    #: When the loop next tries it: ``deliver_at``, or later while a failed
    #: fire backs off. Never earlier than ``deliver_at``.
    fire_at = models.DateTimeField()
    #: Becomes the fired message's ``transactionId`` (the log's dedup key).
    txn = models.TextField()
    #: Minted at schedule time; the fired message gets this id.
    message_id = models.CharField(max_length=36)
    #: The payload as the client sent it, decoded (and decompressed).
    payload = models.BinaryField()
    #: What the fired message carries: the payload when it is JSON text,
    #: else ``{"_raw_b64": ...}`` so nothing is lost.
    payload_json = models.TextField()
    encrypted = models.BooleanField(default=False)
    producer_sub = models.TextField(null=True, blank=True)  # noqa: DJ001
    #: Failed fires so far; a reschedule starts again at 0.
    attempts = models.IntegerField(default=0)
    last_error = models.TextField(null=True, blank=True)  # noqa: DJ001
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["queue", "timer_key"], name="timer_queue_key_uniq")]
        indexes = [
            models.Index(fields=["fire_at", "id"], name="timer_fire_idx"),
            models.Index(fields=["deliver_at", "id"], name="timer_deliver_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.queue}/{self.timer_key} at {self.deliver_at:%Y-%m-%dT%H:%M:%S}Z"
