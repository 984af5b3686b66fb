"""Domain refusals. No HTTP here: ``api/errors.py`` maps them to answers."""

from __future__ import annotations

from typing import Any


class QueenError(Exception):
    """Something the broker refuses to do."""

    #: The wire protocol's machine code for this refusal.
    code = "bad_request"
    #: The protocol's finer reason, where the family has one.
    reason: str | None = None

    def __init__(self, detail: str | None = None, *, reason: str | None = None) -> None:
        self.detail = detail or (self.__doc__ or "").strip()
        if reason is not None:
            self.reason = reason
        super().__init__(self.detail)


class InvalidArgument(QueenError):
    """The request is not valid."""


class KVBadRequest(InvalidArgument):
    """The KV request is not valid."""

    code = "kv_bad_request"
    reason = "kv_bad_request"


class KVConflict(KVBadRequest):
    """The stored value refuses a valid KV call (an ``incr`` whose result
    could not be held exactly); nothing in the call was written."""


class KVPayloadTooLarge(InvalidArgument):
    """A key or value is over the KV size limit."""

    code = "payload_too_large"


class LocksBadRequest(InvalidArgument):
    """The locks request is not valid."""

    code = "locks_bad_request"
    reason = "locks_bad_request"


class PreconditionFailed(QueenError):
    """A required KV precondition failed; nothing in the call was written."""

    code = "kv_precondition"

    def __init__(self, *, failed_index: int, kv_reason: str, version: int, value: Any) -> None:
        super().__init__()
        self.failed_index = failed_index
        self.kv_reason = kv_reason
        self.version = version
        self.value = value


class NotFound(QueenError):
    """No such thing."""

    code = "not_found"


class QueueNotFound(NotFound):
    """Queue not found"""

    code = "queue_not_found"


class DeadLetterGone(NotFound):
    """Message not found"""

    #: Queen's ``result`` for a dead letter that is not (or no longer) there.
    code = "gone"


class NotDeadLettered(QueenError):
    """The message is not in the dead-letter queue."""

    code = "not_dead_lettered"


class MessageNotNext(QueenError):
    """Only a consumer group's next message, not under a live lease, can be moved to its dead-letter queue."""

    code = "message_not_next"


class MessageNotFound(NotFound):
    """Message not found"""


class QueueBusy(QueenError):
    """The queue changed under the call (deleted meanwhile); retry it."""

    code = "queue_busy"


class QueueExists(QueenError):
    """The queue already exists."""

    code = "queue_exists"


class QueueFull(QueenError):
    """The queue's maxSize would be exceeded."""

    code = "queue_full"


class UnsupportedMediaType(QueenError):
    """The request body's Content-Type or Content-Encoding is not one the route reads."""

    code = "unsupported_media_type"


class ConflationRefused(InvalidArgument):
    """A conflating pop the broker cannot serve (no group, or auto-ack)."""


class NameTooLong(InvalidArgument):
    """A name is over the engine's 511-byte store-key budget."""

    code = "name_too_long"


class Unauthorized(QueenError):
    """A valid bearer token is required."""

    code = "unauthorized"


class Forbidden(QueenError):
    """The bearer token's scope does not allow this call."""

    code = "forbidden"


class RateLimited(QueenError):
    """Too many calls; retry after the time given."""

    code = "rate_limited"
    reason = "rate_limited"

    def __init__(self, *, retry_after: float) -> None:
        super().__init__()
        #: Seconds until the call would be admitted.
        self.retry_after = retry_after


class LockNotAcquired(QueenError):
    """The lock could not be acquired before the timeout."""

    code = "lock_not_acquired"


class LockLost(QueenError):
    """The lease was lost while the block ran; its work may have run unprotected."""

    code = "lock_lost"


class LockNotHeld(QueenError):
    """The lock is not held by this handle."""

    code = "lock_not_held"


class TimersBadRequest(InvalidArgument):
    """The timers request is not valid."""

    code = "timers_bad_request"
    reason = "timers_bad_request"


class TimersPayloadTooLarge(InvalidArgument):
    """A timer payload is over the size limit."""

    code = "payload_too_large"
    reason = "timers_payload_too_large"


class TimerHorizonExceeded(QueenError):
    """The timer is due past the scheduling horizon."""

    code = "timer_horizon_exceeded"
    reason = "timers_horizon"


class LeaseExpired(QueenError):
    """The loop's lease ran out before the work could commit; nothing was written."""

    code = "lease_expired"


class StreamStateTooLarge(InvalidArgument):
    """A stream state key or value is over the size limit; nothing of the cycle was written."""

    code = "payload_too_large"


class StreamNotFound(NotFound):
    """No such stream query or source partition."""

    code = "not_found"


class EphemeralBadRequest(InvalidArgument):
    """The ephemeral request is malformed."""

    code = "ephemeral_bad_request"


class EphemeralQueueFull(QueenError):
    """The ephemeral queue is full."""

    code = "queue_full"


class EphemeralUnavailable(QueenError):
    """The ephemeral store is full; try again later."""

    code = "ephemeral_unavailable"


class EphemeralQueueNotFound(NotFound):
    """No such ephemeral queue."""

    code = "ephemeral_queue_not_found"
