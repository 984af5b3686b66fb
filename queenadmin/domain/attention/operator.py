"""An operator's change of the attention thresholds, audited.

The entry (``queue.attention``) is written in the transaction of the
change, with the thresholds stored before and after, so it exists exactly
when the change committed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import transaction

from queenadmin.domain import clock, events
from queenadmin.domain.attention.calls import DEFAULTS_KEY, override_of
from queenadmin.domain.attention.ops import FIELDS, Override, check_override
from queenadmin.domain.attention.store import store
from queenadmin.domain.audit import Who
from queenadmin.errors import QueueNotFound
from queenadmin.models import Queue

#: How an audit entry names the defaults.
DEFAULTS_TARGET = "every queue (defaults)"


@dataclass(frozen=True)
class ThresholdsSet:
    """What a change stored: the queue ("" for the defaults), before and after."""

    queue: str
    before: Override
    after: Override


@transaction.atomic(durable=True)
def attention_thresholds_set(*, queue: str, override: Override, who: Who, now: datetime | None = None) -> ThresholdsSet:
    """Store ``override`` as ``queue``'s thresholds ("" for the defaults).

    A field left None takes the default; an override with none set forgets
    the queue's row. Raises ``InvalidArgument`` for a value out of
    ``ops.LIMITS`` and ``QueueNotFound`` for a queue that does not exist.
    Writes the audit entry ``queue.attention``. Must be the outermost call.
    """
    now = now or clock.now()
    check_override(override)
    if queue != DEFAULTS_KEY and ("\x00" in queue or not Queue.objects.filter(name=queue).exists()):
        raise QueueNotFound(f"no queue {queue}")
    before = override_of(store().threshold_of(queue))
    if override == Override():
        store().delete_threshold(queue)
    else:
        store().write_threshold(queue, {name: getattr(override, name) for name in FIELDS}, now)
    who.record_in_txn(
        now=now,
        action="queue.attention",
        target=queue or DEFAULTS_TARGET,
        before=before.describe(),
        after=override.describe(),
    )
    message: dict[str, object] = {"type": "queues.changed"}
    if queue != DEFAULTS_KEY:
        message["queues"] = [queue]
    events.broadcast_on_commit(events.QUEUES_GROUP, message)
    return ThresholdsSet(queue, before, override)
