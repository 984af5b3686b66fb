"""A queue's life: create or configure it, and delete it with its contents.

(A push also creates the queues it names, with ``AUTO_CREATE_OPTIONS``.)
A delete removes the messages with one statement of the queue store
(``store.delete_queue_messages``), not row by row.

Given a ``who`` (the API's caller, ``api/audit.py``), a configure that
changed the queue (or made it) and a delete that found it record their
audit entry in their transaction; a configure that sets what is already
set records nothing, as clients configure their queues at every start.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import Count, F, Sum

from queenadmin.domain import clock, events
from queenadmin.domain.audit import Who
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
def queue_configure(*, request: ConfigureRequest, who: Who | None = None) -> QueueConfig:
    """Create the queue ``request`` names or change it; return the result.

    A new queue gets ``request.options`` over the defaults, whatever
    ``replace`` says. Refusals happened earlier: ``QueueOptions`` holds only
    valid values. With ``who``, a configure that made or changed the queue
    writes ``who``'s audit entry (``queue.configure``, before and after).
    Must be the outermost transaction (``queue_configure_in_txn`` runs
    inside one).
    """
    now = clock.now()
    if who is None:
        return queue_configure_in_txn(request=request, now=now)
    # Locked first, so "before" is what this configure changes.
    found = Queue.objects.select_for_update().filter(name=request.name).values_list("options", "namespace", "task")
    before = found.first()
    config = queue_configure_in_txn(request=request, now=now)
    after = (dict(config.options), config.namespace, config.task)
    if before is None or (dict(before[0]), before[1], before[2]) != after:
        who.record_in_txn(
            now=now,
            action="queue.configure",
            target=config.name,
            before="(no queue: this configure made it)" if before is None else _described(*before),
            after=_described(*after),
        )
    return config


def _described(options: Mapping[str, Any], namespace: str | None, task: str | None) -> str:
    """A queue's settings as an audit entry shows them: the options as
    JSON (as the dashboard's configure writes them), then namespace and task."""
    text = json.dumps(dict(options), sort_keys=True)
    if namespace is not None:
        text += f"; namespace {namespace}"
    if task is not None:
        text += f"; task {task}"
    return text


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
def queue_delete(*, name: str, who: Who | None = None) -> bool:
    """Delete queue ``name`` with its messages, cursors and DLQ.

    Returns whether it existed; with ``who``, a delete that found it writes
    ``who``'s audit entry (``queue.delete``). Must be the outermost
    transaction (``queue_delete_in_txn`` runs inside one).
    """
    return queue_delete_in_txn(name=name, who=who)


def queue_delete_in_txn(*, name: str, who: Who | None = None) -> bool:
    """``queue_delete`` inside the caller's transaction.

    The caller must hold an open transaction (asserted) and commit it; the
    broadcast goes out on commit.
    """
    assert connection.in_atomic_block
    queue_id = Queue.objects.filter(name=name).values_list("id", flat=True).first()
    if queue_id is None or not lock_queue_rows([queue_id], exclusive=True):
        return False
    if who is not None:
        _record_delete(who, queue_id, name)
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


def _record_delete(who: Who, queue_id: int, name: str) -> None:
    # What the queue held, from the partitions' offsets (one aggregate, not
    # a count of the messages): deleted offsets make it an upper bound.
    held = Partition.objects.filter(queue_id=queue_id).aggregate(
        partitions=Count("id"), messages=Sum(F("next_offset") - F("log_start"))
    )
    groups = ConsumerGroup.objects.filter(queue_id=queue_id).count()
    dead = DeadLetter.objects.filter(queue_id=queue_id).count()
    who.record_in_txn(
        now=clock.now(),
        action="queue.delete",
        target=name,
        before=(
            f"{held['partitions']} partitions, up to {held['messages'] or 0} messages, "
            f"{groups} consumer groups, {dead} dead letters"
        ),
        after="deleted with its messages, cursors, consumer groups and dead letters",
    )
