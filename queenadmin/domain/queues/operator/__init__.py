"""A queue's operator actions: what a person does to a queue, its consumer
groups, its dead letters and its messages, as the admin, the dashboard and
Queen's console routes ask. Callers import this package
(``from queenadmin.domain.queues import operator as queue_operator``); the
submodules are:

- ``configure``: change a queue's options, audited;
- ``recovery``: a consumer group's seek, reset and delete, and a queue
  purge, audited;
- ``dlq``: replay (``dlq:<id>``, to the failed group or every group, into
  the dead letter's own queue or another one; one by id, as Queen's
  ``POST /dlq/:id/replay``, or in batches) and purge of dead letters,
  audited;
- ``replays``: the record of where each replayed dead letter's copy went,
  so a second replay answers ``duplicate`` (kept ``DLQ_REPLAY_KEEP_SECONDS``,
  trimmed by the retention loop);
- ``messages``: one message's delete, retry from the DLQ and move to the
  DLQ (the console's routes under ``/api/v1/admin``);
- ``pause``: pause and resume a queue's pops, or one consumer group's,
  audited;
- ``push``: push one message into a queue, stamped with the operator as
  its producer, audited.

Each write comes as ``<verb>_in_txn`` (inside the caller's transaction)
and as ``<verb>``, its own outermost transaction.
"""

from __future__ import annotations

from queenadmin.domain.queues.operator.configure import queue_operator_configure, queue_operator_configure_in_txn
from queenadmin.domain.queues.operator.dlq import (
    DLQ_BATCH,
    OWN_PLACE,
    REPLAY_PREFIX,
    DLQAction,
    DLQReplayed,
    DLQVerb,
    ReplayDestination,
    ReplayTarget,
    queue_dlq_action,
    queue_dlq_action_in_txn,
    queue_dlq_replay,
    queue_dlq_replay_in_txn,
    replay_transaction_id,
)
from queenadmin.domain.queues.operator.messages import (
    MessageDeadLettered,
    MessageDeleted,
    MessageRetried,
    queue_message_dead_letter,
    queue_message_dead_letter_in_txn,
    queue_message_delete,
    queue_message_delete_in_txn,
    queue_message_retry,
    queue_message_retry_in_txn,
)
from queenadmin.domain.queues.operator.pause import (
    PauseChange,
    PauseState,
    queue_group_pause,
    queue_group_pause_in_txn,
    queue_group_resume,
    queue_group_resume_in_txn,
    queue_pause,
    queue_pause_in_txn,
    queue_pause_state,
    queue_resume,
    queue_resume_in_txn,
)
from queenadmin.domain.queues.operator.push import queue_operator_push, queue_operator_push_in_txn
from queenadmin.domain.queues.operator.recovery import (
    PURGE_BATCH,
    GroupAction,
    GroupRecovery,
    QueuePurge,
    SeekTo,
    queue_group_operator,
    queue_group_operator_in_txn,
    queue_purge,
    queue_purge_in_txn,
)
from queenadmin.domain.queues.operator.replays import (
    ReplayRecord,
    queue_dlq_replays_trim,
    replay_record,
    replayed_dead_letter_queues,
)

__all__ = [
    "DLQ_BATCH",
    "OWN_PLACE",
    "PURGE_BATCH",
    "REPLAY_PREFIX",
    "DLQAction",
    "DLQReplayed",
    "DLQVerb",
    "GroupAction",
    "GroupRecovery",
    "MessageDeadLettered",
    "MessageDeleted",
    "MessageRetried",
    "PauseChange",
    "PauseState",
    "QueuePurge",
    "ReplayDestination",
    "ReplayRecord",
    "ReplayTarget",
    "SeekTo",
    "queue_dlq_action",
    "queue_dlq_action_in_txn",
    "queue_dlq_replay",
    "queue_dlq_replay_in_txn",
    "queue_dlq_replays_trim",
    "queue_group_operator",
    "queue_group_operator_in_txn",
    "queue_group_pause",
    "queue_group_pause_in_txn",
    "queue_group_resume",
    "queue_group_resume_in_txn",
    "queue_message_dead_letter",
    "queue_message_dead_letter_in_txn",
    "queue_message_delete",
    "queue_message_delete_in_txn",
    "queue_message_retry",
    "queue_message_retry_in_txn",
    "queue_operator_configure",
    "queue_operator_configure_in_txn",
    "queue_operator_push",
    "queue_operator_push_in_txn",
    "queue_pause",
    "queue_pause_in_txn",
    "queue_pause_state",
    "queue_purge",
    "queue_purge_in_txn",
    "queue_resume",
    "queue_resume_in_txn",
    "replay_record",
    "replay_transaction_id",
    "replayed_dead_letter_queues",
]
