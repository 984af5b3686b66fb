"""Locks wire schemas (protocol.md section 3).

The request is declared once, in ``api/wire/locks.py`` (its parser reads
the declaration and the document shows it); the ``Out`` models are the
exact answers, checked by ``tests/api/test_contract.py``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from queenadmin.api.schemas.common import JsonbTime, Omit, WireOut

# -- answers ------------------------------------------------------------------


class LockHolderOut(WireOut):
    slot: int
    owner: str | None


class LockLeaseOut(WireOut):
    """A live permit, as ``get`` shows it."""

    slot: int
    owner: str | None = Field(description="a fingerprint to a caller who may not write the lock")
    token: int | str = Field(description="a fingerprint (a string) to a caller who may not write the lock")
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


class _LockResult(WireOut):
    """What every result of a locks call starts with."""

    index: int
    op: str
    name: str


class LockAcquiredOut(_LockResult):
    op: Literal["acquire"]
    acquired: Literal[True]
    slot: int
    token: int
    owner: str | None
    guard: LockGuardOut
    already: Literal[True] | Omit = Field(None, description="present when this owner held it already")


class LockAcquireRefusedOut(_LockResult):
    op: Literal["acquire"]
    acquired: Literal[False]
    reason: Literal["held", "contended"]
    holders: list[LockHolderOut]


class LockRenewedOut(_LockResult):
    op: Literal["renew"]
    renewed: Literal[True]
    slot: int
    token: int = Field(description="a new token: the old one no longer guards, renews or releases")
    guard: LockGuardOut


class LockRenewLostOut(_LockResult):
    op: Literal["renew"]
    renewed: Literal[False]
    reason: Literal["lost"]
    slot: int
    holders: list[LockHolderOut]


class LockReleasedOut(_LockResult):
    op: Literal["release"]
    released: Literal[True]
    slot: int


class LockReleaseLostOut(_LockResult):
    op: Literal["release"]
    released: Literal[False]
    reason: Literal["lost"]
    slot: int
    holders: list[LockHolderOut]


class LockGetOut(_LockResult):
    op: Literal["get"]
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
