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
from dataclasses import dataclass
from typing import Any, Literal

from queenadmin.domain import clock
from queenadmin.domain.ephemeral.store import GroupGauge, PartitionGauge
from queenadmin.domain.queues import wakeups
from queenadmin.errors import (
    EphemeralBadRequest,
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


@dataclass(frozen=True, slots=True)
class Deleted:
    deleted: bool
    declared: bool


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


@dataclass(frozen=True, slots=True)
class AckItem:
    id: str
    #: None: completed.
    status: str | None


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
