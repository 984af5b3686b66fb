"""The commands and results of pop, ack and lease extend."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal, get_args

from queenadmin.models.queues import QUEUE_MODE
from queenadmin.plumbing.shapes import quick_init

#: What an ack can say about a message (protocol section 5.1).
AckStatus = Literal["completed", "failed", "retry", "dlq"]
ACK_STATUSES: frozenset[str] = frozenset(get_args(AckStatus))
#: Where a named group starts on the partitions that exist at its first pop.
SubscriptionMode = Literal["new", "all"]


@quick_init
@dataclass(frozen=True)
class Delivered:
    """One message as a pop hands it out."""

    message_id: str
    transaction_id: str
    trace_id: str | None
    payload_json: str
    created_at: datetime
    partition_id: int
    partition: str
    offset: int
    delivery_attempt: int
    #: Who pushed it (``producerSub``); None when nobody was named.
    producer_sub: str | None = None


@dataclass(frozen=True)
class Claim:
    """What one pop got. ``messages`` empty means nothing was ready.

    ``retry_at`` is the earliest time a partition that has messages but is
    leased to someone else frees up, or whose head message comes out of the
    queue's ``delayedProcessing`` (a waiter may re-try then).
    """

    queue: str | None
    lease_id: str
    group: str
    partitions: tuple[tuple[int, str], ...]
    messages: tuple[Delivered, ...]
    retry_at: datetime | None = None
    #: The group's effective conflation policy on the queue that answered
    #: (on any queue visited, for an empty claim).
    conflation: bool = False
    #: The pop asked for the other policy than the one stored for the group.
    conflation_conflict: bool = False

    @property
    def partition_id(self) -> int | None:
        return self.partitions[0][0] if self.partitions else None

    @property
    def partition(self) -> str | None:
        return self.partitions[0][1] if self.partitions else None


@dataclass(frozen=True)
class PopRequest:
    """A validated pop. ``queue`` or ``namespace``/``task`` picks queues."""

    queue: str | None = None
    partition: str | None = None
    namespace: str | None = None
    task: str | None = None
    group: str = QUEUE_MODE
    batch: int = 200
    max_partitions: int = 1
    #: None means the queue's ``leaseTime``.
    lease_seconds: int | None = None
    subscription_mode: SubscriptionMode | None = None
    #: An aware datetime, or the string "now".
    subscription_from: datetime | str | None = None
    auto_ack: bool = False
    #: Last-value delivery asked for (stored when the group registers).
    conflation: bool = False
    #: How many partitions a pop claims when the group's policy is
    #: conflation, one message each (the wire's ``partitions ?? batch``,
    #: at most 64).
    conflation_width: int = 64


@dataclass(frozen=True)
class ConflationPolicy:
    """A group's effective conflation policy and whether a pop disagreed."""

    conflation: bool
    conflict: bool


@quick_init
@dataclass(frozen=True)
class AckItem:
    """One acknowledgment, at ``index`` of its call.

    ``partition_id`` is the text the consumer sent back; one that names no
    partition is an outcome (``success: false``), not a refusal.
    """

    index: int
    transaction_id: str
    partition_id: str
    status: AckStatus
    lease_id: str | None = None
    error: str | None = None
    group: str = QUEUE_MODE


@quick_init
@dataclass(frozen=True)
class AckOutcome:
    """What became of the acknowledgment at ``index``."""

    index: int
    transaction_id: str
    success: bool
    error: str | None = None
    lease_released: bool = False
    dlq: bool = False
    noop: bool = False


@dataclass(frozen=True)
class LeaseExtension:
    """``renewed`` live leases now end at ``expires_at`` or later."""

    lease_id: str
    renewed: int
    expires_at: datetime | None
