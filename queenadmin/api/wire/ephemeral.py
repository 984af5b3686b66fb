"""``/api/v1/ephemeral`` JSON to ephemeral commands and back (protocol-wave3.md B).

Every refusal of a request is ``ephemeral_bad_request`` (400); payloads are
kept as their compact JSON text and put back into answers verbatim
(``msgspec.Raw``), never parsed twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from queenadmin.domain import ephemeral, names
from queenadmin.errors import EphemeralBadRequest

#: Edge limits of Queen's ephemeral handlers.
MAX_NAME_BYTES = 512
MAX_ITEMS = 10_000
MAX_BATCH = 10_000
MAX_TIMEOUT_MS = 300_000

_encode = msgspec.json.encode


def name_of(value: Any, what: str) -> str:
    """A queue, partition or group name: 1 to 512 bytes, keeping the rule of
    every stored name (``domain.names``: no control characters)."""
    if not isinstance(value, str) or not value:
        raise EphemeralBadRequest(f"{what} must be a non-empty string")
    fault = names.fault(value)
    if fault is not None:
        raise EphemeralBadRequest(f"{what} {fault}")
    if len(value.encode()) > MAX_NAME_BYTES:
        raise EphemeralBadRequest(f"{what} is over {MAX_NAME_BYTES} bytes")
    return value


def lookup_name(value: str, what: str) -> str:
    """A queue to look up or delete: ``name_of`` without the rule of stored
    names, so that a queue stored before it is still found."""
    if not value:
        raise EphemeralBadRequest(f"{what} must be a non-empty string")
    fault = names.unstorable(value)
    if fault is not None:
        raise EphemeralBadRequest(f"{what} {fault}")
    if len(value.encode()) > MAX_NAME_BYTES:
        raise EphemeralBadRequest(f"{what} is over {MAX_NAME_BYTES} bytes")
    return value


def _object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise EphemeralBadRequest("the body must be a JSON object")
    return body


def _optional_name(body: dict[str, Any], key: str) -> str | None:
    value = body.get(key)
    return None if value is None else name_of(value, key)


@dataclass(frozen=True, slots=True)
class ConfigureCall:
    queue: str
    options: dict[str, Any]


def parse_configure(body: Any) -> ConfigureCall:
    body = _object(body)
    options = body.get("options")
    return ConfigureCall(
        name_of(body.get("queue"), "queue"), ephemeral.check_options({} if options is None else options)
    )


def parse_queue(body: Any) -> str:
    return name_of(_object(body).get("queue"), "queue")


@dataclass(frozen=True, slots=True)
class PushCall:
    queue: str
    partition: str
    payloads: list[str]


def parse_push(body: Any) -> PushCall:
    body = _object(body)
    queue = name_of(body.get("queue"), "queue")
    partition = _optional_name(body, "partition") or ephemeral.DEFAULT_PARTITION
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise EphemeralBadRequest("messages must be a non-empty array")
    if len(messages) > MAX_ITEMS:
        raise EphemeralBadRequest(f"at most {MAX_ITEMS} messages per push")
    payloads = []
    for i, item in enumerate(messages):
        if not isinstance(item, dict) or "payload" not in item:
            raise EphemeralBadRequest(f"messages[{i}] must be an object with a payload")
        payloads.append(_encode(item["payload"]).decode())
    return PushCall(queue, partition, payloads)


@dataclass(frozen=True, slots=True)
class PopCall:
    queue: str
    partition: str | None
    group: str | None
    batch: int
    wait: bool
    timeout_ms: int
    auto_ack: bool


def _int_param(params: Any, name: str, default: int, low: int, high: int) -> int:
    raw = params.get(name)
    if raw is None or raw == "":
        return default
    if not raw.isascii() or not raw.isdigit() or len(raw) > 12:
        raise EphemeralBadRequest(f"{name} must be a whole number")
    value = int(raw)
    if not low <= value <= high:
        raise EphemeralBadRequest(f"{name} must be {low} to {high}")
    return value


def _bool_param(params: Any, name: str) -> bool:
    raw = params.get(name)
    if raw is None or raw == "" or raw == "false":
        return False
    if raw == "true":
        return True
    raise EphemeralBadRequest(f"{name} must be true or false")


#: A pop's default wait when ``wait=true`` comes without a timeout (ms).
DEFAULT_TIMEOUT_MS = 30_000


def parse_pop(params: Any) -> PopCall:
    return PopCall(
        queue=name_of(params.get("queue"), "queue"),
        partition=None if params.get("partition") is None else name_of(params.get("partition"), "partition"),
        group=None if params.get("group") in (None, "") else name_of(params.get("group"), "group"),
        batch=_int_param(params, "batch", 1, 1, MAX_BATCH),
        wait=_bool_param(params, "wait"),
        timeout_ms=_int_param(params, "timeout", DEFAULT_TIMEOUT_MS, 0, MAX_TIMEOUT_MS),
        auto_ack=_bool_param(params, "autoAck"),
    )


@dataclass(frozen=True, slots=True)
class AckCall:
    queue: str
    group: str | None
    acks: list[ephemeral.AckItem]


def parse_ack(body: Any) -> AckCall:
    body = _object(body)
    queue = name_of(body.get("queue"), "queue")
    group = body.get("group")
    group = None if group in (None, "") else name_of(group, "group")
    raw = body.get("acks")
    if not isinstance(raw, list):
        raise EphemeralBadRequest("acks must be an array")
    if len(raw) > MAX_ITEMS:
        raise EphemeralBadRequest(f"at most {MAX_ITEMS} acks per call")
    acks = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or not isinstance(item.get("id"), str) or not item["id"]:
            raise EphemeralBadRequest(f"acks[{i}] must be an object with an id")
        status = item.get("status")
        if status is not None and not isinstance(status, str):
            raise EphemeralBadRequest(f"acks[{i}].status must be a string")
        acks.append(ephemeral.AckItem(item["id"], status or None))
    return AckCall(queue, group, acks)


def render_pop(queue: str, take: ephemeral.Take) -> dict[str, Any]:
    return {
        "queue": queue,
        "messages": [
            {"id": m.id, "partition": m.partition, "attempts": m.attempts, "payload": msgspec.Raw(m.payload.encode())}
            for m in take.messages
        ],
    }


def render_queue(view: ephemeral.QueueView) -> dict[str, Any]:
    return {
        "queue": view.queue,
        "tier": "declared" if view.declared else "implicit",
        "depth": view.depth,
        "bytes": view.bytes,
        "partitions": view.partitions,
        "groups": view.groups,
        "drops": {"bounds": view.drops_bounds, "ttl": view.drops_ttl, "retry": view.drops_retry},
        "options": view.options.wire(),
    }


def render_depth(view: ephemeral.DepthView) -> dict[str, Any]:
    return {
        "queue": view.queue,
        "group": None,
        "tier": "declared" if view.declared else "implicit",
        "pending": view.depth,
        "partitionsPending": sum(1 for p in view.partitions if p.pending),
        "bytes": view.bytes,
        "partitions": [{"partition": p.partition, "pending": p.pending, "bytes": p.bytes} for p in view.partitions],
        "groups": [{"group": g.group, "pending": g.pending, "skipped": g.skipped} for g in view.groups],
    }
