"""A queue's life: create or configure it, and delete it with its contents.

(A push also creates the queues it names, with ``AUTO_CREATE_OPTIONS``.)
A delete removes the messages with one statement of the queue store
(``store.delete_queue_messages``), not row by row.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import IntegrityError, connection, transaction

from queenadmin.domain import clock, events
from queenadmin.domain.names import check_engine_name
from queenadmin.domain.queues.options import QueueOptions, merge_options
from queenadmin.domain.queues.refs import lock_queue_rows
from queenadmin.domain.queues.store import store
from queenadmin.domain.queues.traces import traces_delete_for_queue_in_txn
from queenadmin.models.queues import ConsumerCursor, ConsumerGroup, DeadLetter, Partition, Queue


@dataclass(frozen=True)
class ConfigureRequest:
    """Create queue ``name`` or change it.

    ``namespace`` and ``task`` of None leave them as they are. ``replace``
    resets the options not in ``options`` to their defaults; otherwise they
    keep their values.
    """

    name: str
    namespace: str | None = None
    task: str | None = None
    options: QueueOptions = field(default_factory=QueueOptions)
    replace: bool = False


@dataclass(frozen=True)
class QueueConfig:
    """A queue after a configure; ``created`` when the call made it."""

    id: int
    name: str
    namespace: str | None
    task: str | None
    #: Every option with its value, under the stored names (``options.py``).
    options: Mapping[str, Any]
    created: bool


@transaction.atomic(durable=True)
def queue_configure(*, request: ConfigureRequest) -> QueueConfig:
    """Create the queue ``request`` names or change it; return the result.

    A new queue gets ``request.options`` over the defaults, whatever
    ``replace`` says. Refusals happened earlier: ``QueueOptions`` holds only
    valid values. Must be the outermost transaction
    (``queue_configure_in_txn`` runs inside one).
    """
    return queue_configure_in_txn(request=request, now=clock.now())


def queue_configure_in_txn(*, request: ConfigureRequest, now: datetime) -> QueueConfig:
    """``queue_configure`` inside the caller's transaction, at time ``now``.

    The caller must hold an open transaction (asserted) and commit it; the
    queue row stays locked until then and the broadcast goes out on commit.
    """
    assert connection.in_atomic_block
    name = request.name
    queue = Queue.objects.select_for_update().filter(name=name).first()
    created = queue is None
    if queue is None:
        check_engine_name(name, "queue")
        try:
            with transaction.atomic():
                queue = Queue.objects.create(
                    name=name,
                    namespace=request.namespace,
                    task=request.task,
                    options=merge_options({}, request.options, replace=True),
                    created_at=now,
                )
        except IntegrityError:
            queue = Queue.objects.select_for_update().get(name=name)
            created = False
    if not created:
        queue.options = merge_options(queue.options, request.options, replace=request.replace)
        if request.namespace is not None:
            queue.namespace = request.namespace
        if request.task is not None:
            queue.task = request.task
        queue.save(update_fields=["options", "namespace", "task"])
    events.broadcast_on_commit(events.QUEUES_GROUP, {"type": "queues.changed", "queues": [name]})
    return QueueConfig(queue.pk, queue.name, queue.namespace, queue.task, dict(queue.options), created)


@transaction.atomic(durable=True)
def queue_delete(*, name: str) -> bool:
    """Delete queue ``name`` with its messages, cursors and DLQ.

    Returns whether it existed. Must be the outermost transaction
    (``queue_delete_in_txn`` runs inside one).
    """
    return queue_delete_in_txn(name=name)


def queue_delete_in_txn(*, name: str) -> bool:
    """``queue_delete`` inside the caller's transaction.

    The caller must hold an open transaction (asserted) and commit it; the
    broadcast goes out on commit.
    """
    assert connection.in_atomic_block
    queue_id = Queue.objects.filter(name=name).values_list("id", flat=True).first()
    if queue_id is None or not lock_queue_rows([queue_id], exclusive=True):
        return False
    # Children first, in bulk: the ORM cascade would load every message.
    DeadLetter.objects.filter(queue_id=queue_id).delete()
    ConsumerCursor.objects.filter(partition__queue_id=queue_id).delete()
    ConsumerGroup.objects.filter(queue_id=queue_id).delete()
    traces_delete_for_queue_in_txn(queue_id=queue_id)
    store().delete_queue_messages(queue_id)
    Partition.objects.filter(queue_id=queue_id).delete()
    Queue.objects.filter(pk=queue_id).delete()
    events.broadcast_on_commit(events.QUEUES_GROUP, {"type": "queues.changed", "deleted": [name]})
    return True
