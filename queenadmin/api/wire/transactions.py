"""The transaction wire language (protocol.md section 5): one body to a ``TxnBundle``.

Results share one flat index space: one per ack and one per pushed item, in
``operations`` order, then one per ``kv`` op, one per ``timers`` op, one
per position.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any, Literal

from pydantic import Field as Doc

from queenadmin.api.schemas.common import JSONValue
from queenadmin.api.wire import kv as kv_wire
from queenadmin.api.wire import timers as timers_wire
from queenadmin.api.wire.answers import Answer, Key, list_of
from queenadmin.api.wire.fields import Bad, Field, Op, Ops, ref
from queenadmin.api.wire.queues import (
    ACK,
    MAX_GROUP_BYTES,
    PUSH_ITEM,
    ack_item,
    check_group,
    engine_bad,
    json_object,
    parse_push_items,
)
from queenadmin.domain import kv, names, queues, transactions
from queenadmin.errors import InvalidArgument

#: Positions per call (protocol 5.1).
MAX_POSITIONS = 16_384


class _Rollback(Exception):
    """A position the bundle cannot apply: a 200 rollback, not a refusal (5.4)."""


def _rollback_at(at: str) -> Bad:
    return lambda reason, detail: _Rollback(at + detail)


# --------------------------------------------------------------------------
# The fields of a body, declared once: the parser below reads them and the
# document shows them (``openapi.body_of``). The pushes and acks of
# ``operations`` are the message log's items and acks, the KV and timer ops
# those concepts' declarations.

#: A push op's own item, read only when it has no ``items`` (a null queue is
#: the item's bad queue, 400; an absent one rolls back).
_INLINE = {name: replace(f, missing=None, null_is_bad=name == "queue") for name, f in PUSH_ITEM.fields.items()}
OPERATION = Ops(
    "TxnOperationIn",
    {
        "push": Op(
            "TxnPushOpIn",
            {
                "type": Field("string", missing="", const="push"),
                "items": Field("array", of=PUSH_ITEM, doc="when absent, the op itself is the one item"),
                **{name: Field("any", doc="inline item") for name in _INLINE},
            },
            doc="A push: ``items``, or one item inline on the op (without ``queue`` and ``payload`` it"
            " rolls back, 200 ``bad_request``; a bad field it has is refused first, 400).",
            extra={
                "anyOf": [
                    {"required": ["items"], "properties": {"items": {"type": "array"}}},
                    {"properties": {"items": {"type": "null"}, **{name: f.schema() for name, f in _INLINE.items()}}},
                ]
            },
            tenant_free=False,
        ),
        "ack": Op(
            "TxnAckOpIn",
            {
                "type": Field("string", missing="", const="ack"),
                **ACK.fields,
                "leaseId": replace(ACK.fields["leaseId"], doc="fences it; else the one lease of requiredLeases"),
            },
            doc="An ack; a ``partitionId`` that is not digits rolls back (200 ``bad_request``).",
            tenant_free=False,
        ),
    },
    doc="A push or an ack (KV and timer ops go in ``kv`` and ``timers``).",
    key="type",
)

#: A valid queue and payload, standing in for an inline item's absent ones
#: while the fields it has are checked.
_STAND_INS = {"queue": "q", "payload": None}

_NOT_A_STRING = " has a partition or metadata that is not a string"
POSITION = Op(
    "TxnPositionIn",
    {
        "queue": Field("string", missing="", min_length=1, refusal=" needs a queue"),
        "offset": Field(
            "integer",
            ge=0,
            refusal=".offset is the next offset to read (0 or more) or null",
            doc="the next offset to read (0: the first message); null forgets the group's cursor",
        ),
        "partition": Field("string", default=queues.DEFAULT_PARTITION, falsy_is_absent=True, refusal=_NOT_A_STRING),
        "metadata": Field("string", refusal=_NOT_A_STRING, doc="at most 4096 bytes; accepted, not stored"),
        # Read by ``check_group``: a bad group refuses the call (400).
        "consumerGroup": Field(
            "string", max_length=MAX_GROUP_BYTES, pattern=names.SCHEMA_PATTERN_OR_EMPTY, doc='"" or null: queue mode'
        ),
    },
    tenant_free=False,
)
BODY = Op(
    "TxnIn",
    {
        "operations": Field(
            "array",
            rule="an array",
            of=OPERATION,
            doc="pushes and acks (KV and timer ops go in kv and timers)",
        ),
        "requiredLeases": Field(
            "array", rule="an array", doc="lease ids (strings); an ack fenced by none of them rolls back"
        ),
        "kv": Field(
            "array",
            rule="an array",
            of=kv_wire.TXN_OPS,
            schema_extra={"maxItems": kv.TXN_MAX_OPS},
            doc="every KV op but getPrefix",
        ),
        "timers": Field("array", rule="an array", of=timers_wire.OPERATIONS, doc="schedules and cancels"),
        "positions": Field(
            "array",
            rule="an array",
            of=POSITION,
            # Any other item, or more of them, rolls back (200 bad_request).
            schema_extra={"items": {"anyOf": [ref(POSITION.name), {}]}},
            doc=f"TxnPositionIn each, at most {MAX_POSITIONS}; any other item, or more, rolls back"
            " (200 bad_request, protocol 5.4)",
        ),
    },
    doc="At least one of ``operations``, ``kv``, ``timers``, ``positions`` non-empty, else a 200 rollback.",
    tenant_free=False,
)


def _leases(operations: list[Any], required: list[Any]) -> str | None:
    """The one lease an ack without its own ``leaseId`` is fenced by, if any:
    the single distinct lease among ``requiredLeases`` and the acks' own."""
    seen = {lease for lease in required if isinstance(lease, str) and lease}
    for op in operations:
        if isinstance(op, dict) and op.get("type") == "ack" and isinstance(op.get("leaseId"), str) and op["leaseId"]:
            seen.add(op["leaseId"])
    return seen.pop() if len(seen) == 1 else None


def _positions(raw: list[Any], base: int) -> tuple[tuple[transactions.TxnPosition, ...], str | None]:
    if len(raw) > MAX_POSITIONS:
        return (), f"at most {MAX_POSITIONS} positions per call"
    out = []
    fields = POSITION.fields
    for i, position in enumerate(raw):
        rollback = _rollback_at(f"positions[{i}]")
        try:
            if not isinstance(position, dict):
                raise rollback("", fields["queue"].refusal)
            queue = fields["queue"].read(position, "queue", rollback)
            offset = fields["offset"].read(position, "offset", rollback)
            partition = fields["partition"].read(position, "partition", rollback)
            metadata = fields["metadata"].read(position, "metadata", rollback)
        except _Rollback as exc:
            return (), str(exc)
        group = check_group(position.get("consumerGroup"))
        out.append(transactions.TxnPosition(base + i, queue, group, partition, offset, metadata))
    return tuple(out), None


def parse_transaction(body: Any) -> transactions.TxnBundle:
    """A ``POST /transaction`` body as a bundle; raise the 400/413 refusals."""
    arrays = BODY.read(json_object(body), engine_bad)
    operations: list[Any] = arrays["operations"] or []
    lease = _leases(operations, arrays["requiredLeases"] or [])
    acks: list[queues.AckItem] = []
    pushes: list[transactions.TxnPush] = []
    invalid: str | None = None
    index = 0
    for i, op in enumerate(operations):
        if not isinstance(op, dict):
            raise InvalidArgument(f"operations[{i}] must be an object")
        kind = op.get("type")
        if kind == "ack":
            item = ack_item(index, op, op.get("consumerGroup"))
            if not item.partition_id.isascii() or not item.partition_id.isdigit():
                invalid = invalid or f"operations[{i}].partitionId is not a partition id"
            if item.lease_id is None and lease is not None:
                item = queues.AckItem(
                    item.index, item.transaction_id, item.partition_id, item.status, lease, item.error, item.group
                )
            acks.append(item)
            index += 1
        elif kind == "push":
            raw_items = op.get("items")
            if raw_items is None:
                inline = {k: v for k, v in op.items() if k != "type"}
                if "queue" not in op or "payload" not in op:
                    # The fields it has are checked as any item's first: a
                    # bad one refuses the call (400), as everywhere in the
                    # body; only the queue or payload missing rolls back.
                    parse_push_items([{**_STAND_INS, **inline}])
                    invalid = invalid or f"operations[{i}] pushes no items and no inline queue and payload"
                    continue
                raw_items = [inline]
            for pushed in parse_push_items(raw_items):
                pushes.append(transactions.TxnPush(index, pushed))
                index += 1
        else:
            raise InvalidArgument(f"operations[{i}].type must be push or ack (KV and timer ops go in kv and timers)")
    kv_ops = kv_wire.parse_ops(arrays["kv"] or [], in_transaction=True)
    timer_ops = timers_wire.parse_timer_ops(arrays["timers"] or [], max_ops=2**31)
    positions, bad_position = _positions(arrays["positions"] or [], index + len(kv_ops) + len(timer_ops))
    return transactions.TxnBundle(
        acks=tuple(acks),
        pushes=tuple(pushes),
        positions=positions,
        kv=tuple(kv_ops),
        timers=tuple(timer_ops),
        invalid=invalid or bad_position,
    )


# --------------------------------------------------------------------------
# Results to JSON (protocol 5.3, 5.4): each answer declared once (``wire.answers``)

_DONE: dict[str, Any] = {"index": int}
ACK_DONE = Answer(
    "TxnAckOut", **_DONE, type=Literal["ack"], success=Literal[True], transactionId=str, error=None, dlq=bool
)
PUSHED = Answer(
    "TxnPushOut",
    **_DONE,
    type=Literal["push"],
    success=Literal[True],
    transactionId=str,
    messageId=str,
    queueName=Key(str, src="queue"),
    duplicate=Key(Literal[True], "the same transactionId came earlier in this bundle", omit=True, when="duplicate"),
)
POSITION_SET = Answer("TxnPositionOut", **_DONE, type=Literal["position"], success=Literal[True])
#: A KV result or timer outcome inside a commit's results: the body is the
#: concept's, with ``type`` and ``opIndex`` (the document lists them first).
_KV_PARTS = [
    answer.within(f"Txn{answer.name}", type=Literal["kv"], opIndex=int)
    for answer in (
        kv_wire.GET_FOUND,
        kv_wire.GET_MISS,
        kv_wire.GET_MANY,
        kv_wire.WRITE_APPLIED,
        kv_wire.CHECK_HELD,
        kv_wire.WRITE_REFUSED,
    )
]
_TIMER_PARTS = [
    answer.within(f"TxnTimer{answer.name}", index=int, type=Literal["timer"], opIndex=int)
    for answer in (timers_wire.SCHEDULED, timers_wire.CANCELLED, timers_wire.ABSENT)
]


def _result_out(result: transactions.TxnResult, sees_permit: kv_wire.SeesPermit) -> dict[str, Any]:
    if isinstance(result, transactions.AckDone):
        return ACK_DONE.render(result)
    if isinstance(result, transactions.Pushed):
        return PUSHED.render(result)
    if isinstance(result, transactions.KVDone):
        element = kv_wire.result_out(result.index, result.result, sees_permit=sees_permit)
        return {**element, "type": "kv", "opIndex": result.op_index}
    if isinstance(result, transactions.TimerDone):
        element = timers_wire.outcome_out(result.outcome)
        return {"index": result.index, "type": "timer", "opIndex": result.op_index, **element}
    return POSITION_SET.render(result)


_RESULTS = Key(
    list_of(ACK_DONE, PUSHED, POSITION_SET, *_KV_PARTS, *_TIMER_PARTS),
    "flat: acks and pushed items, then kv, timers, positions",
    via=lambda results, sees: [_result_out(r, sees) for r in results],
    with_args=("sees_permit",),
)
COMMIT = Answer("TxnCommitOut", args=("sees_permit",), transactionId=str, success=Literal[True], results=_RESULTS)
_REASONS = Literal["rejected_ack", "duplicate", "queue_not_found", "bad_request", "too_large", "queue_full"]
_NONE_DONE: Any = Annotated[list_of(ACK_DONE), Doc(max_length=0)]
_NOTHING: dict[str, Any] = {"error": str, "results": Key(_NONE_DONE, const=[])}
ROLLBACK = Answer(
    "TxnRollbackOut",
    doc="HTTP 200: nothing of the bundle was applied.",
    transactionId=str,
    success=Literal[False],
    reason=Key(
        _REASONS, "queue_full: a pushed queue's maxSize would be exceeded (queenadmin; Queen stores maxSize only)"
    ),
    **_NOTHING,
)
PRECONDITION = Answer(
    "TxnPreconditionOut",
    doc="HTTP 200: a required KV op (a lock's guard, ``once``) did not hold; nothing applied.",
    transactionId=str,
    success=Literal[False],
    reason=Key(Literal["kv_precondition"], src="reason"),
    **_NOTHING,
    ok=Literal[False],
    failedIndex=Key(int, "flat index of the failed op", src="precondition.failed_index"),
    kvReason=Key(kv_wire.Reason, src="precondition.kv_reason"),
    version=Key(int, src="precondition.version"),
    value=Key(JSONValue, src="precondition.value"),
)


def outcome_out(outcome: transactions.TxnOutcome, *, sees_permit: kv_wire.SeesPermit | None = None) -> dict[str, Any]:
    """The answer of a commit or a rollback (protocol 5.3, 5.4); HTTP 200 both.

    ``sees_permit``: as in ``kv_wire.result_out`` (a lock permit read by a
    caller who may not write its lock shows fingerprints).
    """
    if outcome.success:
        return COMMIT.render(outcome, sees_permit or kv_wire.sees_all)
    return (ROLLBACK if outcome.precondition is None else PRECONDITION).render(outcome)
