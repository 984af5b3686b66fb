"""Message-log wire schemas, for the OpenAPI document.

The routes parse bodies by hand (the engine envelope names the field that
is wrong), so these models describe the contract rather than validate it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class EngineErrorOut(BaseModel):
    error: str
    code: str


class QueueNotFoundOut(BaseModel):
    error: Literal["Queue not found"]


class PushItemIn(BaseModel):
    queue: str
    partition: str | None = Field(None, description='default "Default"')
    payload: Any = Field(..., description="any JSON value, null included")
    transactionId: str | None = Field(None, description="dedup key, at most 65535 bytes")
    traceId: str | None = Field(None, description="a UUID; anything else is ignored")


class PushIn(BaseModel):
    items: list[PushItemIn]


class PushItemOut(BaseModel):
    index: int
    message_id: str
    transaction_id: str
    queueName: str
    status: Literal["queued", "duplicate"]
    offset: int


class PopMessageOut(BaseModel):
    id: str
    transactionId: str
    traceId: str | None
    data: Any
    producerSub: None
    createdAt: str
    partitionId: str
    partition: str
    leaseId: str
    consumerGroup: str
    deliveryAttempt: int
    offset: int


class PopOut(BaseModel):
    success: bool
    queue: str
    partition: str
    partitionId: str
    leaseId: str
    consumerGroup: str
    partitionsClaimed: int
    messages: list[PopMessageOut]
    autopilot: dict[str, int] | None = None


class AckIn(BaseModel):
    transactionId: str
    partitionId: str
    status: Literal["completed", "failed", "retry", "dlq"] | None = "completed"
    leaseId: str | None = None
    error: str | None = None
    consumerGroup: str | None = Field(None, description="null = queue mode")


class AckBatchIn(BaseModel):
    acknowledgments: list[AckIn]
    consumerGroup: str | None = None


class AckOut(BaseModel):
    index: int
    transactionId: str
    success: bool
    error: str | None
    leaseReleased: bool
    dlq: bool
    noop: bool


class LeaseExtendIn(BaseModel):
    seconds: int | None = Field(None, ge=1, description="default 60")


class LeaseExtendOut(BaseModel):
    leaseId: str
    success: bool
    renewed: int
    newExpiresAt: str | None
    expiresAt: str | None
    lease_expires_at: str | None


class ConfigureIn(BaseModel):
    queue: str
    namespace: str | None = None
    task: str | None = None
    options: dict[str, Any] | None = None
    mode: Literal["merge", "replace"] | None = "merge"


class ConfigureOut(BaseModel):
    configured: bool
    queueId: str
    partitionId: None
    queue: str
    namespace: str | None
    task: str | None
    storage: str
    options: dict[str, Any]
