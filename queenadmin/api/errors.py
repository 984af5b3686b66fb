"""The one table from domain refusal to HTTP answer, and the answers.

Queen's wire protocol has several error families (protocol.md 1.3):

- ``kv``: KV, locks and timers, ``{"error": <code>, "reason", "detail"}``;
- ``engine``: push, pop, ack, configure, ``{"error": <message>, "code"}``;
- a few bodies of their own (the ``kv_precondition`` abort, queue 404, a
  refused conflating pop: ``{"success": false, "error", "messages": []}``,
  a DLQ replay of a dead letter that is gone: ``{"success": false,
  "result": "gone", "error", "code"}``).

Each refusal is rendered by the answer the document shows for it
(``wire.answers``), read from the exception. The answers named here from
``wire.queues``, ``wire.streams`` and ``schemas.messages`` are annotated
``: Answer``: mypy reads those modules after this one.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from queenadmin import errors
from queenadmin.api.schemas import messages as messages_out
from queenadmin.api.wire import ephemeral, kv, locks, queues, streams, timers
from queenadmin.api.wire.answers import Answer, Key, engine_refusal, kv_refusal

AUTH_ERROR = Answer(
    "AuthErrorOut",
    doc="401: the bearer token is missing, unknown or revoked.",
    error=Key(Literal["unauthorized"], src="code"),
    code=Key(Literal["unauthorized"], src="code"),
    detail=str,
)
FORBIDDEN = Answer(
    "ForbiddenOut",
    doc="403: the bearer token's scope does not allow the call (the 401 shape).",
    error=Key(Literal["forbidden"], src="code"),
    code=Key(Literal["forbidden"], src="code"),
    detail=str,
)
UNAVAILABLE = engine_refusal(
    "UnavailableOut",
    "503: the database connection was lost or refused; nothing was done, retry.",
    code=Literal["unavailable"],
)
UNSUPPORTED_MEDIA_TYPE = engine_refusal(
    "UnsupportedMediaTypeOut",
    "415: the body's ``Content-Encoding`` is neither ``identity`` nor ``zstd``.",
    code=Literal["unsupported_media_type"],
)
RATE_LIMITED = kv_refusal(
    "RateLimitedOut",
    "429 (with ``Retry-After``): the token's KV call rate is spent.",
    error=Literal["rate_limited"],
    reason=Literal["rate_limited"],
)
#: Of the request.
NO_ROUTE = Answer(
    "NoRouteOut",
    doc="""404 from outside the API's routes: the path matches none (a path
    parameter that holds a newline, say, or a slash where none may be).""",
    code=Literal["no_such_route"],
    error=Literal["not found"],
    path=str,
)
ENGINE_BAD_REQUEST = engine_refusal(
    "EngineBadRequestOut",
    "400 on the message-log routes: ``error`` is prose, ``code`` the machine code.",
    code=Literal["bad_request"],
)
NAME_TOO_LONG = engine_refusal(
    "NameTooLongOut",
    "413: a queue, partition or group name is over the 511-byte key budget.",
    code=Literal["name_too_long"],
)
#: The refusals every message-log route may answer (``api/queues.py``,
#: ``api/messages.py``): the engine's 400 and a name over the key budget.
ENGINE_ERRORS: dict[int | str, Any] = {400: ENGINE_BAD_REQUEST.model, 413: NAME_TOO_LONG.model}
QUEUE_NOT_FOUND = Answer(
    "QueueNotFoundOut", doc="404 of the queue detail and depth reads.", error=Literal["Queue not found"]
)
QUEUE_BUSY = engine_refusal(
    "QueueBusyOut",
    "409: the queue was deleted again and again while the push ran; retry.",
    code=Literal["queue_busy"],
)
#: Any other refusal of the engine family (its routes' 400 is ``ENGINE_BAD_REQUEST``).
ENGINE = engine_refusal("EngineRefusalOut", code=str)

#: Exception class -> (HTTP status, its answer). The first class in the MRO wins.
STATUS: dict[type[errors.QueenError], tuple[int, Answer]] = {
    errors.KVBadRequest: (400, kv.BAD_REQUEST),
    # The request is valid; the stored value decides (RFC 9110: a conflict
    # with the target's current state).
    errors.KVConflict: (409, kv.CONFLICT),
    errors.KVPayloadTooLarge: (413, kv.TOO_LARGE),
    errors.LocksBadRequest: (400, locks.BAD_REQUEST),
    errors.TimersBadRequest: (400, timers.BAD_REQUEST),
    errors.TimersPayloadTooLarge: (413, timers.TOO_LARGE),
    errors.TimerHorizonExceeded: (403, timers.HORIZON),
    errors.PreconditionFailed: (200, kv.PRECONDITION),
    errors.QueueNotFound: (404, QUEUE_NOT_FOUND),
    errors.DeadLetterGone: (404, messages_out.DEAD_LETTER_GONE),
    errors.EphemeralQueueNotFound: (404, ephemeral.ERROR),
    errors.EphemeralQueueFull: (429, ephemeral.ERROR),
    errors.EphemeralUnavailable: (503, ephemeral.ERROR),
    errors.QueueBusy: (409, QUEUE_BUSY),
    # Only an operator's create (the dashboard's) refuses an existing
    # queue; a client's configure changes it.
    errors.QueueExists: (409, ENGINE),
    # A push answers ``failed`` per item instead; an operator's move (a
    # retry, a DLQ replay) is refused whole, 409 as Queen's replay answers.
    errors.QueueFull: (409, messages_out.QUEUE_FULL),
    errors.NotDeadLettered: (409, messages_out.NOT_DEAD_LETTERED),
    errors.MessageNotNext: (409, messages_out.MESSAGE_NOT_NEXT),
    errors.NameTooLong: (413, NAME_TOO_LONG),
    errors.ConflationRefused: (400, queues.CONFLATION_REFUSED),
    errors.StreamStateTooLarge: (413, streams.TOO_LARGE),
    errors.UnsupportedMediaType: (415, UNSUPPORTED_MEDIA_TYPE),
    errors.NotFound: (404, ENGINE),
    errors.Unauthorized: (401, AUTH_ERROR),
    errors.Forbidden: (403, FORBIDDEN),
    errors.RateLimited: (429, RATE_LIMITED),
    errors.InvalidArgument: (400, ENGINE),
    errors.QueenError: (400, ENGINE),
}


def headers(exc: errors.QueenError) -> dict[str, str]:
    """Extra response headers a refusal carries (``Retry-After`` on 429)."""
    if isinstance(exc, errors.RateLimited):
        return {"Retry-After": str(max(1, math.ceil(exc.retry_after)))}
    return {}


def render(exc: errors.QueenError) -> tuple[int, dict[str, Any]]:
    status, answer = next(STATUS[cls] for cls in type(exc).__mro__ if cls in STATUS)
    return status, answer.render(exc)
