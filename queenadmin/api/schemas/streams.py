"""Streams wire schemas (``/streams/v1``, protocol-wave3.md section A).

The routes parse their bodies by hand (``api/wire/streams.py``), so the
``In`` models document the requests and the ``Out`` models are the exact
answers.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from queenadmin.api.schemas.common import JSONValue, WireOut


class QueryIn(BaseModel):
    name: str = Field(description="the pipeline's query id, e.g. orders.agg")
    source_queue: str
    sink_queue: str | None = None
    config_hash: str = Field(description="sha256 of the operator configs")
    reset: bool = Field(False, description="wipe the state when the hash changed")


class QueryOut(WireOut):
    success: Literal[True]
    query_id: str
    name: str
    config_hash: str
    fresh: bool
    reset: bool


class QueryConflictOut(WireOut):
    """409: the config hash changed and ``reset`` was not asked for; nothing changed."""

    success: Literal[False]
    query_id: str
    name: str
    error: str


class StateGetIn(BaseModel):
    query_id: str
    partition_id: str
    keys: list[str] = Field(default_factory=list, description="empty: every key")
    key_prefix: str | None = None
    ripe_at_or_before: int | None = Field(None, description="ms; rows whose value.windowEnd is at or before it")


class StateRowOut(WireOut):
    key: str
    value: JSONValue
    updated_at: str


class StateGetOut(WireOut):
    success: Literal[True]
    rows: list[StateRowOut]


class StateOpIn(BaseModel):
    type: Literal["upsert", "delete"]
    key: str
    value: JSONValue = None


class CyclePushIn(BaseModel):
    queue: str
    partition: str | None = None
    payload: JSONValue


class CycleAckIn(BaseModel):
    transactionId: str
    leaseId: str
    status: Literal["completed", "success", "acked", "ok", ""] = "completed"
    count: int | None = None


class CycleIn(BaseModel):
    query_id: str
    partition_id: str
    consumer_group: str | None = None
    state_ops: list[StateOpIn] = Field(default_factory=list)
    push_items: list[CyclePushIn] = Field(default_factory=list)
    ack: CycleAckIn | None = None
    release_lease: bool = True


class CyclePushOut(WireOut):
    messageId: str
    transactionId: str
    queue: str


class CycleAckOut(WireOut):
    success: Literal[True]
    count: int
    lease_released: bool
    dlq: Literal[False]


class CycleOut(WireOut):
    """A committed cycle, or (``success: false``, still 200, as Queen answers)
    one that rolled back whole: ``error`` says why."""

    success: bool
    query_id: str
    partition_id: str
    state_ops_applied: int
    push_results: list[CyclePushOut]
    ack_result: CycleAckOut | None
    error: Any = None


class StreamsTooLargeOut(WireOut):
    """413: a state key or value is over its limit; nothing was written."""

    error: str
    code: Literal["payload_too_large"]
