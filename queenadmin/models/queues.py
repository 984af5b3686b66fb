"""The message log: queues, partitions, messages, cursors and dead letters.

Depth is arithmetic (design.md section 2): a partition keeps its next
offset and its log start, a consumer group keeps a committed offset per
partition, and ``pending = last_offset - max(committed_offset, log_start - 1)``
(protocol section 11.3). Nothing counts messages.
"""

from __future__ import annotations

from django.db import models

from queenadmin.models.fields import ByteOrderTextField

#: The consumer group of queue mode: one shared cursor per partition.
QUEUE_MODE = "__QUEUE_MODE__"


class Queue(models.Model):
    """A named log; its options (protocol section 10) live in ``options``."""

    name = ByteOrderTextField(unique=True)
    # The wire protocol tells null from "" for these (a null namespace is
    # "none"), so they are nullable on purpose.
    namespace = models.TextField(null=True, blank=True)  # noqa: DJ001
    task = models.TextField(null=True, blank=True)  # noqa: DJ001
    #: Every option with its current value (defaults filled in).
    options = models.JSONField(default=dict)
    created_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["namespace", "task"], name="queue_ns_task_idx")]

    def __str__(self) -> str:
        return self.name


class Partition(models.Model):
    """A FIFO lane of a queue. Offsets start at 1 and have no gaps; the
    stored ones are ``log_start .. next_offset - 1``."""

    queue = models.ForeignKey(Queue, on_delete=models.CASCADE, related_name="partitions")
    name = ByteOrderTextField()
    #: The offset the next pushed message gets; ``next_offset - 1`` is the
    #: last message's offset (0 when empty).
    next_offset = models.BigIntegerField(default=1)
    #: The lowest offset still stored: retention deleted every offset below
    #: it (and only those). ``log_start == next_offset`` when none is left.
    log_start = models.BigIntegerField(default=1)
    #: Payload bytes of the messages still stored (pushes add, retention
    #: takes away what it deletes).
    retained_bytes = models.BigIntegerField(default=0)
    created_at = models.DateTimeField()
    last_push_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["queue", "name"], name="partition_queue_name_uniq")]

    def __str__(self) -> str:
        return f"{self.queue_id}/{self.name}"


class Message(models.Model):
    """One pushed message. Rows are immutable once written."""

    partition = models.ForeignKey(Partition, on_delete=models.CASCADE, related_name="messages")
    #: ``OFFSET`` is an SQL keyword; the column name spares raw SQL quoting.
    offset = models.BigIntegerField(db_column="msg_offset")
    #: The dedup key (protocol section 6); defaults to the message id.
    transaction_id = models.TextField()
    #: A UUIDv7 (time-ordered) in its 36-character text form.
    message_id = models.CharField(max_length=36)
    #: The payload as compact JSON text, returned verbatim.
    payload = models.TextField()
    trace_id = models.CharField(max_length=36, null=True, blank=True)  # noqa: DJ001
    created_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["partition", "offset"], name="message_partition_offset_uniq")]
        indexes = [
            models.Index(fields=["partition", "transaction_id"], name="message_partition_txn_idx"),
            # The dashboard's search finds a message by its id across queues.
            models.Index(fields=["message_id"], name="message_id_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.partition_id}@{self.offset}"


class ConsumerGroup(models.Model):
    """A named consumer group of a queue; stored on its first pop."""

    queue = models.ForeignKey(Queue, on_delete=models.CASCADE, related_name="groups")
    name = models.TextField()
    #: ``new`` or ``all``: where the group starts on partitions that existed
    #: when it registered. Partitions created later are read from the start.
    subscription_mode = models.CharField(max_length=8)
    created_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["queue", "name"], name="consumergroup_queue_name_uniq")]

    def __str__(self) -> str:
        return f"{self.queue_id}/{self.name}"


class ConsumerCursor(models.Model):
    """Where one consumer group stands on one partition, and its lease."""

    partition = models.ForeignKey(Partition, on_delete=models.CASCADE, related_name="cursors")
    group = models.TextField(db_column="group_name")
    #: Every offset up to here is done (acked or dead-lettered) for the group.
    committed_offset = models.BigIntegerField(default=0)
    #: ``committed_offset`` when the row was made (subscription start), so
    #: completed counts are arithmetic too.
    start_offset = models.BigIntegerField(default=0)
    #: The worker id of the one leased batch; shared by every partition the
    #: same pop claimed. Null when no batch is out.
    lease_id = models.CharField(max_length=36, null=True, blank=True)  # noqa: DJ001
    leased_until = models.DateTimeField(null=True, blank=True)
    #: The leased batch is ``committed_offset + 1 .. batch_last``.
    batch_last = models.BigIntegerField(default=0)
    #: How many times each offset above ``committed_offset`` was delivered
    #: to the group: sorted, disjoint ``[first, last, attempts]`` runs, with
    #: touching runs of equal attempts merged. An offset outside every run
    #: was never delivered. Trimmed whenever the cursor advances, so it
    #: only ever describes messages that are still pending.
    delivery_runs = models.JSONField(default=list)
    #: Retries spent by explicit ``failed`` acks on the current head.
    retry_count = models.IntegerField(default=0)
    dead_lettered = models.BigIntegerField(default=0)
    last_claim_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["partition", "group"], name="cursor_partition_group_uniq")]
        indexes = [models.Index(fields=["lease_id"], name="cursor_lease_idx")]

    def __str__(self) -> str:
        return f"{self.partition_id}/{self.group}@{self.committed_offset}"


class DeadLetter(models.Model):
    """A message a consumer group gave up on, with the reason."""

    queue = models.ForeignKey(Queue, on_delete=models.CASCADE, related_name="dead_letters")
    partition = models.ForeignKey(Partition, on_delete=models.CASCADE, related_name="dead_letters")
    group = models.TextField(db_column="group_name")
    offset = models.BigIntegerField(db_column="msg_offset")
    transaction_id = models.TextField()
    message_id = models.CharField(max_length=36)
    payload = models.TextField()
    error = models.TextField(null=True, blank=True)  # noqa: DJ001
    retry_count = models.IntegerField(default=0)
    #: When the message was pushed.
    created_at = models.DateTimeField()
    failed_at = models.DateTimeField()

    class Meta:
        indexes = [
            models.Index(fields=["queue", "failed_at"], name="deadletter_queue_idx"),
            # The dashboard pages a queue's DLQ by id (keyset) and replays
            # or purges it in id order.
            models.Index(fields=["queue", "id"], name="deadletter_queue_id_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.partition_id}@{self.offset} ({self.group})"
