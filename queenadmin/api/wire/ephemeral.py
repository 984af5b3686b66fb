"""``/api/v1/ephemeral`` JSON to ephemeral commands and back (protocol-wave3.md B).

Every refusal of a request is ``ephemeral_bad_request`` (400); payloads are
kept as their compact JSON text and put back into answers verbatim
(``msgspec.Raw``), never parsed twice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Any, Literal, TypeVar

import msgspec
from ninja import Schema
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, ValidationInfo

from queenadmin.api.schemas.common import JSONValue
from queenadmin.api.wire import fields
from queenadmin.api.wire.answers import Answer, Key, Many, engine_refusal
from queenadmin.api.wire.common import json_int
from queenadmin.api.wire.fields import Param, Query
from queenadmin.domain import ephemeral, names
from queenadmin.errors import EphemeralBadRequest

#: Edge limits of Queen's ephemeral handlers.
MAX_NAME_BYTES = 512
MAX_ITEMS = 10_000
MAX_BATCH = 10_000
MAX_TIMEOUT_MS = 300_000

_encode = msgspec.json.encode


def name_of(value: Any, what: str, fault: Callable[[str], str | None] = names.fault) -> str:
    """A queue, partition or group name: 1 to 512 bytes, keeping the rule of
    every stored name (``domain.names``: no control characters)."""
    if not isinstance(value, str) or not value:
        raise EphemeralBadRequest(f"{what} must be a non-empty string")
    wrong = fault(value)
    if wrong is not None:
        raise EphemeralBadRequest(f"{what} {wrong}")
    if len(value.encode()) > MAX_NAME_BYTES:
        raise EphemeralBadRequest(f"{what} is over {MAX_NAME_BYTES} bytes")
    return value


def lookup_name(value: str, what: str) -> str:
    """A queue to look up or delete: ``name_of`` without the rule of stored
    names, so that a queue stored before it is still found."""
    return name_of(value, what, names.unstorable)


def _name(value: str, info: ValidationInfo) -> str:
    return name_of(value, info.field_name or "name")


def _group(value: str | None) -> str | None:
    return None if value in (None, "") else name_of(value, "group")


#: A queue, partition or group name: no control characters, at most 512
#: bytes of UTF-8 (``maxLength`` is the byte budget, exact for ASCII).
_NAME_RULE: dict[str, Any] = {"min_length": 1, "max_length": MAX_NAME_BYTES, "pattern": names.SCHEMA_PATTERN}
_NAME_DOC = f"no control or bidirectional formatting characters, at most {MAX_NAME_BYTES} bytes"
Name = Annotated[str, Field(**_NAME_RULE, description=_NAME_DOC), AfterValidator(_name)]
#: A group: "" or null is queue mode.
Group = Annotated[
    str | None,
    Field(max_length=MAX_NAME_BYTES, pattern=names.SCHEMA_PATTERN_OR_EMPTY, description='"" or null: queue mode'),
    AfterValidator(_group),
]

# The bodies are these ninja Schemas, validated strictly (``"5"`` is no
# integer, ``true`` no boolean): each is both the parser and what the
# document shows. Every refusal is ``ephemeral_bad_request``.


class _In(Schema):
    model_config = ConfigDict(strict=True)


def _integral(value: Any) -> Any:
    """A whole float as its ``int`` (``json_int``), as every integer field
    reads one; any other value is left to the strict check."""
    if type(value) is float and (whole := json_int(value)) is not None:
        return whole
    return value


#: A count: an integer of at least 0 (``2.0`` reads as 2; ``1.5``, ``true`` and ``-1`` are refused).
Count = Annotated[int, Field(ge=0), BeforeValidator(_integral)]


class EphemeralWindowBufferIn(_In):
    model_config = ConfigDict(extra="forbid")

    ms: Count | None = None
    count: Count | None = None


class EphemeralOptionsIn(_In):
    """Unknown options are refused; a null option reads as absent."""

    model_config = ConfigDict(extra="forbid")

    maxBytes: Count | None = Field(None, description="clamped to 1 to 16 MiB")
    maxLength: Count | None = Field(None, description="clamped to 1 to 10000")
    policy: Literal["reject", "dropOldest"] | None = None
    ttlSeconds: Count | None = Field(None, description="0: off")
    leaseSeconds: Count | None = Field(None, description="clamped to 1 s to 24 h")
    retryLimit: Count | None = Field(None, description="clamped to 1 to 1000")
    windowBuffer: EphemeralWindowBufferIn | None = None


class EphemeralConfigureIn(_In):
    queue: Name
    options: EphemeralOptionsIn | None = None


class EphemeralQueueIn(_In):
    queue: Name


class EphemeralMessageIn(_In):
    payload: Any = Field(description="any JSON value, null included")


class EphemeralPushIn(_In):
    queue: Name
    partition: Name | None = Field(None, description="default: Default")
    messages: list[EphemeralMessageIn] = Field(min_length=1, max_length=MAX_ITEMS)


class EphemeralAckEntryIn(_In):
    id: str = Field(min_length=1)
    status: str | None = Field(None, description="completed (default), retry or failed")
    error: Any = Field(None, description="any JSON value")


class EphemeralAckIn(_In):
    queue: Name
    group: Group = None
    acks: list[EphemeralAckEntryIn] = Field(max_length=MAX_ITEMS)


_Body = TypeVar("_Body", bound=BaseModel)


def _validated(model: type[_Body], body: Any) -> _Body:
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"])
        raise EphemeralBadRequest(f"{where}: {first['msg']}" if where else first["msg"]) from None


@dataclass(frozen=True, slots=True)
class ConfigureCall:
    queue: str
    options: dict[str, Any]


def parse_configure(body: Any) -> ConfigureCall:
    call = _validated(EphemeralConfigureIn, body)
    # The domain keeps its own rule of options (and what was sent of them):
    # the names in the order sent, each with the value read (2.0 as 2).
    read = call.options.model_dump(exclude_unset=True) if call.options is not None else {}
    return ConfigureCall(call.queue, ephemeral.check_options({name: read[name] for name in body.get("options") or {}}))


def parse_queue(body: Any) -> str:
    return _validated(EphemeralQueueIn, body).queue


@dataclass(frozen=True, slots=True)
class PushCall:
    queue: str
    partition: str
    payloads: list[str]


def parse_push(body: Any) -> PushCall:
    call = _validated(EphemeralPushIn, body)
    payloads = [_encode(message.payload).decode() for message in call.messages]
    return PushCall(call.queue, call.partition or ephemeral.DEFAULT_PARTITION, payloads)


@dataclass(frozen=True, slots=True)
class PopCall:
    queue: str
    partition: str | None
    group: str | None
    batch: int
    wait: bool
    timeout_ms: int
    auto_ack: bool


def _bad(reason: str, detail: str) -> EphemeralBadRequest:
    return EphemeralBadRequest(detail)


def _whole(text: str) -> int:
    if not text.isascii() or not text.isdigit() or len(text) > 12:
        raise ValueError(text)
    return int(text)


def _name_param(what: str, **more: Any) -> Param:
    refusal = f"{what} must be a non-empty string"
    check = partial(name_of, what=what)
    return Param(fields.Field("string", **_NAME_RULE, doc=_NAME_DOC, refusal=refusal, check=check, **more))


def _count_param(low: int, high: int, default: int, doc: str) -> Param:
    field = fields.Field("integer", ge=low, le=high, default=default, rule=f"{low} to {high}", doc=doc)
    return Param(field, "a whole number", _whole)


#: A pop's default wait when ``wait=true`` comes without a timeout (ms).
DEFAULT_TIMEOUT_MS = 30_000
_FLAG = Param(fields.Field("boolean", default=False), "true or false")
#: ``GET /ephemeral/pop``'s query parameters, in ``PopCall``'s order,
#: declared once: ``parse_pop`` reads them and the document shows them.
POP = Query(
    {
        "queue": _name_param("queue", missing=""),
        "partition": _name_param("partition"),
        "group": _name_param("group", falsy_is_absent=True),
        "batch": _count_param(1, MAX_BATCH, 1, "messages to take at most"),
        "wait": _FLAG,
        "timeout": _count_param(0, MAX_TIMEOUT_MS, DEFAULT_TIMEOUT_MS, "ms to wait for a message with wait=true"),
        "autoAck": _FLAG,
    }
)


def parse_pop(params: Any) -> PopCall:
    return PopCall(*POP.read(params, _bad).values())


@dataclass(frozen=True, slots=True)
class AckCall:
    queue: str
    group: str | None
    acks: list[ephemeral.AckItem]


def parse_ack(body: Any) -> AckCall:
    call = _validated(EphemeralAckIn, body)
    return AckCall(call.queue, call.group, [ephemeral.AckItem(item.id, item.status or None) for item in call.acks])


# --------------------------------------------------------------------------
# Answers (each declared once: ``wire.answers``)

_POLICY = Literal["reject", "dropOldest"]
_SENT = Key(int, omit=True)
_ECHO_BUFFER = Answer("EphemeralWindowBufferEchoOut", ms=_SENT, count=_SENT)
#: Rendered as the call sent them (``ConfigureCall.options``).
OPTIONS_ECHO = Answer(
    "EphemeralOptionsEchoOut",
    doc="The options as the configure call sent them (only those it sent).",
    maxBytes=_SENT,
    maxLength=_SENT,
    policy=Key(_POLICY, omit=True),
    ttlSeconds=_SENT,
    leaseSeconds=_SENT,
    retryLimit=_SENT,
    windowBuffer=Key(_ECHO_BUFFER.model, omit=True),
)
CONFIGURED = Answer("EphemeralConfigureOut", args=("updated_at",), queue=str, options=OPTIONS_ECHO.model, updatedAt=str)
RESET = Answer("EphemeralResetOut", args=("queue", "dropped"), queue=str, dropped=int)
DELETED = Answer("EphemeralDeleteOut", args=("queue",), queue=str, deleted=bool, declared=bool)
PUSHED = Answer("EphemeralPushOut", args=("pushed",), pushed=int)
MESSAGE = Answer(
    "EphemeralMessageOut",
    id=Key(str, "opaque: e:<epoch hex>:<partition>:<seq>"),
    partition=str,
    attempts=int,
    payload=Key(JSONValue, via=lambda payload: msgspec.Raw(payload.encode())),
)
POPPED = Answer("EphemeralPopOut", args=("queue",), queue=str, messages=Many(MESSAGE))
_OUTCOME = Key(Literal["acked", "redelivered", "stale", "unknown"], src="1")
#: One per ``(AckItem, outcome)``.
ACKED = Answer(
    "EphemeralAckOut",
    results=Key(Many(Answer("EphemeralAckResultOut", id=Key(str, src="0.id"), outcome=_OUTCOME)), src="."),
)
DROPS = Answer(
    "EphemeralDropsOut",
    bounds=Key(int, src="drops_bounds"),
    ttl=Key(int, src="drops_ttl"),
    retry=Key(int, src="drops_retry"),
)
_BUFFER = Answer("EphemeralWindowBufferOut", ms=Key(int, src="window_ms"), count=Key(int, src="window_count"))
EFFECTIVE = Answer(
    "EphemeralEffectiveOptionsOut",
    maxBytes=int,
    maxLength=int,
    policy=_POLICY,
    ttlSeconds=int,
    leaseSeconds=int,
    retryLimit=int,
    windowBuffer=Key(_BUFFER, src="."),
)
_TIER = Key(
    Literal["declared", "implicit"], src="declared", via=lambda declared: "declared" if declared else "implicit"
)
QUEUE = Answer(
    "EphemeralQueueOut",
    queue=str,
    tier=_TIER,
    depth=int,
    bytes=int,
    partitions=int,
    groups=int,
    drops=Key(DROPS, src="."),
    options=EFFECTIVE,
)
#: Of the queues listed, and the cell's bytes.
QUEUES = Answer(
    "EphemeralQueuesOut",
    args=("cell_bytes",),
    queues=Key(Many(QUEUE), src="."),
    count=Key(int, src=".", via=len),
    cellBytes=int,
)
_PARTITION = Answer("EphemeralPartitionDepthOut", partition=str, pending=int, bytes=int)
_GROUP = Answer("EphemeralGroupDepthOut", group=str, pending=int, skipped=int)
DEPTH = Answer(
    "EphemeralDepthOut",
    queue=str,
    group=None,
    tier=_TIER,
    pending=Key(int, src="depth"),
    partitionsPending=Key(int, src="partitions", via=lambda partitions: sum(1 for p in partitions if p.pending)),
    bytes=int,
    partitions=Many(_PARTITION),
    groups=Many(_GROUP),
)
ERROR = engine_refusal(
    "EphemeralErrorOut",
    "``{error, code}``: ``error`` is prose, ``code`` the machine code.",
    code=Literal["ephemeral_bad_request", "queue_full", "ephemeral_unavailable", "ephemeral_queue_not_found"],
)
