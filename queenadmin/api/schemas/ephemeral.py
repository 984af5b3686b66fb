"""Ephemeral queue wire schemas (``/api/v1/ephemeral``, protocol-wave3.md B).

The requests are ninja Schemas in ``api/wire/ephemeral.py`` (they parse
the bodies, and the document shows them); the ``Out`` models are the
exact answers.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from queenadmin.api.schemas.common import JSONValue, Omit, WireOut


class EphemeralWindowBufferEchoOut(WireOut):
    ms: int | Omit = None
    count: int | Omit = None


class EphemeralOptionsEchoOut(WireOut):
    """The options as the configure call sent them (only those it sent)."""

    maxBytes: int | Omit = None
    maxLength: int | Omit = None
    policy: Literal["reject", "dropOldest"] | Omit = None
    ttlSeconds: int | Omit = None
    leaseSeconds: int | Omit = None
    retryLimit: int | Omit = None
    windowBuffer: EphemeralWindowBufferEchoOut | Omit = None


class EphemeralConfigureOut(WireOut):
    queue: str
    options: EphemeralOptionsEchoOut
    updatedAt: str


class EphemeralResetOut(WireOut):
    queue: str
    dropped: int


class EphemeralDeleteOut(WireOut):
    queue: str
    deleted: bool
    declared: bool


class EphemeralPushOut(WireOut):
    pushed: int


class EphemeralMessageOut(WireOut):
    id: str = Field(description="opaque: e:<epoch hex>:<partition>:<seq>")
    partition: str
    attempts: int
    payload: JSONValue


class EphemeralPopOut(WireOut):
    queue: str
    messages: list[EphemeralMessageOut]


class EphemeralAckResultOut(WireOut):
    id: str
    outcome: Literal["acked", "redelivered", "stale", "unknown"]


class EphemeralAckOut(WireOut):
    results: list[EphemeralAckResultOut]


class EphemeralDropsOut(WireOut):
    bounds: int
    ttl: int
    retry: int


class EphemeralWindowBufferOut(WireOut):
    ms: int
    count: int


class EphemeralEffectiveOptionsOut(WireOut):
    maxBytes: int
    maxLength: int
    policy: Literal["reject", "dropOldest"]
    ttlSeconds: int
    leaseSeconds: int
    retryLimit: int
    windowBuffer: EphemeralWindowBufferOut


class EphemeralQueueOut(WireOut):
    queue: str
    tier: Literal["declared", "implicit"]
    depth: int
    bytes: int
    partitions: int
    groups: int
    drops: EphemeralDropsOut
    options: EphemeralEffectiveOptionsOut


class EphemeralQueuesOut(WireOut):
    queues: list[EphemeralQueueOut]
    count: int
    cellBytes: int


class EphemeralPartitionDepthOut(WireOut):
    partition: str
    pending: int
    bytes: int


class EphemeralGroupDepthOut(WireOut):
    group: str
    pending: int
    skipped: int


class EphemeralDepthOut(WireOut):
    queue: str
    group: None
    tier: Literal["declared", "implicit"]
    pending: int
    partitionsPending: int
    bytes: int
    partitions: list[EphemeralPartitionDepthOut]
    groups: list[EphemeralGroupDepthOut]


class EphemeralErrorOut(WireOut):
    """``{error, code}``: ``error`` is prose, ``code`` the machine code."""

    error: str
    code: Literal["ephemeral_bad_request", "queue_full", "ephemeral_unavailable", "ephemeral_queue_not_found"]
