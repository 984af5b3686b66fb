"""Locks wire schemas (protocol.md section 3).

``POST /api/v1/locks`` parses its body by hand (protocol.md 3.4 names a
reason for every kind of bad input), so ``LocksCallIn`` documents the
request; the ``Out`` models are the exact answers, checked by
``tests/api/test_contract.py``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from queenadmin.api.schemas.common import JsonbTime, Omit, WireOut


class LockOpIn(BaseModel):
    op: Literal["acquire", "renew", "release", "get"]
    name: str = Field(description="1..256 bytes, no control characters, no '#'")
    ttlSeconds: int | None = Field(None, gt=0, description="acquire, renew: the lease's lifetime (no forever)")
    owner: str | None = Field(None, description="acquire, renew: the holder's identity; a resend answers already")
    limit: int | None = Field(None, ge=1, le=1024, description="acquire: permits of the semaphore, default 1")
    token: int | None = Field(None, gt=0, description="renew, release: the token of the last grant or renew")
    slot: int | None = Field(None, ge=0, le=1023, description="renew, release: the permit, default 0")


class LocksCallIn(BaseModel):
    operations: list[LockOpIn]


# -- answers ------------------------------------------------------------------


class LockHolderOut(WireOut):
    slot: int
    owner: str | None


class LockLeaseOut(WireOut):
    """A live permit, as ``get`` shows it."""

    slot: int
    owner: str | None
    token: int
    since: JsonbTime = Field(description="when this holder first took the permit")
    expiresAt: JsonbTime | None
    renewedAt: JsonbTime


class LockGuardOut(WireOut):
    """The KV ``check`` to put first in a transaction: it holds while the token is current."""

    op: Literal["check"]
    ns: Literal["queen-locks"]
    key: str
    expect: int
    required: Literal[True]


class LockAcquiredOut(WireOut):
    index: int
    op: Literal["acquire"]
    name: str
    acquired: Literal[True]
    slot: int
    token: int
    owner: str | None
    guard: LockGuardOut
    already: Literal[True] | Omit = Field(None, description="present when this owner held it already")


class LockAcquireRefusedOut(WireOut):
    index: int
    op: Literal["acquire"]
    name: str
    acquired: Literal[False]
    reason: Literal["held", "contended"]
    holders: list[LockHolderOut]


class LockRenewedOut(WireOut):
    index: int
    op: Literal["renew"]
    name: str
    renewed: Literal[True]
    slot: int
    token: int = Field(description="a new token: the old one no longer guards, renews or releases")
    guard: LockGuardOut


class LockRenewLostOut(WireOut):
    index: int
    op: Literal["renew"]
    name: str
    renewed: Literal[False]
    reason: Literal["lost"]
    slot: int
    holders: list[LockHolderOut]


class LockReleasedOut(WireOut):
    index: int
    op: Literal["release"]
    name: str
    released: Literal[True]
    slot: int


class LockReleaseLostOut(WireOut):
    index: int
    op: Literal["release"]
    name: str
    released: Literal[False]
    reason: Literal["lost"]
    slot: int
    holders: list[LockHolderOut]


class LockGetOut(WireOut):
    index: int
    op: Literal["get"]
    name: str
    held: bool
    holders: list[LockLeaseOut]


LockResultOut = (
    LockAcquiredOut
    | LockAcquireRefusedOut
    | LockRenewedOut
    | LockRenewLostOut
    | LockReleasedOut
    | LockReleaseLostOut
    | LockGetOut
)


class LocksCallOut(WireOut):
    results: list[LockResultOut] = Field(description="one per operation, in request order")


class LocksBadRequestOut(WireOut):
    """400: ``error`` is the machine code, ``reason`` the finer one (protocol 3.4)."""

    error: Literal["locks_bad_request"]
    reason: str
    detail: str
