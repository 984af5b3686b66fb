"""Timer wire schemas (protocol.md section 4).

The requests are declared once, in ``api/wire/timers.py`` (its parser reads
the declarations, with the reason of each refusal, and the document shows
them); the ``Out`` models are the exact answers, checked by
``tests/api/test_contract.py``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from queenadmin.api.schemas.common import MicrosZTime, WireOut


class ScheduledOut(WireOut):
    ok: Literal[True]
    status: Literal["scheduled", "rescheduled"]
    queue: str
    timerKey: str
    txn: str
    messageId: str = Field(description="the id the fired message will have")
    deliverAt: MicrosZTime


class CancelledOut(WireOut):
    ok: Literal[True]
    status: Literal["cancelled"]
    queue: str
    timerKey: str
    txn: str = Field(description="the txn of the removed timer")


class AbsentOut(WireOut):
    """No pending timer under the key: it was cancelled or has fired."""

    ok: Literal[False]
    status: Literal["absent"]
    queue: str
    timerKey: str
    txn: str | None = Field(description="the txn the cancel gave, echoed")


class TimersCallOut(WireOut):
    results: list[ScheduledOut | CancelledOut | AbsentOut]


class TimerRowOut(WireOut):
    queue: str
    timerKey: str
    partition: str
    deliverAt: MicrosZTime
    txn: str
    messageId: str
    payloadZstd: Literal[False]
    encrypted: bool
    producerSub: str | None
    attempts: int
    lastError: str | None
    claimed: Literal[False]
    createdAt: MicrosZTime
    updatedAt: MicrosZTime


class TimerFoundOut(TimerRowOut):
    found: Literal[True]
    payload: str = Field(description="base64 of the stored (decompressed) payload")


class TimerMissingOut(WireOut):
    found: Literal[False]
    queue: str
    timerKey: str


class TimerListOut(WireOut):
    rows: list[TimerRowOut]
    truncated: bool
    nextAfter: str | None


class TimerCountOut(WireOut):
    count: int


class TimersBadRequestOut(WireOut):
    """400: ``reason`` names the refusal (protocol 4.6)."""

    error: Literal["timers_bad_request"]
    reason: str
    detail: str


class TimersHorizonOut(WireOut):
    """403: the timer would be due past the 90-day horizon."""

    error: Literal["timer_horizon_exceeded"]
    reason: Literal["timers_horizon"]
    detail: str


class TimersTooLargeOut(WireOut):
    """413: the decoded payload is over 1 MiB."""

    error: Literal["payload_too_large"]
    reason: Literal["timers_payload_too_large"]
    detail: str
