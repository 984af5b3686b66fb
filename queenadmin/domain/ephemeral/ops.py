"""Ephemeral queues: the rules (protocol-wave3.md section B).

A queue holds one ring per partition and one cursor per (group,
partition) over it; ``__QUEUE_MODE__`` is the group of pops without one.
Sequence numbers are per queue (so "oldest" is the smallest, across
partitions) and FIFO holds per partition. A delivery without ``autoAck``
leases the message to the group for ``leaseSeconds``; an expired lease is
redelivered (attempts + 1) before the cursor moves on, and dropped for
that group once attempts reach ``retryLimit``. A message leaves its ring
when every group of the queue is past it and holds no lease on it, or
when a bound (``policy=dropOldest``), its ``ttlSeconds`` or a reset drops
it.

Every write holds the queue's state row (``store.claim_queue``) until
commit, so pushes, pops and acks of one queue take turns, on every
replica. Ids are ``e:<epoch hex>:<partition>:<seq>``; the epoch is drawn
anew when the state row is made (a new queue, or PostgreSQL emptied the
unlogged tables after a crash) and on reset, so an older id is ``stale``.
"""

from __future__ import annotations

import json
import secrets
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

from django.db import transaction

from queenadmin.conf import settings
from queenadmin.domain import clock
from queenadmin.domain.ephemeral.store import GroupGauge, PartitionGauge, QueueRow, store
from queenadmin.domain.queues import wakeups
from queenadmin.errors import (
    EphemeralBadRequest,
    EphemeralQueueFull,
    EphemeralQueueNotFound,
    EphemeralUnavailable,
)
from queenadmin.models.queues import QUEUE_MODE as QUEUE_MODE

DEFAULT_PARTITION = "Default"
MAX_BYTES = 16 * 1024 * 1024
MAX_LENGTH = 10_000
LEASE_MAX_SECONDS = 24 * 3600
#: A longer ttlSeconds is the same as none in practice (about 68 years).
TTL_MAX_SECONDS = 2**31 - 1
RETRY_MAX = 1000
WINDOW_MAX_MS = 60_000
WINDOW_MAX_COUNT = 10_000
_INT_OPTIONS = ("maxBytes", "maxLength", "ttlSeconds", "leaseSeconds", "retryLimit")
OPTION_NAMES = (*_INT_OPTIONS, "policy", "windowBuffer")
_COMPLETED = frozenset({"completed", "success", "acked", "ok"})

Outcome = Literal["acked", "redelivered", "stale", "unknown"]


def now_ms() -> int:
    return int(clock.now().timestamp() * 1000)


@dataclass(frozen=True, slots=True)
class Options:
    """A queue's effective options: defaults, lowered by its declaration."""

    max_bytes: int = MAX_BYTES
    max_length: int = MAX_LENGTH
    policy: Literal["reject", "dropOldest"] = "reject"
    ttl_seconds: int = 0
    lease_seconds: int = 30
    retry_limit: int = 5
    window_ms: int = 0
    window_count: int = 0

    def wire(self) -> dict[str, Any]:
        return {
            "maxBytes": self.max_bytes,
            "maxLength": self.max_length,
            "policy": self.policy,
            "ttlSeconds": self.ttl_seconds,
            "leaseSeconds": self.lease_seconds,
            "retryLimit": self.retry_limit,
            "windowBuffer": {"ms": self.window_ms, "count": self.window_count},
        }


def _whole(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise EphemeralBadRequest(f"options.{name} must be a non-negative integer")
    return value


def check_options(raw: Any) -> dict[str, Any]:
    """Refuse options the broker does not know or cannot read; return them
    as sent, less those given as null (which read as absent)."""
    if not isinstance(raw, dict):
        raise EphemeralBadRequest("options must be an object")
    given: dict[str, Any] = {name: value for name, value in raw.items() if value is not None}
    if isinstance(given.get("windowBuffer"), dict):
        given["windowBuffer"] = {k: v for k, v in given["windowBuffer"].items() if v is not None}
    for name, value in given.items():
        if name not in OPTION_NAMES:
            raise EphemeralBadRequest(f"unknown option {name!r}")
        if name in _INT_OPTIONS:
            _whole(value, name)
        elif name == "policy" and value not in ("reject", "dropOldest"):
            raise EphemeralBadRequest("options.policy must be reject or dropOldest")
        elif name == "windowBuffer":
            if not isinstance(value, dict) or set(value) - {"ms", "count"}:
                raise EphemeralBadRequest("options.windowBuffer must be {ms, count}")
            for key, part in value.items():
                _whole(part, f"windowBuffer.{key}")
    return given


def effective(options_json: str) -> Options:
    """The clamped options of a declaration ("" or ``{}``: the defaults)."""
    raw: dict[str, Any] = json.loads(options_json) if options_json else {}
    window = raw.get("windowBuffer") or {}
    return Options(
        max_bytes=max(1, min(MAX_BYTES, raw.get("maxBytes", MAX_BYTES))),
        max_length=max(1, min(MAX_LENGTH, raw.get("maxLength", MAX_LENGTH))),
        policy=raw.get("policy", "reject"),
        ttl_seconds=min(TTL_MAX_SECONDS, raw.get("ttlSeconds", 0)),
        lease_seconds=max(1, min(LEASE_MAX_SECONDS, raw.get("leaseSeconds", 30))),
        retry_limit=max(1, min(RETRY_MAX, raw.get("retryLimit", 5))),
        window_ms=min(WINDOW_MAX_MS, window.get("ms", 0)),
        window_count=min(WINDOW_MAX_COUNT, window.get("count", 0)),
    )


def message_id(epoch: int, partition: str, seq: int) -> str:
    return f"e:{epoch:x}:{partition}:{seq}"


def parse_id(text: str) -> tuple[int, str, int] | None:
    """(epoch, partition, seq) of an id, or None when it is not one of ours."""
    if not text.startswith("e:"):
        return None
    head, _, rest = text[2:].partition(":")
    partition, _, seq = rest.rpartition(":")
    try:
        return int(head, 16), partition, int(seq)
    except ValueError:
        return None


def wake_key(queue: str) -> str:
    """The wake-up key of a queue's waiting pops. A durable queue whose name
    started the same (control characters) would share it, which costs
    spurious wake-ups only."""
    return f"{wakeups.PRIVATE_KEY_PREFIX}eph\x1f{queue}"


def _epoch() -> int:
    return secrets.randbits(48)


# ------------------------------------------------------------------ configure


@transaction.atomic(durable=True)
def eph_configure(*, queue: str, options: dict[str, Any]) -> int:
    """Declare ``queue`` with ``options`` (checked, kept as sent); returns
    the update time (ms). The queue's contents are untouched."""
    at = now_ms()
    store().set_config(queue, json.dumps(options, separators=(",", ":")), at)
    return at


@transaction.atomic(durable=True)
def eph_reset(*, queue: str) -> int:
    """Drop every message and lease of ``queue`` and move every cursor to
    the tail, in a new epoch; the declaration stays. Returns the messages
    dropped (0 for a queue that does not exist)."""
    row = store().claim_queue(queue, epoch=0, now_ms=0, create=False)
    if row is None:
        return 0
    return store().restart_queue(queue, _epoch())


@dataclass(frozen=True, slots=True)
class Deleted:
    deleted: bool
    declared: bool


@transaction.atomic(durable=True)
def eph_delete(*, queue: str) -> Deleted:
    """Remove ``queue``: contents, cursors and declaration."""
    declared = store().delete_config(queue)
    had_state = store().delete_queue(queue)
    return Deleted(deleted=declared or had_state, declared=declared)


# ------------------------------------------------------------------ push


def _expire(row: QueueRow, options: Options, at: int) -> tuple[int, int]:
    if options.ttl_seconds <= 0 or row.depth == 0:
        return 0, 0
    return store().expire(row.queue, at - options.ttl_seconds * 1000)


@transaction.atomic(durable=True)
def eph_push(*, queue: str, partition: str, payloads: list[str]) -> int:
    """Append ``payloads`` (JSON texts) to the partition's ring, all or
    nothing; returns how many. Raises ``EphemeralQueueFull`` when the queue
    is at its bounds under ``policy=reject`` (or the batch alone exceeds
    them) and ``EphemeralUnavailable`` past the cell ceiling."""
    s = store()
    at = now_ms()
    row = s.claim_queue(queue, epoch=_epoch(), now_ms=at, create=True)
    assert row is not None
    options = effective(row.options_json)
    sizes = [len(p.encode()) for p in payloads]
    count, size = len(payloads), sum(sizes)
    if count > options.max_length or size > options.max_bytes:
        raise EphemeralQueueFull(
            f"the batch alone is over the queue's bounds ({options.max_length} messages, {options.max_bytes} bytes)"
        )
    ttl_n, ttl_b = _expire(row, options, at)
    depth, used = row.depth - ttl_n, row.bytes - ttl_b
    drop_n = drop_b = 0
    over_n, over_b = depth + count - options.max_length, used + size - options.max_bytes
    if over_n > 0 or over_b > 0:
        if options.policy == "reject":
            raise EphemeralQueueFull(f"queue {queue!r} is full ({depth} messages, {used} bytes)")
        through = 0
        for seq, z in s.oldest(queue, depth):
            through = seq
            drop_n, drop_b = drop_n + 1, drop_b + z
            if drop_n >= over_n and drop_b >= over_b:
                break
        drop_n, drop_b = s.drop_through(queue, through)
    if s.cell_bytes() - ttl_b - drop_b + size > settings.EPHEMERAL_CELL_BYTES:
        raise EphemeralUnavailable("the ephemeral store is full")
    s.touch_partition(queue, partition)
    s.insert_messages(queue, partition, row.last_seq + 1, payloads, sizes, at)
    s.update_queue(
        queue,
        last_seq=row.last_seq + count,
        depth_delta=count - ttl_n - drop_n,
        bytes_delta=size - ttl_b - drop_b,
        bounds=drop_n,
        ttl=ttl_n,
    )
    wakeups.notify_on_commit([wake_key(queue)])
    return count


# ------------------------------------------------------------------ pop


@dataclass(frozen=True, slots=True)
class Delivered:
    id: str
    partition: str
    attempts: int
    payload: str


@dataclass(frozen=True, slots=True)
class Take:
    """What a pop got; ``hold_until_ms`` when ``windowBuffer`` asks it to
    wait for more (nothing was taken then)."""

    messages: tuple[Delivered, ...]
    hold_until_ms: int | None = None


@transaction.atomic(durable=True)
def eph_take(
    *, queue: str, partition: str | None, group: str | None, batch: int, auto_ack: bool, hold: bool = False
) -> Take:
    """Deliver up to ``batch`` messages to ``group``: expired leases first
    (attempts + 1; dropped for the group at ``retryLimit``), then past the
    group's cursors, partitions in name order. Leased for
    ``leaseSeconds`` unless ``auto_ack``. With ``hold`` and a
    ``windowBuffer``, take nothing while fewer than its ``count`` are
    ready and its ``ms`` have not passed since the oldest of them."""
    s = store()
    at = now_ms()
    name = group or QUEUE_MODE
    # A group is known from its first pop (the "" row when it named no
    # partition): until it has been past a message, that message stays.
    row, has_due = s.claim_for_pop(queue, name, partition, epoch=_epoch(), now_ms=at)
    options = effective(row.options_json)
    ttl_n, ttl_b = _expire(row, options, at)
    lease_until = at + options.lease_seconds * 1000
    due = s.due(queue, name, partition, at, batch) if has_due else []
    redeliver = [d for d in due if d.payload is not None and d.attempts < options.retry_limit]
    given_up = [d for d in due if d.payload is not None and d.attempts >= options.retry_limit]
    gone = [d.seq for d in due if d.payload is None]
    room = batch - len(redeliver)
    windowed = hold and options.window_count > 0
    if windowed and room > 0:
        # windowBuffer: look before taking, and hold while too few are ready.
        fresh = s.fresh(queue, name, partition, room)
        if fresh and len(redeliver) + len(fresh) < options.window_count:
            oldest = s.created_at(queue, fresh[0][0])
            if oldest is not None and at < oldest + options.window_ms:
                if ttl_n:
                    s.update_queue(queue, last_seq=row.last_seq, depth_delta=-ttl_n, bytes_delta=-ttl_b, ttl=ttl_n)
                return Take((), hold_until_ms=oldest + options.window_ms)
        s.deliver(queue, name, [(seq, part) for seq, part, _ in fresh], None if auto_ack else lease_until)
    elif room > 0:
        fresh = s.take_fresh(queue, name, partition, room, None if auto_ack else lease_until)
    else:
        fresh = []
    s.end_leases(queue, name, [*gone, *(d.seq for d in given_up)])
    if given_up:
        s.skip(queue, name, dict(Counter(d.partition for d in given_up)))
    if auto_ack:
        s.end_leases(queue, name, [d.seq for d in redeliver])
    else:
        s.renew(queue, name, [d.seq for d in redeliver], lease_until, bump=True)
    if auto_ack or given_up:
        parts = {*(part for _, part, _ in fresh), *(d.partition for d in redeliver), *(d.partition for d in given_up)}
        s.trim_counted(queue, sorted(parts))
    if ttl_n or given_up:
        s.update_queue(
            queue, last_seq=row.last_seq, depth_delta=-ttl_n, bytes_delta=-ttl_b, ttl=ttl_n, retry=len(given_up)
        )
    out = [
        Delivered(message_id(row.epoch, d.partition, d.seq), d.partition, d.attempts + 1, d.payload or "null")
        for d in redeliver
    ]
    out += [Delivered(message_id(row.epoch, part, seq), part, 1, payload) for seq, part, payload in fresh]
    return Take(tuple(out))


# ------------------------------------------------------------------ ack


@dataclass(frozen=True, slots=True)
class AckItem:
    id: str
    #: None: completed.
    status: str | None


def eph_ack(*, queue: str, group: str | None, acks: list[AckItem]) -> list[Outcome]:
    """Settle leased messages; one outcome per item, never a refusal.

    Completed (no status, ``completed``/``success``/``acked``/``ok``)
    ends the lease: ``acked``. ``retry`` or anything else hands the
    message back (``redelivered``), or drops it for the group once its
    attempts reached ``retryLimit`` (``acked``). An id of another epoch
    (or a queue that is gone) is ``stale``; one without a live lease of
    this group ``unknown``."""
    parsed = [parse_id(item.id) for item in acks]
    if all(item.status is None or item.status in _COMPLETED for item in acks):
        # The usual ack: one transaction of the store's, holding the queue's
        # row (so its trim sees every other pop and ack); on PostgreSQL the
        # leases end and the rings trim in one statement. Measured without
        # the lock (one statement in autocommit): 13% faster for one client,
        # but a trim on a stale snapshot left consumed messages in the ring.
        ours = [(p[0], p[2]) for p in parsed if p is not None]
        epoch, ended = store().ack_all_completed(queue, group or QUEUE_MODE, ours, now_ms())
        outcomes: list[Outcome] = []
        settled: set[int] = set()
        for p in parsed:
            if p is None:
                outcomes.append("unknown")
            elif epoch is None or p[0] != epoch:
                outcomes.append("stale")
            else:
                outcomes.append("acked" if p[2] in ended and p[2] not in settled else "unknown")
                settled.add(p[2])
        return outcomes
    return _eph_ack_mixed(queue=queue, group=group, acks=acks)


@transaction.atomic(durable=True)
def _eph_ack_mixed(*, queue: str, group: str | None, acks: list[AckItem]) -> list[Outcome]:
    s = store()
    at = now_ms()
    name = group or QUEUE_MODE
    row = s.claim_queue(queue, epoch=0, now_ms=0, create=False)
    parsed = [parse_id(item.id) for item in acks]
    if row is None:
        return ["stale" if p is not None else "unknown" for p in parsed]
    options = effective(row.options_json)
    ours = {i: p[2] for i, p in enumerate(parsed) if p is not None and p[0] == row.epoch}
    completed = [i for i in ours if acks[i].status is None or acks[i].status in _COMPLETED]
    # The usual ack completes everything: one statement ends the leases.
    ended = s.ack_and_trim(queue, name, sorted({ours[i] for i in completed}), at)
    settled: set[int] = set()
    outcomes: dict[int, Outcome] = {}
    for i in completed:
        seq = ours[i]
        outcomes[i] = "acked" if seq in ended and seq not in settled else "unknown"
        settled.add(seq)
    others = [i for i in ours if i not in outcomes]
    live = s.leases(queue, name, [ours[i] for i in others]) if others else {}
    back: list[int] = []
    dropped: list[int] = []
    given_up: Counter[str] = Counter()
    touched: set[str] = set()
    for i in others:
        seq = ours[i]
        lease = live.get(seq)
        if lease is None or lease[2] <= at or seq in settled:
            outcomes[i] = "unknown"
            continue
        settled.add(seq)
        part, attempts, _ = lease
        if attempts >= options.retry_limit:
            dropped.append(seq)
            touched.add(part)
            given_up[part] += 1
            outcomes[i] = "acked"
        else:
            back.append(seq)
            outcomes[i] = "redelivered"
    s.end_leases(queue, name, dropped)
    s.renew(queue, name, back, at, bump=False)
    if given_up:
        s.skip(queue, name, dict(given_up))
        s.update_queue(queue, last_seq=row.last_seq, retry=sum(given_up.values()))
    if touched:
        s.trim_counted(queue, sorted(touched))
    if back:
        wakeups.notify_on_commit([wake_key(queue)])
    return [outcomes.get(i, "stale" if p is not None else "unknown") for i, p in enumerate(parsed)]


# ------------------------------------------------------------------ reads


@dataclass(frozen=True, slots=True)
class QueueView:
    queue: str
    declared: bool
    depth: int
    bytes: int
    partitions: int
    groups: int
    drops_bounds: int
    drops_ttl: int
    drops_retry: int
    options: Options


@dataclass(frozen=True, slots=True)
class DepthView:
    queue: str
    declared: bool
    depth: int
    bytes: int
    partitions: tuple[PartitionGauge, ...]
    groups: tuple[GroupGauge, ...]


def eph_collect_idle() -> list[str]:
    """Remove implicit queues empty and untouched for
    ``EPHEMERAL_IMPLICIT_IDLE_SECONDS``; returns their names."""
    before = now_ms() - int(settings.EPHEMERAL_IMPLICIT_IDLE_SECONDS * 1000)
    removed = []
    for queue in store().idle_implicit(before):
        with transaction.atomic(durable=True):
            row = store().claim_queue(queue, epoch=0, now_ms=0, create=False)
            if row is not None and not row.options_json and row.depth == 0 and row.touched_at_ms < before:
                store().delete_queue(queue)
                removed.append(queue)
    return removed


def eph_queues() -> tuple[list[QueueView], int]:
    """Every ephemeral queue (declared ones even when empty and never used)
    and the cell's bytes. Collects idle implicit queues first."""
    eph_collect_idle()
    s = store()
    rows = {r.queue: r for r in s.queue_rows()}
    configs = s.configs()
    counts = s.all_counts()
    views = []
    for name in sorted({*rows, *configs}):
        row = rows.get(name)
        declared = name in configs
        options = effective(configs.get(name, ""))
        parts, groups = counts.get(name, (0, 0))
        views.append(
            QueueView(
                name,
                declared,
                row.depth if row else 0,
                row.bytes if row else 0,
                parts,
                groups,
                row.drops_bounds if row else 0,
                row.drops_ttl if row else 0,
                row.drops_retry if row else 0,
                options,
            )
        )
    return views, sum(v.bytes for v in views)


def eph_depth(*, queue: str) -> DepthView:
    """Gauges of one queue; raises ``EphemeralQueueNotFound`` when it is neither
    declared nor live."""
    s = store()
    row = s.queue_row(queue)
    declared = s.config(queue) is not None
    if row is None and not declared:
        raise EphemeralQueueNotFound(f"ephemeral queue {queue!r} does not exist")
    if row is None:
        return DepthView(queue, declared, 0, 0, (), ())
    return DepthView(
        queue, declared, row.depth, row.bytes, tuple(s.partition_gauges(queue)), tuple(s.group_gauges(queue))
    )
