"""``/streams/v1`` JSON to stream commands and back (protocol-wave3.md A).

Queen's streams routes speak snake_case, answer ``success`` on every body,
and report a cycle that rolled back as a 200 with ``success: false``. Ids
the client echoes back (``query_id``, ``partition_id``) that name nothing
are not refusals: they read as an unknown query or partition, which the
domain answers (no rows; a cycle that fails with the reason).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Literal, TypedDict
from uuid import UUID

from queenadmin.api.schemas.common import JSONValue
from queenadmin.api.wire.answers import Answer, Key, Many, engine_refusal
from queenadmin.api.wire.fields import NO_NUL, SOME_TEXT, Bad, Field, Op
from queenadmin.api.wire.queues import (
    MAX_GROUP_BYTES,
    MAX_NAME_BYTES,
    check_group,
    check_name,
    check_text,
    engine_bad,
    json_object,
)
from queenadmin.domain import clock, names, queues, streams
from queenadmin.errors import InvalidArgument
from queenadmin.plumbing import db

#: What an id that names nothing reads as: no query has the nil UUID, no
#: partition the id 0.
NO_QUERY = UUID(int=0)
NO_PARTITION = 0


class QueryCall(TypedDict):
    """``stream_register``'s keywords, as the body gives them."""

    name: str
    source_queue: str
    sink_queue: str | None
    config_hash: str
    reset: bool


def _at(where: str) -> Bad:
    """``engine_bad`` for the fields of one item: its details start with ``where``."""
    return lambda reason, detail: InvalidArgument(f"{where}.{detail}")


# --------------------------------------------------------------------------
# The fields of each body, declared once: the parsers below read them and
# the document shows them (``openapi.body_of``). No reason codes: every
# refusal is the engine's 400 ``bad_request`` (413 over a budget).

_NAME_DOC = f"no control or bidirectional formatting characters, at most {MAX_NAME_BYTES} bytes of UTF-8 (413 above)"


#: A queue or partition name: ``check_name``'s rule.
QUEUE = Field(
    "string",
    missing="",
    min_length=1,
    max_length=MAX_NAME_BYTES,
    pattern=names.SCHEMA_PATTERN,
    rule="a non-empty string",
    doc=_NAME_DOC,
    falsy_is_absent=True,
)
#: Non-empty text no database refuses (``check_text``).
TEXT = Field("string", missing="", min_length=1, pattern=SOME_TEXT, rule="a non-empty string", falsy_is_absent=True)
FLAG = Field("boolean")

QUERY = Op(
    "QueryIn",
    {
        "name": replace(
            QUEUE,
            falsy_is_absent=False,
            check=lambda value: names.check_engine_name(check_text(value, "name"), "name"),
            doc="the pipeline's query id, e.g. orders.agg; " + _NAME_DOC,
        ),
        "source_queue": replace(QUEUE, check=lambda value: check_name(value, "source_queue")),
        "sink_queue": replace(
            QUEUE,
            missing=None,
            min_length=None,
            pattern=names.SCHEMA_PATTERN_OR_EMPTY,
            falsy_is_absent=False,
            check=lambda value: check_name(value, "sink_queue") if value else None,
            doc='"" or null: none; ' + _NAME_DOC,
        ),
        "config_hash": replace(
            TEXT,
            falsy_is_absent=False,
            check=lambda value: check_text(value, "config_hash"),
            doc="sha256 of the operator configs",
        ),
        "reset": replace(FLAG, default=False, doc="wipe the state when the hash changed"),
    },
    tenant_free=False,
)
#: Any id: one that names nothing reads as an unknown query (``NO_QUERY``).
QUERY_ID = replace(TEXT, falsy_is_absent=False, check=lambda value: check_text(value, "query_id"))
#: A partition's id, a string or a number: one that names nothing reads as
#: an unknown partition (``NO_PARTITION``).
PARTITION_ID = Field(
    ("string", "integer"),
    missing="",
    min_length=1,
    pattern=SOME_TEXT,
    rule="a non-empty string",
    doc="the source partition's id (digits; a number is read as its digits)",
)
#: A consumer group: ``check_group``'s rule.
GROUP = Field(
    "string",
    max_length=MAX_GROUP_BYTES,
    pattern=names.SCHEMA_PATTERN_OR_EMPTY,
    rule="a string",
    doc=f'"" or null: queue mode; at most {MAX_GROUP_BYTES} bytes of UTF-8 (413 above)',
)
STATE_GET = Op(
    "StateGetIn",
    {
        "query_id": QUERY_ID,
        "partition_id": PARTITION_ID,
        "keys": Field(
            "array",
            falsy_is_absent=True,
            default=[],
            rule="an array of strings",
            schema_extra={"items": {"type": "string", "pattern": NO_NUL}},
            doc="empty: every key",
        ),
        "key_prefix": Field("string", pattern=NO_NUL, default="", falsy_is_absent=True),
        "ripe_at_or_before": Field(
            "any", doc="ms, a JSON number: rows whose value.windowEnd is at or before it (anything else: no filter)"
        ),
    },
    tenant_free=False,
)
STATE_OP = Op(
    "StateOpIn",
    {
        "key": Field("string", missing="", pattern=NO_NUL, rule="a string", null_is_bad=True),
        "type": Field("string", missing="", choices=("upsert", "delete"), null_is_bad=True),
        "value": Field("any", doc="an upsert's value (null: {})"),
    },
    tenant_free=False,
)
PUSH_ITEM = Op(
    "CyclePushIn",
    {
        "queue": QUEUE,
        "partition": replace(QUEUE, missing=None, falsy_is_absent=False, default=queues.DEFAULT_PARTITION),
        "payload": Field("any", doc="any JSON value, null included"),
    },
    tenant_free=False,
)
#: ``ack.status`` values that complete the acked messages (Queen's Raft
#: broker): the client only completes; a failed batch comes back when its
#: lease ends.
_COMPLETED = ("completed", "success", "acked", "ok", "")
ACK = Op(
    "CycleAckIn",
    {
        "transactionId": replace(TEXT, falsy_is_absent=False, null_is_bad=True),
        "leaseId": replace(TEXT, falsy_is_absent=False, null_is_bad=True),
        "status": Field("string", choices=_COMPLETED, default="completed", null_is_bad=True),
        "count": Field("integer", ge=0, default=0, null_is_bad=True, rule="a whole number"),
    },
    tenant_free=False,
)
CYCLE = Op(
    "CycleIn",
    {
        "query_id": QUERY_ID,
        "partition_id": PARTITION_ID,
        "consumer_group": GROUP,
        "state_ops": Field("array", default=[], of=STATE_OP),
        "push_items": Field("array", default=[], of=PUSH_ITEM),
        "ack": Field("object", of=ACK),
        "release_lease": replace(FLAG, default=True),
    },
    tenant_free=False,
)


def query_id_of(body: dict[str, Any]) -> UUID:
    text = QUERY_ID.read(body, "query_id", engine_bad)
    try:
        return UUID(text)
    except ValueError:
        return NO_QUERY


def partition_id_of(body: dict[str, Any]) -> int:
    raw = PARTITION_ID.read(body, "partition_id", engine_bad)
    raw = check_text(str(raw), "partition_id")
    if not raw.isascii() or not raw.isdigit() or len(raw) > 18:
        return NO_PARTITION
    return int(raw)


def parse_query(body: Any) -> QueryCall:
    """``POST /streams/v1/queries``."""
    fields = QUERY.read(json_object(body), engine_bad)
    return QueryCall(
        name=fields["name"],
        source_queue=fields["source_queue"],
        sink_queue=fields["sink_queue"],
        config_hash=fields["config_hash"],
        reset=fields["reset"],
    )


_QUERY_ID = Key(str, via=str)
QUERY_OUT = Answer(
    "QueryOut",
    success=Literal[True],
    query_id=_QUERY_ID,
    name=str,
    config_hash=str,
    fresh=bool,
    reset=bool,
)
CONFLICT = Answer(
    "QueryConflictOut",
    doc="409: the config hash changed and ``reset`` was not asked for; nothing changed.",
    success=Literal[False],
    query_id=_QUERY_ID,
    name=str,
    error=Key(str, src=".", via=lambda reg: f"config_hash mismatch: stored {reg.stored_hash}, given {reg.config_hash}"),
)


class StateGetCall(TypedDict):
    """``stream_state_get``'s keywords, as the body gives them."""

    query_id: UUID
    partition_id: int
    which: streams.StateFilter


def parse_state_get(body: Any) -> StateGetCall:
    """``POST /streams/v1/state/get``: ``keys`` (empty: all), ``key_prefix``, ``ripe_at_or_before``."""
    body = json_object(body)
    query_id, partition_id = query_id_of(body), partition_id_of(body)
    fields = STATE_GET.fields
    keys = fields["keys"].read(body, "keys", engine_bad)
    if not all(isinstance(k, str) for k in keys):
        raise InvalidArgument("keys must be an array of strings")
    for key in keys:
        check_text(key, "keys")
    prefix = check_text(fields["key_prefix"].read(body, "key_prefix", engine_bad), "key_prefix")
    ripe = body.get("ripe_at_or_before")
    if ripe is not None:
        if isinstance(ripe, bool) or not isinstance(ripe, int | float):
            # Queen applies the filter only to a JSON number.
            ripe = None
        else:
            ripe = int(max(-(2**63), min(2**63 - 1, ripe // 1)))
    which = streams.StateFilter(tuple(keys), prefix, ripe)
    return StateGetCall(query_id=query_id, partition_id=partition_id, which=which)


STATE_OUT = Answer(
    "StateGetOut",
    success=Literal[True],
    rows=Key(
        Many(
            Answer(
                "StateRowOut",
                key=str,
                value=Key(JSONValue, src="value_json", via=json.loads),
                updated_at=Key(str, via=clock.iso_millis_z),
            )
        ),
        src=".",
    ),
)


def _object(raw: Any, where: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise InvalidArgument(f"{where} must be an object")
    return raw


def _state_op(index: int, raw: Any) -> streams.StateOp:
    where = f"state_ops[{index}]"
    fields = STATE_OP.read(_object(raw, where), _at(where))
    key = check_text(fields["key"], f"{where}.key")
    op: streams.StateOp
    if fields["type"] == "delete":
        op = streams.StateDelete(key)
    else:
        value = {} if fields["value"] is None else fields["value"]
        try:
            value_json = db.json_text(value)
        except (TypeError, ValueError) as exc:
            raise InvalidArgument(f"{where}.value is not JSON") from exc
        op = streams.StateUpsert(key, value_json, streams.ripe_at_ms(value))
    streams.check_state_op(op)
    return op


def _push_item(index: int, raw: Any) -> queues.PushItem:
    where = f"push_items[{index}]"
    fields = PUSH_ITEM.fields
    raw = _object(raw, where)
    queue = check_name(fields["queue"].read(raw, "queue", _at(where)), f"{where}.queue")
    partition = fields["partition"].read(raw, "partition", _at(where))
    if partition != queues.DEFAULT_PARTITION:
        partition = check_name(partition, f"{where}.partition")
    try:
        payload_json = db.json_text(raw.get("payload"))
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"{where}.payload is not JSON") from exc
    return queues.PushItem(queue, partition, payload_json)


def _ack(raw: dict[str, Any] | None) -> streams.CycleAck | None:
    if raw is None:
        return None
    fields = ACK.read(raw, _at("ack"))
    txn = check_text(fields["transactionId"], "ack.transactionId")
    lease = check_text(fields["leaseId"], "ack.leaseId")
    return streams.CycleAck(txn, lease, fields["count"])


def parse_cycle(body: Any) -> streams.Cycle:
    """``POST /streams/v1/cycle``."""
    body = json_object(body)
    query_id, partition_id = query_id_of(body), partition_id_of(body)
    fields = CYCLE.fields
    group = fields["consumer_group"].read(body, "consumer_group", engine_bad)
    state_ops = fields["state_ops"].read(body, "state_ops", engine_bad)
    push_items = fields["push_items"].read(body, "push_items", engine_bad)
    return streams.Cycle(
        query_id=query_id,
        partition_id=partition_id,
        group=check_group(group),
        state_ops=tuple(_state_op(i, raw) for i, raw in enumerate(state_ops)),
        pushes=tuple(_push_item(i, raw) for i, raw in enumerate(push_items)),
        ack=_ack(fields["ack"].read(body, "ack", engine_bad)),
        release_lease=fields["release_lease"].read(body, "release_lease", engine_bad),
    )


_PUSHED = Answer("CyclePushOut", messageId=str, transactionId=str, queue=str)
_ACKED = Answer("CycleAckOut", success=Literal[True], count=int, lease_released=bool, dlq=Literal[False])
#: The outcome of a cycle; ``body`` is the call's, whose ids it echoes.
CYCLE_OUT = Answer(
    "CycleOut",
    doc="""A committed cycle, or (``success: false``, still 200, as Queen answers)
    one that rolled back whole: ``error`` says why.""",
    args=("body",),
    success=bool,
    query_id=Key(str, src="body", via=lambda body: str(body.get("query_id"))),
    partition_id=Key(str, src="body", via=lambda body: str(body.get("partition_id"))),
    state_ops_applied=int,
    push_results=Key(Many(_PUSHED), src="pushed"),
    ack_result=Key(_ACKED.model | None, src="acked", via=lambda acked: None if acked is None else _ACKED.render(acked)),
    error=Key(Any, omit=True, when=lambda outcome: not outcome.success),
)
TOO_LARGE: Answer = engine_refusal(
    "StreamsTooLargeOut",
    "413: a state key or value is over its limit; nothing was written.",
    code=Literal["payload_too_large"],
)
