"""An operator's change of a queue's options, audited.

The same change as a client's ``configure`` (``lifecycle``), with the
operator's audit entry in the same transaction.
"""

from __future__ import annotations

import json
from datetime import datetime

from django.db import connection, transaction

from queenadmin.domain import clock
from queenadmin.domain.audit import Who
from queenadmin.domain.queues.lifecycle import ConfigureRequest, QueueConfig, queue_configure_in_txn
from queenadmin.domain.queues.options import QueueOptions
from queenadmin.errors import QueueNotFound
from queenadmin.models.queues import Queue


def queue_operator_configure_in_txn(
    *, name: str, options: QueueOptions, who: Who, now: datetime | None = None
) -> QueueConfig:
    """Change the options of the existing queue ``name`` on an operator's word.

    The same change as a ``configure`` (merged, not replaced), with
    ``who``'s audit entry (options before and after, as JSON) in the same
    transaction. Raises ``QueueNotFound`` when there is no such queue (an
    operator changes queues; creating one is the clients' business). Runs inside
    the caller's transaction.
    """
    assert connection.in_atomic_block
    now = now or clock.now()
    before = Queue.objects.select_for_update().filter(name=name).values_list("options", flat=True).first()
    if before is None:
        raise QueueNotFound(f"no queue {name}")
    config = queue_configure_in_txn(request=ConfigureRequest(name=name, options=options), now=now)
    who.record_in_txn(
        now=now,
        action="queue.configure",
        target=name,
        before=json.dumps(before, sort_keys=True),
        after=json.dumps(dict(config.options), sort_keys=True),
    )
    return config


#: ``queue_operator_configure_in_txn`` as its own transaction: must be the outermost call.
queue_operator_configure = transaction.atomic(durable=True)(queue_operator_configure_in_txn)
