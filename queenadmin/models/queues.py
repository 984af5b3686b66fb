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

#: The offset of a dead letter whose message never reached the log (a timer
#: out of attempts). Offsets start at 0, so no real message has it.
NEVER_LOGGED = -1


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
    #: An operator paused every pop of the queue (``operator/pause.py``):
    #: they answer as on an empty queue; pushes, acks and leases go on.
    paused = models.BooleanField(default=False)
    #: The consumer groups whose pops of the queue are paused, sorted (a
    #: group not registered yet may be named: it is paused from its first
    #: pop). On the queue row, which every claim reads anyway.
    paused_groups = models.JSONField(default=list)

    class Meta:
        indexes = [models.Index(fields=["namespace", "task"], name="queue_ns_task_idx")]

    def __str__(self) -> str:
        return self.name


class Partition(models.Model):
    """A FIFO lane of a queue. Offsets start at 0 and have no gaps; the
    stored ones are ``log_start .. next_offset - 1``."""

    queue = models.ForeignKey(Queue, on_delete=models.CASCADE, related_name="partitions")
    name = ByteOrderTextField()
    #: The offset the next pushed message gets (the first gets 0);
    #: ``next_offset - 1`` is the last message's offset (-1 when empty).
    next_offset = models.BigIntegerField(default=0)
    #: The lowest offset still stored: retention deleted every offset below
    #: it (and only those). ``log_start == next_offset`` when none is left.
    log_start = models.BigIntegerField(default=0)
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

    #: No index of its own: the (partition, offset) constraint's index leads
    #: with it, and every push would keep a second one up to date.
    partition = models.ForeignKey(Partition, on_delete=models.CASCADE, related_name="messages", db_index=False)
    #: ``OFFSET`` is an SQL keyword; the column name spares raw SQL quoting.
    offset = models.BigIntegerField(db_column="msg_offset")
    #: The dedup key (protocol section 6); defaults to the message id.
    transaction_id = models.TextField()
    #: A UUIDv7 (time-ordered) in its 36-character text form.
    message_id = models.CharField(max_length=36)
    #: The payload as compact JSON text, returned verbatim.
    payload = models.TextField()
    trace_id = models.CharField(max_length=36, null=True, blank=True)  # noqa: DJ001
    #: Who pushed it (``producerSub``): the JWT's ``sub`` or our API token's
    #: name, stamped by the server (a value in the push body is ignored);
    #: None when the caller had neither (open mode, the dashboard).
    producer_sub = models.TextField(null=True, blank=True)  # noqa: DJ001
    #: The one consumer group a DLQ replay meant the message for
    #: (``dlq.queue_dlq_action_in_txn``): a claim of any other group passes
    #: over it as over a deleted offset. Null: every group (every push).
    for_group = models.TextField(null=True, blank=True)  # noqa: DJ001
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
    #: Last-value delivery (``conflation=true``): a pop of a partition hands
    #: out only its newest visible message, and acking it retires the older
    #: ones. Set by the pop that registers the group; the stored value wins
    #: over what later pops ask for.
    conflation = models.BooleanField(default=False)
    created_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["queue", "name"], name="consumergroup_queue_name_uniq")]

    def __str__(self) -> str:
        return f"{self.queue_id}/{self.name}"


class ConsumerCursor(models.Model):
    """Where one consumer group stands on one partition, and its lease."""

    partition = models.ForeignKey(Partition, on_delete=models.CASCADE, related_name="cursors")
    group = models.TextField(db_column="group_name")
    #: Every offset up to here is done (acked or dead-lettered) for the
    #: group; -1: nothing yet (offsets start at 0).
    committed_offset = models.BigIntegerField(default=-1)
    #: ``committed_offset`` when the row was made (subscription start), so
    #: completed counts are arithmetic too.
    start_offset = models.BigIntegerField(default=-1)
    #: The worker id of the one leased batch; shared by every partition the
    #: same pop claimed. Null when no batch is out.
    lease_id = models.CharField(max_length=36, null=True, blank=True)  # noqa: DJ001
    leased_until = models.DateTimeField(null=True, blank=True)
    #: The leased batch is ``committed_offset + 1 .. batch_last``.
    batch_last = models.BigIntegerField(default=-1)
    #: How many times each offset above ``committed_offset`` was delivered
    #: to the group: sorted, disjoint ``[first, last, attempts]`` runs, with
    #: touching runs of equal attempts merged. An offset outside every run
    #: was never delivered. Trimmed whenever the cursor advances, so it
    #: only ever describes messages that are still pending.
    delivery_runs = models.JSONField(default=list)
    #: Retries spent by explicit ``failed`` acks on the current head.
    retry_count = models.IntegerField(default=0)
    dead_lettered = models.BigIntegerField(default=0)
    #: Monotonic counters for the statistics sampler, bumped by the claim
    #: and ack UPDATEs that already run: messages handed out (every
    #: delivery, redeliveries and auto-acked pops included), messages
    #: completed (by an ack or an auto-ack pop; not dead letters nor
    #: position moves), and failed acks applied (one per nack, also the
    #: one that files the message in the DLQ).
    delivered = models.BigIntegerField(default=0)
    acked = models.BigIntegerField(default=0)
    failed = models.BigIntegerField(default=0)
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
    #: The message's offset in its partition; ``NEVER_LOGGED`` (-1) for a
    #: message that never reached the log (a timer out of attempts).
    offset = models.BigIntegerField(db_column="msg_offset")
    transaction_id = models.TextField()
    message_id = models.CharField(max_length=36)
    payload = models.TextField()
    #: The message's ``producer_sub``, filed with it.
    producer_sub = models.TextField(null=True, blank=True)  # noqa: DJ001
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


class DeadLetterReplay(models.Model):
    """Where a replay moved a dead letter (its copy, ``dlq:<id>``): kept
    after the dead letter is removed, so a second replay of the id answers
    ``duplicate`` with the first one's copy instead of 404 ``gone``.

    Written in the replay's transaction (``operator/replays.py``), trimmed
    by the retention loop after ``DLQ_REPLAY_KEEP_SECONDS``. No foreign
    keys: the dead letter is gone, and either queue may go too.
    """

    #: The dead letter's id (ids are never reused: AUTOINCREMENT on SQLite,
    #: a sequence on PostgreSQL).
    dead_letter_id = models.BigIntegerField(primary_key=True)
    #: The dead letter's queue, and the group that gave up on the message.
    source_queue = ByteOrderTextField()
    group = models.TextField(db_column="group_name")
    original_transaction_id = models.TextField()
    #: Where the copy went (its transactionId is ``dlq:<dead_letter_id>``).
    queue = ByteOrderTextField()
    partition = ByteOrderTextField()
    message_id = models.CharField(max_length=36)
    offset = models.BigIntegerField(db_column="msg_offset")
    replayed_at = models.DateTimeField()
    #: Who replayed it (``Who.actor``), and through what (``Who.via``).
    actor = models.TextField()
    via = models.CharField(max_length=16)

    class Meta:
        indexes = [models.Index(fields=["replayed_at"], name="dlqreplay_replayed_at_idx")]

    def __str__(self) -> str:
        return f"dlq:{self.dead_letter_id} -> {self.queue}/{self.partition}@{self.offset}"


class QueueSample(models.Model):
    """A queue's counters at one tick of the statistics sampler.

    Rows of ``resolution`` seconds (the sampler's interval, then the
    roll-up's coarser one) at ``at``, the tick's aligned start. No foreign
    key: a queue's history outlives the queue and goes by pruning, and the
    sampler never waits on a queue delete.
    """

    queue_id = models.BigIntegerField()
    queue = ByteOrderTextField()
    #: Seconds this row covers, ending at ``at + resolution``.
    resolution = models.IntegerField()
    at = models.DateTimeField()
    #: Cumulative counters (pushed = offsets handed out; the rest summed
    #: over every cursor of the queue) when sampled: the next tick's base.
    pushed_total = models.BigIntegerField()
    popped_total = models.BigIntegerField()
    acked_total = models.BigIntegerField()
    failed_total = models.BigIntegerField()
    dlq_total = models.BigIntegerField()
    #: What happened during the row's interval (never negative: a counter
    #: that fell, e.g. a deleted consumer group, counts as 0).
    pushed = models.BigIntegerField()
    popped = models.BigIntegerField()
    acked = models.BigIntegerField()
    failed = models.BigIntegerField()
    dlq = models.BigIntegerField()
    #: Gauges at the end of the interval: messages pending for the slowest
    #: group (``next_offset - 1 - committed``), and the age in seconds of
    #: the oldest message a pop could claim (0 when none).
    depth = models.BigIntegerField()
    oldest_claimable_age = models.FloatField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["queue", "resolution", "at"], name="queuesample_queue_res_at_uniq")
        ]
        indexes = [models.Index(fields=["resolution", "at"], name="queuesample_res_at_idx")]

    def __str__(self) -> str:
        return f"{self.queue}@{self.at:%Y-%m-%dT%H:%M:%S} ({self.resolution} s)"


class QueueSampleTotal(models.Model):
    """Every queue's ``QueueSample`` rows of one tick, summed: one row a tick.

    Written with the rows it sums (the sampler's tick, the roll-up's
    interval) and pruned with them, so the series of all queues (the
    overview's chart) reads one row a tick, not one per queue.
    """

    resolution = models.IntegerField()
    at = models.DateTimeField()
    #: What happened during the interval, every queue summed.
    pushed = models.BigIntegerField()
    popped = models.BigIntegerField()
    acked = models.BigIntegerField()
    failed = models.BigIntegerField()
    dlq = models.BigIntegerField()
    #: Every queue's depth summed, and the oldest claimable age of any queue.
    depth = models.BigIntegerField()
    oldest_claimable_age = models.FloatField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["resolution", "at"], name="queuesampletotal_res_at_uniq")]

    def __str__(self) -> str:
        return f"all queues@{self.at:%Y-%m-%dT%H:%M:%S} ({self.resolution} s)"


class GroupSample(models.Model):
    """One consumer group's counters on one queue at one tick of the sampler.

    The group's share of ``QueueSample``: written by the same step, at the
    sampler's interval only (no roll-up), and kept
    ``history.GROUP_SAMPLES_RETENTION_SECONDS``: its reader is the rate
    over the last minutes (``domain/queues/rates.py``). No foreign key, as
    ``QueueSample``.
    """

    queue_id = models.BigIntegerField()
    queue = ByteOrderTextField()
    group = models.TextField(db_column="group_name")
    at = models.DateTimeField()
    #: The group's cumulative counters over its cursors of the queue
    #: (``ConsumerCursor.delivered``, ``acked``, ``failed``,
    #: ``dead_lettered``) when sampled: the next tick's base.
    popped_total = models.BigIntegerField()
    acked_total = models.BigIntegerField()
    failed_total = models.BigIntegerField()
    dlq_total = models.BigIntegerField()
    #: What happened during the tick's interval (never negative).
    popped = models.BigIntegerField()
    acked = models.BigIntegerField()
    failed = models.BigIntegerField()
    dlq = models.BigIntegerField()
    #: Messages the group had not finished at the end of the interval,
    #: every partition (``board.GroupLag.lag``).
    lag = models.BigIntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["queue", "group", "at"], name="groupsample_queue_group_at_uniq")]
        indexes = [models.Index(fields=["at"], name="groupsample_at_idx")]

    def __str__(self) -> str:
        return f"{self.queue}/{self.group}@{self.at:%Y-%m-%dT%H:%M:%S}"


class AttentionThreshold(models.Model):
    """When a queue needs attention: one queue's overrides, or the defaults.

    The row whose ``queue`` is empty holds the deployment's defaults (no
    queue name is empty); any other row overrides them for the queue of
    that name. A field left empty takes the default (the defaults row's,
    else ``domain.attention.ops.DEFAULTS``). Keyed by name, as the samples
    are: a queue deleted and made again keeps its thresholds. Written only
    through ``domain.attention.operator`` (audited).
    """

    #: The queue's name; "" for the defaults.
    queue = ByteOrderTextField(unique=True)
    #: Flag a queue whose slowest group has more than this many messages
    #: pending (0: never).
    max_lag = models.BigIntegerField(null=True, blank=True)
    #: Flag a queue whose oldest claimable message is older than this (0: never).
    max_age_seconds = models.IntegerField(null=True, blank=True)
    #: Flag a queue whose DLQ took at least this many dead letters within
    #: the window (0: never).
    dlq_growth = models.IntegerField(null=True, blank=True)
    #: The window of "no reader", "stalled", "backlog rising" and the DLQ's growth.
    window_minutes = models.IntegerField(null=True, blank=True)
    updated_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"attention thresholds of {self.queue or 'every queue'}"


class Trace(models.Model):
    """One trace event a consumer recorded on a message (``POST /traces``)."""

    #: A UUIDv7: the id the wire shows.
    trace_id = models.CharField(max_length=36, unique=True)
    partition = models.ForeignKey(Partition, on_delete=models.CASCADE, related_name="traces")
    transaction_id = models.TextField()
    #: The traced message's offset in its partition (for its payload).
    offset = models.BigIntegerField(db_column="msg_offset")
    group = models.TextField(db_column="group_name")
    event_type = models.TextField()
    #: The event's ``data`` as compact JSON text, returned verbatim.
    data = models.TextField()
    worker_id = models.TextField(null=True, blank=True)  # noqa: DJ001
    created_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["partition", "transaction_id", "id"], name="trace_message_idx")]

    def __str__(self) -> str:
        return f"{self.partition_id}/{self.transaction_id} {self.event_type}"


class TraceName(models.Model):
    """A name a trace event was filed under; one trace may have several."""

    trace = models.ForeignKey(Trace, on_delete=models.CASCADE, related_name="names")
    name = models.TextField()
    #: The trace's time, copied so a name's page reads one index.
    created_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["trace", "name"], name="tracename_trace_name_uniq")]
        indexes = [models.Index(fields=["name", "created_at", "trace"], name="tracename_name_idx")]

    def __str__(self) -> str:
        return f"{self.name} ({self.trace_id})"


class TraceNameSummary(models.Model):
    """A trace name's counts, kept by every trace write so the names list pages."""

    name = models.TextField(unique=True)
    #: Trace events filed under the name.
    traces = models.BigIntegerField(default=0)
    #: Distinct messages those events are about.
    messages = models.BigIntegerField(default=0)
    last_seen = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["-last_seen", "name"], name="tracenamesummary_seen_idx")]

    def __str__(self) -> str:
        return f"{self.name} ({self.traces})"
