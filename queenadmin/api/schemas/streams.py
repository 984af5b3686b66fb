"""Streams wire schemas (``/streams/v1``, protocol-wave3.md section A).

The requests are declared once, in ``api/wire/streams.py`` (its parsers
read the declarations and the document shows them); the ``Out`` models are
the exact answers.
"""

from __future__ import annotations

from typing import Any, Literal

from queenadmin.api.schemas.common import JSONValue, WireOut


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


class StateRowOut(WireOut):
    key: str
    value: JSONValue
    updated_at: str


class StateGetOut(WireOut):
    success: Literal[True]
    rows: list[StateRowOut]


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
