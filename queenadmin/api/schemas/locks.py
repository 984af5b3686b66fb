"""Locks wire schemas, for the OpenAPI document.

``POST /api/v1/locks`` parses its body by hand (protocol.md 3.4 names a
reason for every kind of bad input), so these models describe the contract
rather than validate it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


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


class LockHolderOut(BaseModel):
    slot: int
    owner: str | None
    token: int | None = Field(None, description="get only")
    since: str | None = Field(None, description="get only")
    expiresAt: str | None = Field(None, description="get only")
    renewedAt: str | None = Field(None, description="get only")


class LockGuardOut(BaseModel):
    op: Literal["check"]
    ns: Literal["queen-locks"]
    key: str
    expect: int
    required: Literal[True]


class LockResultOut(BaseModel):
    index: int
    op: Literal["acquire", "renew", "release", "get"]
    name: str
    acquired: bool | None = None
    renewed: bool | None = None
    released: bool | None = None
    held: bool | None = None
    reason: Literal["held", "contended", "lost"] | None = None
    already: bool | None = None
    slot: int | None = None
    token: int | None = None
    owner: str | None = None
    guard: LockGuardOut | None = None
    holders: list[LockHolderOut] | None = None


class LocksCallOut(BaseModel):
    results: list[LockResultOut]


class LocksErrorOut(BaseModel):
    error: str
    reason: str
    detail: str
