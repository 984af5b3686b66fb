"""Ephemeral queue wire schemas (``/api/v1/ephemeral``, protocol-wave3.md B).

The routes parse by hand (``api/wire/ephemeral.py``); the ``In`` models
document the requests, the ``Out`` models are the exact answers.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from queenadmin.api.schemas.common import JSONValue, WireOut

_NAME = Field(min_length=1, description="1 to 512 bytes, no control characters")


class WindowBufferIn(BaseModel):
    ms: int | None = Field(None, ge=0)
    count: int | None = Field(None, ge=0)


class EphemeralOptionsIn(BaseModel):
    maxBytes: int | None = Field(None, ge=0, description="clamped to 1 to 16 MiB")
    maxLength: int | None = Field(None, ge=0, description="clamped to 1 to 10000")
    policy: Literal["reject", "dropOldest"] | None = None
    ttlSeconds: int | None = Field(None, ge=0, description="0: off")
    leaseSeconds: int | None = Field(None, ge=0, description="clamped to 1 s to 24 h")
    retryLimit: int | None = Field(None, ge=0, description="clamped to 1 to 1000")
    windowBuffer: WindowBufferIn | None = None


class ConfigureIn(BaseModel):
    queue: str = _NAME
    options: EphemeralOptionsIn | None = None


class ConfigureOut(WireOut):
    queue: str
    options: dict[str, Any] = Field(description="the options as sent")
    updatedAt: str


class QueueIn(BaseModel):
    queue: str = _NAME


class ResetOut(WireOut):
    queue: str
    dropped: int


class DeleteOut(WireOut):
    queue: str
    deleted: bool
    declared: bool


class MessageIn(BaseModel):
    payload: JSONValue


class PushIn(BaseModel):
    queue: str = _NAME
    partition: str | None = Field(None, description="default: Default")
    messages: list[MessageIn] = Field(min_length=1, max_length=10_000)


class PushOut(WireOut):
    pushed: int


class EphemeralMessageOut(WireOut):
    id: str = Field(description="opaque: e:<epoch hex>:<partition>:<seq>")
    partition: str
    attempts: int
    payload: JSONValue


class PopOut(WireOut):
    queue: str
    messages: list[EphemeralMessageOut]


class AckEntryIn(BaseModel):
    id: str = Field(min_length=1)
    status: str | None = Field(None, description="completed (default), retry or failed")
    error: JSONValue = None


class AckIn(BaseModel):
    queue: str = _NAME
    group: str | None = None
    acks: list[AckEntryIn] = Field(max_length=10_000)


class AckResultOut(WireOut):
    id: str
    outcome: Literal["acked", "redelivered", "stale", "unknown"]


class AckOut(WireOut):
    results: list[AckResultOut]


class DropsOut(WireOut):
    bounds: int
    ttl: int
    retry: int


class WindowBufferOut(WireOut):
    ms: int
    count: int


class EffectiveOptionsOut(WireOut):
    maxBytes: int
    maxLength: int
    policy: Literal["reject", "dropOldest"]
    ttlSeconds: int
    leaseSeconds: int
    retryLimit: int
    windowBuffer: WindowBufferOut


class EphemeralQueueOut(WireOut):
    queue: str
    tier: Literal["declared", "implicit"]
    depth: int
    bytes: int
    partitions: int
    groups: int
    drops: DropsOut
    options: EffectiveOptionsOut


class QueuesOut(WireOut):
    queues: list[EphemeralQueueOut]
    count: int
    cellBytes: int


class PartitionDepthOut(WireOut):
    partition: str
    pending: int
    bytes: int


class GroupDepthOut(WireOut):
    group: str
    pending: int
    skipped: int


class DepthOut(WireOut):
    queue: str
    group: None
    tier: Literal["declared", "implicit"]
    pending: int
    partitionsPending: int
    bytes: int
    partitions: list[PartitionDepthOut]
    groups: list[GroupDepthOut]


class EphemeralErrorOut(WireOut):
    """``{error, code}``: ``error`` is prose, ``code`` the machine code."""

    error: str
    code: Literal["ephemeral_bad_request", "queue_full", "ephemeral_unavailable", "ephemeral_queue_not_found"]
