"""The message log's protocol: JSON bodies and query strings in, typed
domain commands out; domain results out as the protocol's bodies.

Every refusal is an ``InvalidArgument`` (code ``bad_request``) or, for a
name over the engine's key budget, ``NameTooLong`` (``name_too_long``),
with the message the broker has always given. Checks run in a fixed order
and the first one that fails answers, so the order below is part of the
protocol too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial
from typing import Annotated, Any, Literal

import msgspec
from pydantic import Field as Doc

from queenadmin.api.http import embed_json, utc_micros_z
from queenadmin.api.schemas.common import JSONValue, MicrosZTime
from queenadmin.api.wire.answers import Answer, Key, Many, list_of
from queenadmin.api.wire.fields import NO_NUL, SOME_TEXT, TEXT, Field, Op, Param, Query, any_case, flag
from queenadmin.domain import clock, names, queues
from queenadmin.errors import ConflationRefused, InvalidArgument, NameTooLong
from queenadmin.plumbing.db import json_text

#: Engine names (queue, partition) fit a 511-byte store key (protocol 12).
MAX_NAME_BYTES = 511
MAX_GROUP_BYTES = 511
MAX_TXN_BYTES = 65535
#: Largest batch one pop hands out.
MAX_BATCH = 10_000
#: Most partitions (one message each) a conflating pop claims.
MAX_CONFLATION_WIDTH = 64
NO_GROUP_CONFLATION = (
    "conflation requires consumerGroup: last-value delivery is a policy of a consumer group, and queue mode has none"
)
AUTO_ACK_CONFLATION = (
    "conflation cannot be combined with autoAck: a conflating pop leases the newest message, and its ack"
    " retires the older ones"
)
DEFAULT_BATCH = 200
#: What pop autopilot chooses when the client leaves batch/partitions unset.
#: Internal, not a setting (docs/settings.md, "Internal constants").
AUTOPILOT_BATCH = 100
AUTOPILOT_PARTITIONS = 4
MAX_PARTITIONS = 64
MAX_TIMEOUT_MS = 60_000
DEFAULT_TIMEOUT_MS = 30_000
DEFAULT_EXTEND_SECONDS = 60
#: Longest lease a pop or an extend may ask for: ten years. Past it the
#: expiry no longer fits a datetime (2**70 seconds) or a database column.
MAX_LEASE_SECONDS = 10 * 365 * 86400
#: Offsets are signed 64-bit integers in both databases.
MAX_OFFSET = 2**63 - 1
#: A query string: Django's ``QueryDict`` or any str -> str mapping.
Params = Mapping[str, str]


# --------------------------------------------------------------------------
# Shared checks


def json_object(body: Any) -> dict[str, Any]:
    """``body`` when it is a JSON object, else the protocol's refusal."""
    if not isinstance(body, dict):
        raise InvalidArgument("the body must be a JSON object")
    return body


def check_name(value: Any, what: str) -> str:
    """A queue, partition or trace name: a non-empty string within the key
    budget that keeps the rule of every stored name (``domain.names``)."""
    if not isinstance(value, str) or not value:
        raise InvalidArgument(f"{what} must be a non-empty string")
    return names.check_engine_name(value, what, MAX_NAME_BYTES)


def check_text(value: Any, what: str) -> Any:
    """``value`` unless it is a string no database can store or compare (a
    NUL, which PostgreSQL refuses, or a lone surrogate): refused here so that
    SQLite answers the same. The check for a name looked up (a read, a
    delete), so that a name stored before the rule is still found."""
    if isinstance(value, str):
        fault = names.unstorable(value)
        if fault is not None:
            raise InvalidArgument(f"{what} {fault}")
    return value


def check_group(value: Any) -> str:
    """A consumer group; ``None`` and ``""`` mean queue mode."""
    if value is None or value == "":
        return queues.QUEUE_MODE
    if not isinstance(value, str) or "\x00" in value:
        raise InvalidArgument("consumerGroup must be a string")
    return names.check_engine_name(value, "consumerGroup", MAX_GROUP_BYTES)


def lookup_group(value: Any) -> str:
    """A consumer group to look up or delete: ``check_group`` without the
    rule of stored names, so that a group stored before it is found."""
    if value is None or value == "":
        return queues.QUEUE_MODE
    if not isinstance(value, str) or names.unstorable(value) is not None:
        raise InvalidArgument("consumerGroup must be a string")
    return value


def engine_bad(reason: str, detail: str) -> InvalidArgument:
    # The engine family has one code (bad_request); its details name the field.
    return InvalidArgument(detail)


NAME_DOC = (
    f"no control or bidirectional formatting characters, at most {MAX_NAME_BYTES} bytes of UTF-8"
    " (413 name_too_long above)"
)


def name_field(what: str, **changes: Any) -> Field:
    """A queue or partition name: ``check_name``'s rule, refusals naming ``what``."""
    field = Field(
        "string",
        missing="",
        min_length=1,
        max_length=MAX_NAME_BYTES,
        pattern=names.SCHEMA_PATTERN,
        refusal=f"{what} must be a non-empty string",
        check=partial(check_name, what=what),
        doc=NAME_DOC,
    )
    return replace(field, **changes)


#: A consumer group: ``check_group``'s rule.
GROUP = Field(
    "string",
    default=queues.QUEUE_MODE,
    max_length=MAX_GROUP_BYTES,
    pattern=names.SCHEMA_PATTERN_OR_EMPTY,
    refusal="consumerGroup must be a string",
    check=check_group,
    doc=f'"" or null: queue mode; at most {MAX_GROUP_BYTES} bytes of UTF-8 (413 above)',
)


_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")


def _flag_doc(doc: str) -> Param:
    """A flag of a query string: true, 1 or yes; false, 0, no or empty; any case."""
    return flag(doc=f"{doc}: true, 1 or yes; false, 0, no or empty (any case)", true=_TRUE, false=_FALSE)


#: The first and last instants the databases hold (years 1 to 9999 in UTC).
EARLIEST = datetime.min.replace(tzinfo=UTC)
LATEST = datetime.max.replace(tzinfo=UTC)


def iso_time(raw: str, name: str, expected: str, *, clamp: bool = False) -> datetime:
    """An ISO time with its zone, within the range the databases hold; else
    ``InvalidArgument`` (with ``clamp``: the first or last instant they hold)."""
    try:
        moment = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidArgument(f"{name} must be {expected}") from None
    if moment.tzinfo is None:
        raise InvalidArgument(f"{name} must carry a time zone")
    try:
        # In UTC: PostgreSQL refuses an offset past 15:59 (Python's go to
        # 23:59), and 0001-01-01T00:00+14:00 is before year 1 in UTC, which
        # the databases' converters cannot represent.
        return moment.astimezone(UTC)
    except OverflowError:
        if clamp:
            return EARLIEST if moment.year == 1 else LATEST
        raise InvalidArgument(f"{name} is out of range") from None


def time_param(name: str, doc: str, *, clamp: bool = False) -> Param:
    """A query string's ISO time (``iso_time``); empty reads as absent."""
    check = partial(iso_time, name=name, expected="an ISO time", clamp=clamp)
    return Param(Field("string", falsy_is_absent=True, check=check, schema_extra={"format": "date-time"}, doc=doc))


# --------------------------------------------------------------------------
# Push


#: One pushed message. Its parser is ``parse_push_items``, by hand: a push
#: of 1,000 items is the hot path, measured (bench/cpu_compare.py push1000).
PUSH_ITEM = Op(
    "PushItemIn",
    {
        "queue": name_field("queue"),
        "partition": name_field("partition", missing=None, default=queues.DEFAULT_PARTITION, doc='default "Default"'),
        "payload": Field("any", missing="", null_is_bad=True, doc="any JSON value, null included"),
        "transactionId": Field(
            "string",
            min_length=1,
            max_length=MAX_TXN_BYTES,
            pattern=SOME_TEXT,
            doc=f"dedup key, at most {MAX_TXN_BYTES} bytes",
        ),
        "traceId": Field("any", doc="a UUID; anything else is ignored"),
    },
    tenant_free=False,
)
PUSH = Op("PushIn", {"items": Field("array", missing="", of=PUSH_ITEM)}, tenant_free=False)


def parse_push(body: Any) -> list[queues.PushItem]:
    """``POST /push``: ``{"items": [...]}``, see ``parse_push_items``."""
    body = json_object(body)
    if "items" not in body:
        raise InvalidArgument("items is required")
    return parse_push_items(body["items"])


_encode = msgspec.json.encode


def _payload_text(value: Any) -> str:
    """``json_text`` of a parsed JSON value, by msgspec where it agrees.

    msgspec writes the same compact text at a fraction of the cost (an
    exponent may read ``1e16`` for ``1e+16``: the same number). It writes
    NaN and infinities as ``null`` where ``json_text`` refuses them, so a
    text with ``null`` in it, and whatever msgspec refuses (a lone
    surrogate), is written by ``json_text``.
    """
    try:
        text = _encode(value)
    except (TypeError, ValueError):
        return json_text(value)
    if b"null" in text:
        return json_text(value)
    return text.decode()


def parse_push_items(raw: Any) -> list[queues.PushItem]:
    """The ``items`` of a push body, in order.

    ``partition`` defaults to ``"Default"``; ``payload`` is required (null
    included) and kept as compact JSON text; ``transactionId`` is a
    non-empty string of at most 65535 bytes; a ``traceId`` that is not a
    UUID is ignored (protocol section 5.1).
    """
    if not isinstance(raw, list):
        raise InvalidArgument("items must be an array")
    items = []
    # The names of a push repeat from item to item: each is checked once.
    checked: set[str] = set()
    for index, item in enumerate(raw):
        if not isinstance(item, dict):
            raise InvalidArgument(f"items[{index}] must be an object")
        queue = item.get("queue")
        if queue.__class__ is not str or queue not in checked:
            queue = check_name(queue, f"items[{index}].queue")
            checked.add(queue)
        partition = item.get("partition")
        if partition is None:
            partition = queues.DEFAULT_PARTITION
        elif partition.__class__ is not str or partition not in checked:
            partition = check_name(partition, f"items[{index}].partition")
            checked.add(partition)
        if "payload" not in item:
            raise InvalidArgument(f"items[{index}].payload is required")
        try:
            payload_json = _payload_text(item["payload"])
        except (TypeError, ValueError) as exc:
            raise InvalidArgument(f"items[{index}].payload is not JSON") from exc
        txn = item.get("transactionId")
        if txn is not None:
            if not isinstance(txn, str) or not txn:
                raise InvalidArgument(f"items[{index}].transactionId must be a non-empty string")
            check_text(txn, f"items[{index}].transactionId")
            if len(txn.encode()) > MAX_TXN_BYTES:
                raise InvalidArgument(f"items[{index}].transactionId is over {MAX_TXN_BYTES} bytes")
        trace = item.get("traceId")
        items.append(queues.PushItem(queue, partition, payload_json, txn, trace if queues.is_uuid(trace) else None))
    return items


_QUEUE_NAME = Key(str, src="queue")
PUSHED = Answer(
    "PushItemOut",
    index=int,
    message_id=str,
    transaction_id=str,
    queueName=_QUEUE_NAME,
    status=Key(Literal["queued", "duplicate"], "a duplicate carries the original id and offset"),
    offset=int,
)
PUSH_FAILED = Answer(
    "PushItemFailedOut",
    doc="An item the queue's ``maxSize`` refused (Queen 1.x's answer); nothing written.",
    index=int,
    message_id=None,
    transaction_id=str,
    queueName=_QUEUE_NAME,
    status=Literal["failed"],
    offset=None,
    error=str,
)
#: One message's answer to a push (a DLQ replay's or retry's ``replayedAs`` too).
push_item = PUSHED.render
_push_failed = PUSH_FAILED.render


def render_push(results: Sequence[queues.PushResult]) -> list[dict[str, Any]]:
    return [_push_failed(r) if r.status == "failed" else push_item(r) for r in results]


# --------------------------------------------------------------------------
# Pop


@dataclass(frozen=True)
class Autopilot:
    """The batch and partition count autopilot chose, echoed in the answer."""

    batch: int
    partitions: int


@dataclass(frozen=True)
class PopCall:
    """A parsed pop: the claim to make and how long to wait for one."""

    request: queues.PopRequest
    #: Long-poll: wait up to ``timeout_seconds`` for messages.
    wait: bool
    timeout_seconds: float
    autopilot: Autopilot | None = None
    #: ``frames=true``: answer with the framed pop (``wire/binary.py``).
    frames: bool = False


def _count(refusal: str, **more: Any) -> Param:
    return Param(Field("integer", ge=1, refusal=refusal, **more), "an integer")


def _read(params: Params, name: str) -> Any:
    """The parameter ``name`` of a pop's query, read by its declaration."""
    return _POP_PARAMS[name].read(params, name, engine_bad)


_CLAMPED = f"the largest values are clamped ({MAX_BATCH} messages, {MAX_PARTITIONS} partitions)"


#: A pop's query (the conflation flags, which go with the group, are ``DELIVERY``).
POP = Query(
    {
        "batch": _count("batch must be at least 1", doc=f"default {DEFAULT_BATCH}; {_CLAMPED}"),
        "partitions": _count(f"partitions must be from 1 to {MAX_PARTITIONS}", doc=_CLAMPED),
        "wait": _flag_doc("long-poll: wait up to timeout ms for a message"),
        "timeout": Param(
            Field("integer", default=DEFAULT_TIMEOUT_MS, doc=f"ms; clamped to 0..{MAX_TIMEOUT_MS}"), "an integer"
        ),
        "leaseSeconds": _count(
            "leaseSeconds must be at least 1",
            le=MAX_LEASE_SECONDS,
            too_high=f"leaseSeconds must be at most {MAX_LEASE_SECONDS}",
        ),
        "subscriptionMode": Param(
            Field("string", pattern=NO_NUL, doc="a new group's start: new or new-only; anything else: all")
        ),
        "subscriptionFrom": Param(
            Field("string", schema_extra={"anyOf": [{"enum": ["now", ""]}, {"format": "date-time"}]})
        ),
        "autopilot": _flag_doc(
            f"batch {AUTOPILOT_BATCH}, partitions {AUTOPILOT_PARTITIONS} where unset (no conflation)"
        ),
        "frames": _flag_doc("answer with the framed pop where the server serves it"),
    }
)
_IS_TRUE = {"pattern": f"^(?:{'|'.join(map(any_case, _TRUE))})$"}
#: The group and the flags that go with it: a conflating pop needs a group
#: and no auto-ack.
_DELIVERY = Query(
    {
        # Read by ``check_group``: queue mode, its default, is no text to publish.
        "consumerGroup": Param(replace(GROUP, default=None)),
        "conflation": _flag_doc("last-value delivery: one message per partition, the newest"),
        "autoAck": _flag_doc("complete the messages on delivery"),
        "commitOnDelivery": _flag_doc("the same as autoAck"),
    }
)
DELIVERY = _DELIVERY.exploded(
    "delivery",
    required=False,
    rule={
        "if": {"required": ["conflation"], "properties": {"conflation": _IS_TRUE}},
        "then": {
            "required": ["consumerGroup"],
            "properties": {
                "consumerGroup": {"minLength": 1},
                "autoAck": {"not": _IS_TRUE},
                "commitOnDelivery": {"not": _IS_TRUE},
            },
        },
    },
)
#: ``GET /pop``'s selection: a namespace, a task or both.
SELECTION = Query({"namespace": TEXT, "task": TEXT}).exploded(
    "selection",
    required=True,
    rule={"anyOf": [{"required": [name], "properties": {name: {"minLength": 1}}} for name in ("namespace", "task")]},
)


_POP_PARAMS = {**POP.params, **_DELIVERY.params}


def parse_pop_queue(params: Params, queue: str, partition: str | None = None) -> PopCall:
    """``GET /pop/queue/{queue}[/partition/{partition}]`` and its query."""
    _refuse_conflation(params)
    queue = check_name(queue, "queue")
    if partition is not None:
        partition = check_name(partition, "partition")
    return _pop_call(params, queue=queue, partition=partition)


def parse_pop_discovery(params: Params) -> PopCall:
    """``GET /pop?namespace=&task=``: pop from any queue they select."""
    _refuse_conflation(params)
    namespace, task = (params.get(name) or None for name in ("namespace", "task"))
    if namespace is None and task is None:
        raise InvalidArgument("namespace or task is required")
    return _pop_call(params, namespace=namespace, task=task)


def _refuse_conflation(params: Params) -> None:
    """A conflating pop's refusals, before any other check (Queen's order):
    no consumer group, then auto-ack (``autoAck`` or ``commitOnDelivery``)."""
    if not _read(params, "conflation"):
        return
    if check_group(params.get("consumerGroup")) == queues.QUEUE_MODE:
        raise ConflationRefused(NO_GROUP_CONFLATION)
    if _read(params, "autoAck") or _read(params, "commitOnDelivery"):
        raise ConflationRefused(AUTO_ACK_CONFLATION)


def _pop_call(
    params: Params,
    *,
    queue: str | None = None,
    partition: str | None = None,
    namespace: str | None = None,
    task: str | None = None,
) -> PopCall:
    conflation = _read(params, "conflation")
    autopilot = None
    on_autopilot = _read(params, "autopilot")
    batch = _read(params, "batch")
    partitions = _read(params, "partitions")
    # A conflating group claims partitions ?? batch partitions, one message
    # each; so does a group whose stored policy is conflation, whatever this
    # pop asked. Autopilot never resizes a conflating pop.
    width = max(1, min(partitions or batch or DEFAULT_BATCH, MAX_CONFLATION_WIDTH))
    if on_autopilot and not conflation:
        autopilot = Autopilot(batch or AUTOPILOT_BATCH, partitions or AUTOPILOT_PARTITIONS)
        batch, partitions = autopilot.batch, autopilot.partitions
    timeout_ms = max(0, min(_read(params, "timeout"), MAX_TIMEOUT_MS))
    lease = _read(params, "leaseSeconds")
    # Queen's reading: new and new-only mean "new"; any other value "all".
    raw_mode = params.get("subscriptionMode") or None
    mode: queues.SubscriptionMode | None = None
    if raw_mode is not None:
        mode = "new" if raw_mode.strip().lower() in ("new", "new-only") else "all"
    since: datetime | str | None = params.get("subscriptionFrom") or None
    if isinstance(since, str) and since != "now":
        since = iso_time(since, "subscriptionFrom", "an ISO time or now")
    # commitOnDelivery is read only when autoAck does not already say so.
    auto_ack = _read(params, "autoAck") or _read(params, "commitOnDelivery")
    request = queues.PopRequest(
        group=check_group(params.get("consumerGroup")),
        batch=min(batch or DEFAULT_BATCH, MAX_BATCH),
        max_partitions=min(partitions or 1, MAX_PARTITIONS),
        lease_seconds=lease,
        subscription_mode=mode,
        subscription_from=since,
        auto_ack=auto_ack,
        conflation=conflation,
        conflation_width=width,
        queue=queue,
        partition=partition,
        namespace=namespace,
        task=task,
    )
    return PopCall(request, _read(params, "wait"), timeout_ms / 1000, autopilot, _read(params, "frames"))


_MESSAGE = Answer(
    "PopMessageOut",
    args=("lease_id", "group"),
    id=Key(str, src="message_id"),
    transactionId=str,
    traceId=str | None,
    data=Key(JSONValue, src="payload_json", via=embed_json),
    producerSub=str | None,
    createdAt=Key(MicrosZTime, via=utc_micros_z),
    partitionId=Key(str, "a decimal string; acks echo it", via=str),
    partition=str,
    leaseId=Key(str, '"" with autoAck', src="lease_id"),
    consumerGroup=Key(str, src="group"),
    deliveryAttempt=int,
    offset=int,
)
_AUTOPILOT = Answer("PopAutopilotOut", args=("waited_ms",), batch=int, partitions=int, waitMs=Key(int, src="waited_ms"))


_STORED = "present when the group's stored policy is conflation"
_OTHER = "present when the pop asked for the other policy than the stored one (which applied)"


def _conflation(conflation: str, conflict: str) -> dict[str, Any]:
    """A pop's conflation keys, each present only when true (``conflation``, ``conflict``)."""
    flag = Literal[True]
    return {
        "conflation": Key(flag, _STORED, omit=True, when=conflation),
        "conflationConflict": Key(flag, _OTHER, omit=True, when=conflict),
    }


_POP_KEYS: dict[str, Any] = {
    "success": Literal[True],
    "queue": str,
    "partition": Key(str, "the first partition claimed"),
    "partitionId": Key(str, via=str),
    "leaseId": str,
    "consumerGroup": Key(str, src="group"),
    "partitionsClaimed": Key(int, src="partitions", via=len),
    "messages": Many(_MESSAGE, lease_id="lease_id", group="group"),
    "autopilot": Key(_AUTOPILOT.model, "present with autopilot=true", omit=True),
}
#: The conflation keys are written last, as the document lists them first.
POPPED = Answer(
    "PopOut",
    args=("autopilot",),
    first=tuple(_POP_KEYS),
    **_conflation("conflation", "conflation_conflict"),
    **_POP_KEYS,
)


def render_claim(claim: queues.Claim, autopilot: Autopilot | None, waited_ms: int) -> dict[str, Any]:
    """A pop's answer, for ``http.json_dumps`` (payloads embedded as stored)."""
    # A conflating claim is sized by partitions ?? batch, never by autopilot
    # (a group stored as conflating, popped with autopilot=true).
    echo = None if autopilot is None or claim.conflation else _AUTOPILOT.render(autopilot, waited_ms)
    return POPPED.render(claim, echo)


def conflation_keys(conflation: bool, conflict: bool) -> dict[str, bool]:
    """A pop answer's conflation keys: each appears only when true."""
    keys = {}
    if conflation:
        keys["conflation"] = True
    if conflict:
        keys["conflationConflict"] = True
    return keys


_NO_MESSAGES: Any = Annotated[list_of(_MESSAGE), Doc(max_length=0)]
_EMPTY_KEYS: dict[str, Any] = {
    "success": Literal[True],
    "queue": Key(str | None, src="request.queue"),
    "consumerGroup": Key(str, src="request.group"),
    "partitionsClaimed": Literal[0],
    "messages": Key(_NO_MESSAGES, const=[]),
}
#: ``policy``: the group's conflation policy.
EMPTY_POP = Answer(
    "PopEmptyOut",
    doc="An empty pop of a group whose conflation policy has to be said (else a 204).",
    args=("policy",),
    first=tuple(_EMPTY_KEYS),
    **_conflation("policy.conflation", "policy.conflict"),
    **_EMPTY_KEYS,
)
CONFLATION_REFUSED: Answer = Answer(
    "ConflationRefusedOut",
    doc="400 of a conflating pop with no consumerGroup, or with autoAck.",
    success=Literal[False],
    error=Key(str, src="detail"),
    messages=Key(_NO_MESSAGES, const=[]),
)


def render_empty_pop(call: PopCall, policy: queues.ConflationPolicy) -> dict[str, Any] | None:
    """An empty pop's body when the group's conflation policy has to be
    said (a 200 then, never a 204: the client takes a silent answer for a
    broker that ignored ``conflation=true``); None otherwise (a 204)."""
    if not (policy.conflation or policy.conflict):
        return None
    return EMPTY_POP.render(call, policy)


# --------------------------------------------------------------------------
# Ack and lease


def _partition_id(value: str | int) -> str:
    return str(check_text(str(value), "partitionId"))


#: One acknowledgment (of /ack, /ack/batch or a transaction); read in this order.
ACK = Op(
    "AckIn",
    {
        "transactionId": Field(
            "string",
            missing="",
            min_length=1,
            pattern=SOME_TEXT,
            refusal="transactionId must be a non-empty string",
            check=partial(check_text, what="transactionId"),
        ),
        "partitionId": Field(
            ("string", "integer"),
            missing="",
            min_length=1,
            pattern=SOME_TEXT,
            refusal="partitionId must be a non-empty string",
            check=_partition_id,
            doc="the decimal partition id the pop returned (a JSON integer is read as its digits)",
        ),
        "status": Field("string", doc="completed, failed, retry or dlq; any other string is completed"),
        "leaseId": Field("string", pattern=NO_NUL, check=partial(check_text, what="leaseId")),
        "error": Field("any", doc="a string; any other JSON is stored as its JSON text"),
        "consumerGroup": GROUP,
    },
    tenant_free=False,
)
#: The batch's group is read only for an acknowledgment without its own.
ACK_BATCH = Op(
    "AckBatchIn",
    {
        "acknowledgments": Field(
            "array",
            missing="",
            of=ACK,
            refusal="acknowledgments must be an array",
            doc="each may name its own consumerGroup",
        ),
        "consumerGroup": Field("any", doc="for the acknowledgments that name none"),
    },
    extra={
        "if": {
            "properties": {"acknowledgments": {"contains": {"type": "object", "not": {"required": ["consumerGroup"]}}}}
        },
        "then": {"properties": {"consumerGroup": GROUP.schema()}},
    },
    tenant_free=False,
)


def parse_ack(body: Any) -> list[queues.AckItem]:
    """``POST /ack``: one acknowledgment, as a list of one."""
    body = json_object(body)
    return [ack_item(0, body, body.get("consumerGroup"))]


def parse_ack_batch(body: Any) -> list[queues.AckItem]:
    """``POST /ack/batch``: ``acknowledgments``, each may name its group."""
    body = json_object(body)
    raw = ACK_BATCH.fields["acknowledgments"].read(body, "acknowledgments", engine_bad)
    group = body.get("consumerGroup")
    plain = _plain_acks(raw, group)
    if plain is not None:
        return plain
    return [ack_item(i, a, a.get("consumerGroup", group) if isinstance(a, dict) else group) for i, a in enumerate(raw)]


def _plain_acks(raw: list[Any], group: Any) -> list[queues.AckItem] | None:
    """``ack_item`` of each of ``raw`` where all are plain, else None.

    Plain: an object whose transactionId and partitionId are non-empty
    strings, and whose status, leaseId and error are strings or null; its
    texts hold nothing ``check_text`` refuses and its group passes
    ``check_group``. Those are what ``ack_item`` accepts without a check of
    its own, so the items are the same (tests/unit/test_ack_parse.py); the
    texts are checked in one search, the groups once each. ``ack_item``'s
    reads were 4.3 us an acknowledgment, most of a batch ack's parse
    (bench/README.md, "Where the time goes"). Anything else goes to
    ``ack_item``, whose refusals keep their order.
    """
    texts: list[str] = []
    fields: list[tuple[str, str, Any, Any, Any, Any]] = []
    for a in raw:
        if type(a) is not dict:
            return None
        txn = a.get("transactionId")
        pid = a.get("partitionId")
        status = a.get("status")
        lease = a.get("leaseId")
        error = a.get("error")
        if (
            type(txn) is not str
            or not txn
            or type(pid) is not str
            or not pid
            or (status is not None and type(status) is not str)
            or (lease is not None and type(lease) is not str)
            or (error is not None and type(error) is not str)
        ):
            return None
        texts += (txn, pid) if lease is None else (txn, pid, lease)
        fields.append((txn, pid, status, lease, error, a.get("consumerGroup", group)))
    if names.unstorable("".join(texts)) is not None:
        return None
    groups: dict[Any, str] = {}
    items = []
    try:
        for index, (txn, pid, status, lease, error, named) in enumerate(fields):
            if named is not None and type(named) is not str:
                return None
            checked = groups.get(named)
            if checked is None:
                checked = groups[named] = check_group(named)
            # Any other status reads as completed (protocol section 5.1).
            status = status if status in queues.ACK_STATUSES else "completed"
            items.append(queues.AckItem(index, txn, pid, status, lease or None, error, checked))  # type: ignore[arg-type]
    except (InvalidArgument, NameTooLong):
        return None
    return items


_ACK_FIELDS = tuple((name, f) for name, f in ACK.fields.items() if name != "consumerGroup")


def ack_item(index: int, raw: Any, group: Any) -> queues.AckItem:
    """One acknowledgment object (of /ack, /ack/batch or a transaction); its
    group is ``group`` (the batch's when the object names none)."""
    if not isinstance(raw, dict):
        raise InvalidArgument(f"acknowledgment {index} must be an object")
    txn, pid, status, lease, error = (f.read(raw, name, engine_bad) for name, f in _ACK_FIELDS)
    # Any other status reads as completed (protocol section 5.1).
    status = status if status in queues.ACK_STATUSES else "completed"
    if error is not None and not isinstance(error, str):
        error = json.dumps(error)
    return queues.AckItem(index, txn, pid, status, lease or None, error, check_group(group))  # type: ignore[arg-type]


ACKED = Answer(
    "AckOut", index=int, transactionId=str, success=bool, error=str | None, leaseReleased=bool, dlq=bool, noop=bool
)


def render_acks(outcomes: Sequence[queues.AckOutcome]) -> list[dict[str, Any]]:
    return [ACKED.render(o) for o in outcomes]


LEASE_EXTEND = Op(
    "LeaseExtendIn",
    {
        "seconds": Field(
            "integer",
            ge=1,
            default=DEFAULT_EXTEND_SECONDS,
            le=MAX_LEASE_SECONDS,
            refusal="seconds must be an integer of at least 1",
            too_high=f"seconds must be at most {MAX_LEASE_SECONDS}",
            doc=f"default {DEFAULT_EXTEND_SECONDS}",
        )
    },
    doc="Optional: no body or ``null`` extends by the default.",
    extra={"type": ["object", "null"]},
    tenant_free=False,
)


def parse_lease_extend(body: Any) -> int:
    """``POST /lease/{id}/extend``: the seconds to extend by (default 60).

    No body, or a JSON null, means the default.
    """
    fields = {} if body is None else json_object(body)
    return int(LEASE_EXTEND.fields["seconds"].read(fields, "seconds", engine_bad))


_EXPIRES = Key(MicrosZTime | None, src="expires_at", via=clock.iso_micros_z)
LEASE_EXTENDED = Answer(
    "LeaseExtendOut",
    doc="The three times are the same new expiry (null when nothing was renewed).",
    leaseId=str,
    success=Key(bool, src="renewed", via=lambda renewed: renewed > 0),
    renewed=int,
    newExpiresAt=_EXPIRES,
    expiresAt=_EXPIRES,
    lease_expires_at=_EXPIRES,
)
