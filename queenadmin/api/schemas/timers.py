"""Timer wire schemas (protocol.md section 4).

The timer routes parse their bodies by hand (every refusal has its own
reason), so ``TimerOpIn`` documents the request; the ``Out`` models are the
exact answers, checked by ``tests/api/test_contract.py``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel

from queenadmin.api.schemas.common import NO_NUL, SOME_TEXT, MicrosZTime, WireOut
from queenadmin.api.wire.timers import SERVER_OWNED
from queenadmin.conf import settings
from queenadmin.domain import names
from queenadmin.domain.timers import ops as timers

#: Standard base64 with its padding (``b64decode(validate=True)``).
BASE64 = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
TimerName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=timers.MAX_NAME_BYTES,
        pattern=names.SCHEMA_PATTERN,
        description=(
            f"no control or bidirectional formatting characters, at most {timers.MAX_NAME_BYTES} bytes"
            " of UTF-8 (413 above)"
        ),
    ),
]


def _no_server_fields(schema: dict[str, Any]) -> None:
    """Fields only the server sets, and any starting with ``_``, are refused by name."""
    schema["propertyNames"] = {"not": {"anyOf": [{"enum": sorted(SERVER_OWNED)}, {"pattern": "^_"}]}}


class TimerScheduleIn(BaseModel):
    model_config = ConfigDict(json_schema_extra=_no_server_fields)

    queue: TimerName
    timerKey: TimerName

    op: Literal["schedule", "reschedule"]
    delayMs: int | float = Field(
        le=type(settings).TIMERS_HORIZON_SECONDS * 1000,
        description="relative milliseconds; a past (negative) delay fires at once; 403 past the horizon (90 days)",
    )
    txn: str = Field(
        min_length=1,
        max_length=timers.MAX_TXN_BYTES,
        pattern=SOME_TEXT,
        description="the fired message's transactionId",
    )
    payload: str = Field(
        pattern=BASE64, description="base64 of the message body (JSON text), at most 1 MiB; zstd with payloadZstd"
    )
    partition: TimerName = Field("Default", description="not null when present")
    payloadZstd: Literal[False] | None = Field(
        None,
        description=(
            "true: the payload is a zstd frame, stored decompressed (400 timers_payload_not_zstd"
            " otherwise); JSON Schema cannot describe a zstd frame, so only the plain form is shown"
        ),
    )
    encrypted: bool | None = None


class TimerCancelIn(BaseModel):
    """A cancel looks its timer up: a name over the budget is simply absent."""

    model_config = ConfigDict(json_schema_extra=_no_server_fields)

    queue: str = Field(min_length=1, pattern=SOME_TEXT)
    timerKey: str = Field(min_length=1, pattern=SOME_TEXT)
    op: Literal["cancel"]
    partition: str = Field("Default", min_length=1, pattern=SOME_TEXT, description="not null when present; unused")
    txn: str | None = Field(None, pattern=NO_NUL, description="echoed in the answer")


class TimerOpIn(RootModel[Annotated[TimerScheduleIn | TimerCancelIn, Field(discriminator="op")]]):
    """One operation; ``op`` says which fields it takes."""


class TimersCallIn(BaseModel):
    operations: list[TimerOpIn] = Field(
        max_length=type(settings).TIMERS_MAX_OPS_PER_CALL, description="no (queue, timerKey) twice"
    )


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
