"""The one table from domain refusal to HTTP answer.

Queen's wire protocol has several error families (protocol.md 1.3):

- ``kv``: KV, locks and timers, ``{"error": <code>, "reason", "detail"}``;
- ``engine``: push, pop, ack, configure, ``{"error": <message>, "code"}``;
- a few bodies of their own (the ``kv_precondition`` abort, queue 404, a
  refused conflating pop: ``{"success": false, "error", "messages": []}``,
  a DLQ replay of a dead letter that is gone: ``{"success": false,
  "result": "gone", "error", "code"}``).
"""

from __future__ import annotations

import math
from typing import Any

from queenadmin import errors

#: Exception class -> (HTTP status, family). The first class in the MRO wins.
STATUS: dict[type[errors.QueenError], tuple[int, str]] = {
    errors.KVBadRequest: (400, "kv"),
    # The request is valid; the stored value decides (RFC 9110: a conflict
    # with the target's current state).
    errors.KVConflict: (409, "kv"),
    errors.KVPayloadTooLarge: (413, "kv"),
    errors.LocksBadRequest: (400, "kv"),
    errors.TimersBadRequest: (400, "kv"),
    errors.TimersPayloadTooLarge: (413, "kv"),
    errors.TimerHorizonExceeded: (403, "kv"),
    errors.PreconditionFailed: (200, "precondition"),
    errors.QueueNotFound: (404, "queue_not_found"),
    errors.DeadLetterGone: (404, "gone"),
    errors.EphemeralQueueNotFound: (404, "engine"),
    errors.EphemeralQueueFull: (429, "engine"),
    errors.EphemeralUnavailable: (503, "engine"),
    errors.QueueBusy: (409, "engine"),
    # Only an operator's create (the dashboard's) refuses an existing
    # queue; a client's configure changes it.
    errors.QueueExists: (409, "engine"),
    # A push answers ``failed`` per item instead; an operator's move (a
    # retry, a DLQ replay) is refused whole, 409 as Queen's replay answers.
    errors.QueueFull: (409, "engine"),
    errors.NotDeadLettered: (409, "engine"),
    errors.MessageNotNext: (409, "engine"),
    errors.NameTooLong: (413, "engine"),
    errors.ConflationRefused: (400, "conflation"),
    errors.StreamStateTooLarge: (413, "engine"),
    errors.UnsupportedMediaType: (415, "engine"),
    errors.NotFound: (404, "engine"),
    errors.Unauthorized: (401, "auth"),
    errors.Forbidden: (403, "auth"),
    errors.RateLimited: (429, "kv"),
    errors.InvalidArgument: (400, "engine"),
    errors.QueenError: (400, "engine"),
}


def headers(exc: errors.QueenError) -> dict[str, str]:
    """Extra response headers a refusal carries (``Retry-After`` on 429)."""
    if isinstance(exc, errors.RateLimited):
        return {"Retry-After": str(max(1, math.ceil(exc.retry_after)))}
    return {}


def render(exc: errors.QueenError) -> tuple[int, dict[str, Any]]:
    for cls in type(exc).__mro__:
        if cls in STATUS:
            status, family = STATUS[cls]
            break
    else:  # pragma: no cover - QueenError is always in the table
        status, family = 500, "engine"
    if family == "kv":
        return status, {"error": exc.code, "reason": exc.reason or exc.code, "detail": exc.detail}
    if family == "precondition":
        assert isinstance(exc, errors.PreconditionFailed)
        return status, {
            "ok": False,
            "reason": "kv_precondition",
            "failedIndex": exc.failed_index,
            "kvReason": exc.kv_reason,
            "version": exc.version,
            "value": exc.value,
        }
    if family == "queue_not_found":
        return status, {"error": "Queue not found"}
    if family == "gone":
        # Queen's answer for a dead letter that is not there, with the
        # engine family's ``code`` beside it.
        return status, {"success": False, "result": "gone", "error": exc.detail, "code": exc.code}
    if family == "conflation":
        return status, {"success": False, "error": exc.detail, "messages": []}
    if family == "auth":
        return status, {"error": exc.code, "code": exc.code, "detail": exc.detail}
    return status, {"error": exc.detail, "code": exc.code}
