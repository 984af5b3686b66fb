"""Locks wire schemas (protocol.md section 3).

``POST /api/v1/locks`` parses its body by hand (protocol.md 3.4 names a
reason for every kind of bad input), so ``LocksCallIn`` documents the
request; the ``Out`` models are the exact answers, checked by
``tests/api/test_contract.py``.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel

from queenadmin.api.schemas.common import JsonbTime, Omit, WireOut, no_tenant
from queenadmin.api.schemas.kv import MAX_TTL_SECONDS
from queenadmin.domain import locks

#: A lock name or owner: no control characters (C0, DEL, C1); names no '#'.
LOCK_NAME = r"^[^\x00-\x1f\x7f-\x9f#]+$"
LOCK_OWNER = r"^[^\x00-\x1f\x7f-\x9f]+$"

LockName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=locks.MAX_NAME_BYTES,
        pattern=LOCK_NAME,
        description=f"at most {locks.MAX_NAME_BYTES} bytes of UTF-8, no control characters, no '#'",
    ),
]
Owner = Annotated[
    str,
    Field(
        min_length=1,
        max_length=locks.MAX_OWNER_BYTES,
        pattern=LOCK_OWNER,
        description=f"the holder's identity, at most {locks.MAX_OWNER_BYTES} bytes; a resend answers already",
    ),
]
LockTtl = Annotated[int, Field(ge=1, le=MAX_TTL_SECONDS, description="the lease's lifetime (a lock has no forever)")]
Token = Annotated[int, Field(ge=1, description="the token of the last grant or renew")]
Slot = Annotated[int, Field(ge=0, le=locks.MAX_SLOT, description="the permit, default 0")]


class _LockOp(BaseModel):
    model_config = ConfigDict(json_schema_extra=no_tenant)

    name: LockName


class LockGetIn(_LockOp):
    op: Literal["get"]


class LockAcquireIn(_LockOp):
    op: Literal["acquire"]
    ttlSeconds: LockTtl
    owner: Owner | None = None
    limit: int | None = Field(None, ge=1, le=locks.MAX_LIMIT, description="permits of the semaphore, default 1")
    forever: None = Field(None, description="refused: a lock has no forever")


class LockRenewIn(_LockOp):
    op: Literal["renew"]
    ttlSeconds: LockTtl
    owner: Owner | None = None
    token: Token
    slot: Slot | None = None
    forever: None = Field(None, description="refused: a lock has no forever")


class LockReleaseIn(_LockOp):
    op: Literal["release"]
    token: Token
    slot: Slot | None = None


class LockOpIn(
    RootModel[Annotated[LockGetIn | LockAcquireIn | LockRenewIn | LockReleaseIn, Field(discriminator="op")]]
):
    """One operation; ``op`` says which fields it takes."""


class LocksCallIn(BaseModel):
    operations: list[LockOpIn] = Field(
        max_length=locks.MAX_OPS,
        description=(
            f"at most {locks.MAX_KEYS} slot rows in all (acquire counts its limit, get {locks.GET_KEYS});"
            " no lock named twice"
        ),
    )


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
