"""Ephemeral queue wire schemas (``/api/v1/ephemeral``, protocol-wave3.md B).

The routes parse by hand (``api/wire/ephemeral.py``); the ``In`` models
document the requests, the ``Out`` models are the exact answers.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from queenadmin.api.schemas.common import JSONValue, Omit, WireOut
from queenadmin.domain import names

#: A queue, partition or group name: no control characters, at most 512
#: bytes of UTF-8 (``maxLength`` is the byte budget, exact for ASCII).
EphemeralName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=512,
        pattern=names.SCHEMA_PATTERN,
        description="no control or bidirectional formatting characters, at most 512 bytes",
    ),
]
#: A group: "" or null is queue mode.
EphemeralGroup = Annotated[
    str, Field(max_length=512, pattern=r"^[^\x00-\x1f\x7f]*$", description='"" or null: queue mode')
]


class EphemeralWindowBufferIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ms: int | None = Field(None, ge=0)
    count: int | None = Field(None, ge=0)


class EphemeralOptionsIn(BaseModel):
    """Unknown options are refused; a null option reads as absent."""

    model_config = ConfigDict(extra="forbid")

    maxBytes: int | None = Field(None, ge=0, description="clamped to 1 to 16 MiB")
    maxLength: int | None = Field(None, ge=0, description="clamped to 1 to 10000")
    policy: Literal["reject", "dropOldest"] | None = None
    ttlSeconds: int | None = Field(None, ge=0, description="0: off")
    leaseSeconds: int | None = Field(None, ge=0, description="clamped to 1 s to 24 h")
    retryLimit: int | None = Field(None, ge=0, description="clamped to 1 to 1000")
    windowBuffer: EphemeralWindowBufferIn | None = None


class EphemeralConfigureIn(BaseModel):
    queue: EphemeralName
    options: EphemeralOptionsIn | None = None


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


class EphemeralQueueIn(BaseModel):
    queue: EphemeralName


class EphemeralResetOut(WireOut):
    queue: str
    dropped: int


class EphemeralDeleteOut(WireOut):
    queue: str
    deleted: bool
    declared: bool


class EphemeralMessageIn(BaseModel):
    payload: JSONValue


class EphemeralPushIn(BaseModel):
    queue: EphemeralName
    partition: EphemeralName | None = Field(None, description="default: Default")
    messages: list[EphemeralMessageIn] = Field(min_length=1, max_length=10_000)


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


class EphemeralAckEntryIn(BaseModel):
    id: str = Field(min_length=1)
    status: str | None = Field(None, description="completed (default), retry or failed")
    error: JSONValue = None


class EphemeralAckIn(BaseModel):
    queue: EphemeralName
    group: EphemeralGroup | None = None
    acks: list[EphemeralAckEntryIn] = Field(max_length=10_000)


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
