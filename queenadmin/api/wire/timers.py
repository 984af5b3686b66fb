"""The timers wire language (protocol.md section 4): JSON to commands, outcomes to JSON.

Validation is all-or-nothing, in Queen's order: per op the object, the op,
server-owned fields, queue, timerKey, partition, then delayMs, txn and
payload of a schedule; then one (queue, timerKey) per call; then the
payload's decoding, size and the horizon.
"""

from __future__ import annotations

import base64
import binascii
from datetime import timedelta
from typing import Any

from queenadmin.api.wire.common import is_json_number
from queenadmin.conf import settings
from queenadmin.domain import clock, timers
from queenadmin.errors import TimersBadRequest

OPS = frozenset({"schedule", "reschedule", "cancel"})
#: Fields only the server sets (protocol 4.2); so is any field starting "_".
SERVER_OWNED = frozenset(
    {
        "producerSub",
        "producer_sub",
        "messageId",
        "message_id",
        "tenant",
        "tenantId",
        "_tenant",
        "tenant_id",
        "deliverAt",
        "deliver_at",
        "delaySeconds",
        "delay_seconds",
        "attempts",
        "claimToken",
        "claim_token",
        "claimedUntil",
    }
)


def _bad(reason: str, detail: str) -> TimersBadRequest:
    return TimersBadRequest(detail, reason=reason)


def _flag(raw: dict[str, Any], name: str, index: int) -> bool:
    value = raw.get(name)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise _bad("timers_bad_request", f"op {index}: {name} must be a boolean")
    return value


def _validate(index: int, raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise _bad("timers_bad_request", f"op {index} is not an object")
    op = raw.get("op")
    if not isinstance(op, str) or op not in OPS:
        raise _bad("timers_bad_op", f"op {index}: op must be schedule, reschedule or cancel")
    for name in raw:
        if name in SERVER_OWNED or name.startswith("_"):
            raise _bad(
                "timers_server_owned_field",
                f"op {index}: field {name} is server-owned and cannot be supplied (the message id is minted "
                "by the broker, and deliverAt is not expressible: send the relative delayMs)",
            )
    queue = raw.get("queue")
    if not isinstance(queue, str) or not queue:
        raise _bad("timers_queue_required", f"op {index}: queue is required")
    key = raw.get("timerKey")
    if not isinstance(key, str) or not key:
        raise _bad("timers_bad_request", f"op {index}: timerKey is required")
    if "partition" in raw and (not isinstance(raw["partition"], str) or not raw["partition"]):
        raise _bad("timers_bad_request", f"op {index}: partition, when present, must be a non-empty string")
    if op != "cancel":
        if not is_json_number(raw.get("delayMs")):
            raise _bad(
                "timers_delay_required",
                f"op {index}: delayMs (a number of milliseconds, relative; a past one fires at once) is required",
            )
        txn = raw.get("txn")
        if not isinstance(txn, str) or not txn:
            raise _bad("timers_bad_request", f"op {index}: txn is required")
        if not isinstance(raw.get("payload"), str):
            raise _bad("timers_payload_required", f"op {index}: payload (base64) is required")
    elif raw.get("txn") is not None and not isinstance(raw["txn"], str):
        raise _bad("timers_bad_request", f"op {index}: txn must be a string")
    for name in ("queue", "timerKey", "partition", "txn"):
        # PostgreSQL cannot store NUL in text; SQLite could, so both refuse.
        if "\x00" in (raw.get(name) or ""):
            raise _bad("timers_bad_request", f"op {index}: {name} must not contain NUL")
    return raw


def _payload(raw: dict[str, Any], index: int) -> bytes:
    try:
        payload = base64.b64decode(raw["payload"], validate=True)
    except (binascii.Error, ValueError) as exc:
        raise _bad("timers_payload_not_base64", f"op {index}: payload is not valid base64") from exc
    if _flag(raw, "payloadZstd", index):
        import zstandard

        limit = settings.TIMERS_MAX_PAYLOAD_BYTES
        try:
            with zstandard.ZstdDecompressor().stream_reader(payload) as reader:
                payload = reader.read(limit + 1)
        except zstandard.ZstdError as exc:
            raise _bad("timers_payload_not_zstd", f"op {index}: payload is not zstd data") from exc
    return payload


def _delay(value: int | float) -> timedelta:
    # Microsecond resolution, as Queen's make_interval(secs => delayMs / 1000).
    # A delay past the horizon is refused by the domain; one far past any
    # date (1e300) is refused here before timedelta overflows.
    limit_ms = (settings.TIMERS_HORIZON_SECONDS + 1) * 1000
    clamped = max(-limit_ms, min(limit_ms, value))
    return timedelta(microseconds=round(clamped * 1000))


def _command(index: int, raw: dict[str, Any]) -> timers.TimerOp:
    queue, key = raw["queue"], raw["timerKey"]
    if raw["op"] == "cancel":
        return timers.TimerCancel(queue, key, raw.get("txn"))
    return timers.TimerSchedule(
        queue=queue,
        timer_key=key,
        payload=_payload(raw, index),
        delay=_delay(raw["delayMs"]),
        txn=raw["txn"],
        partition=raw.get("partition") or timers.DEFAULT_PARTITION,
        encrypted=_flag(raw, "encrypted", index),
    )


def parse_timer_ops(raw_ops: Any, *, max_ops: int | None = None) -> list[timers.TimerOp]:
    """A whole call as commands; raise ``TimersBadRequest`` with its reason."""
    if not isinstance(raw_ops, list):
        raise _bad("timers_bad_body", "body must be an array or {operations: [...]}")
    max_ops = max_ops or settings.TIMERS_MAX_OPS_PER_CALL
    if len(raw_ops) > max_ops:
        raise _bad("timers_too_many_ops", f"at most {max_ops} operations per call")
    checked = [_validate(i, raw) for i, raw in enumerate(raw_ops)]
    seen: set[tuple[str, str]] = set()
    for raw in checked:
        ident = (raw["queue"], raw["timerKey"])
        if ident in seen:
            raise _bad("timers_bad_request", "a (queue, timerKey) appears more than once in one call")
        seen.add(ident)
    ops = [_command(i, raw) for i, raw in enumerate(checked)]
    for op in ops:
        if isinstance(op, timers.TimerSchedule):
            timers.check_schedule(op)
    return ops


# --------------------------------------------------------------------------
# Outcomes and rows to JSON (protocol 4.3, 4.4)


def outcome_out(outcome: timers.TimerOutcome) -> dict[str, Any]:
    out: dict[str, Any] = {
        "ok": outcome.ok,
        "status": outcome.status,
        "queue": outcome.queue,
        "timerKey": outcome.timer_key,
        "txn": outcome.txn,
    }
    if outcome.status in ("scheduled", "rescheduled"):
        out["messageId"] = outcome.message_id
        out["deliverAt"] = clock.iso_micros_z(outcome.deliver_at)
    return out


def row_out(row: timers.TimerRow) -> dict[str, Any]:
    return {
        "queue": row.queue,
        "timerKey": row.timer_key,
        "partition": row.partition,
        "deliverAt": clock.iso_micros_z(row.deliver_at),
        "txn": row.txn,
        "messageId": row.message_id,
        "payloadZstd": False,
        "encrypted": row.encrypted,
        "producerSub": row.producer_sub,
        "attempts": row.attempts,
        "lastError": row.last_error,
        "claimed": False,
        "createdAt": clock.iso_micros_z(row.created_at),
        "updatedAt": clock.iso_micros_z(row.updated_at),
    }


def peek_out(queue: str, timer_key: str, row: timers.TimerRow | None) -> dict[str, Any]:
    if row is None:
        return {"found": False, "queue": queue, "timerKey": timer_key}
    return {"found": True, **row_out(row), "payload": row.payload_b64}


def page_limit(raw: str | None) -> int:
    """``?limit=``: default 100, clamped to 1..1000, never refused (protocol 4.4)."""
    if raw is None or raw == "":
        return timers.DEFAULT_PAGE_LIMIT
    try:
        value = int(float(raw))
    except (ValueError, OverflowError):
        return timers.DEFAULT_PAGE_LIMIT
    return max(1, min(timers.MAX_PAGE_LIMIT, value))
