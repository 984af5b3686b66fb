"""The dashboard's one search box: find a queue, lock, KV key, timer or message.

Every lookup is an index range or an index point lookup, bounded by
``LIMIT``: a queue name (prefix), a lock name (prefix), a KV key (prefix,
in every namespace, or ``namespace/key``), a timer key (prefix, in every
queue), a message id or transactionId (exact). Lookups that cross
namespaces or queues first list the distinct namespaces or timer queues
with a loose index scan (a recursive statement that hops from one value
to the next on the unique index), so they never read every row.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Model, Q

from queenadmin.domain.kv import LOCKS_NAMESPACE
from queenadmin.domain.kv.store.base import prefix_range
from queenadmin.models import KVEntry, Message, Partition, Queue, Timer
from queenadmin.plumbing import db

#: Results per kind.
LIMIT = 10
#: Longest query looked up (longer text cannot be a name we store).
MAX_QUERY_CHARS = 1024


@dataclass(frozen=True)
class Hit:
    """One result: what it is, its name, and a detail line."""

    kind: str
    label: str
    detail: str
    #: What names the object: (queue,), (lock name,), (namespace, key),
    #: (timer queue, timer key) or (queue, message id) for a message.
    ref: tuple[str, ...]


#: ``distinct_values`` lists every value: a limit no table here reaches.
_EVERY = 2**62


def distinct_values(model: type[Model], column: str) -> list[str]:
    """Every distinct value of ``model``'s indexed leading ``column``, in order.

    A loose index scan (``db.distinct_leading``): one index probe per value.
    """
    return db.distinct_leading(model, column, limit=_EVERY)


def search(*, text: str, now: datetime, kinds: frozenset[str]) -> list[Hit]:
    """Objects whose name is or starts with ``text``, of the ``kinds`` asked.

    ``kinds`` holds some of ``queue``, ``lock``, ``kv``, ``timer``,
    ``message`` (the caller drops those the user may not see).
    """
    text = text.strip()
    if not text or len(text) > MAX_QUERY_CHARS:
        return []
    hits: list[Hit] = []
    if "queue" in kinds:
        names = Queue.objects.filter(prefix_range("name", text)).order_by("name").values_list("name", flat=True)
        hits.extend(Hit("queue", name, "queue", (name,)) for name in names[:LIMIT])
    if "lock" in kinds:
        hits.extend(_locks(text, now))
    if "kv" in kinds:
        hits.extend(_kv(text, now))
    if "timer" in kinds:
        hits.extend(_timers(text))
    if "message" in kinds:
        hits.extend(_messages(text))
    return hits


def _locks(text: str, now: datetime) -> list[Hit]:
    rows = (
        KVEntry.objects.live(now)
        .filter(prefix_range("key", text), namespace=LOCKS_NAMESPACE)
        .order_by("key")
        .values_list("key", flat=True)[: LIMIT * 8]
    )
    held: dict[str, int] = {}
    for key in rows:
        name = key.rpartition("#")[0] or key
        if name.startswith(text):
            held[name] = held.get(name, 0) + 1
    return [
        Hit("lock", name, f"{n} permit{'s' if n != 1 else ''} held", (name,)) for name, n in list(held.items())[:LIMIT]
    ]


def _kv(text: str, now: datetime) -> list[Hit]:
    hits: list[Hit] = []
    namespace, slash, key = text.partition("/")
    if slash and namespace != LOCKS_NAMESPACE:
        row = KVEntry.objects.live(now).filter(namespace=namespace, key=key).values_list("version", flat=True).first()
        if row is not None:
            hits.append(_kv_hit(namespace, key, row))
    namespaces = [ns for ns in distinct_values(KVEntry, "namespace") if ns != LOCKS_NAMESPACE]
    if namespaces:
        rows = (
            KVEntry.objects.live(now)
            .filter(prefix_range("key", text), namespace__in=namespaces)
            .order_by("namespace", "key")
            .values_list("namespace", "key", "version")[:LIMIT]
        )
        hits.extend(_kv_hit(ns, k, v) for ns, k, v in rows if (ns, k) != (namespace, key))
    return hits


def _kv_hit(namespace: str, key: str, version: int) -> Hit:
    return Hit("kv", f"{namespace}/{key}", f"KV key, version {version}", (namespace, key))


def _timers(text: str) -> list[Hit]:
    queues = distinct_values(Timer, "queue")
    if not queues:
        return []
    rows = (
        Timer.objects.filter(prefix_range("timer_key", text), queue__in=queues)
        .order_by("queue", "timer_key")
        .values_list("queue", "timer_key", "deliver_at")[:LIMIT]
    )
    return [
        Hit(
            "timer",
            f"{queue}/{key}",
            f"timer due {deliver_at:%Y-%m-%d %H:%M:%S} UTC",
            (queue, key),
        )
        for queue, key, deliver_at in rows
    ]


def _messages(text: str) -> list[Hit]:
    partitions = dict(Partition.objects.values_list("id", "queue__name"))
    if not partitions:
        return []
    rows = (
        Message.objects.filter(Q(message_id=text) | Q(partition_id__in=list(partitions), transaction_id=text))
        .order_by("partition_id", "offset")
        .values_list("partition_id", "partition__name", "offset", "message_id")[:LIMIT]
    )
    return [
        Hit(
            "message",
            mid,
            f"message in {partitions[pid]}/{pname} at offset {offset}",
            (partitions[pid], mid),
        )
        for pid, pname, offset, mid in rows
    ]
