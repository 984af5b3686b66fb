"""The transaction wire language (protocol.md section 5): one body to a ``TxnBundle``.

Results share one flat index space: one per ack and one per pushed item, in
``operations`` order, then one per ``kv`` op, one per ``timers`` op, one
per position.
"""

from __future__ import annotations

from typing import Any

from queenadmin.api.wire import kv as kv_wire
from queenadmin.api.wire import timers as timers_wire
from queenadmin.api.wire.common import is_json_int
from queenadmin.api.wire.queues import ack_item, check_group, json_object, parse_push_items
from queenadmin.domain import queues, transactions
from queenadmin.errors import InvalidArgument

_ARRAYS = ("operations", "requiredLeases", "kv", "timers", "positions")
#: Positions per call (protocol 5.1).
MAX_POSITIONS = 16_384


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
    for i, position in enumerate(raw):
        if not isinstance(position, dict) or not isinstance(position.get("queue"), str) or not position["queue"]:
            return (), f"positions[{i}] needs a queue"
        offset = position.get("offset")
        if offset is not None and (not is_json_int(offset) or offset < 0):
            return (), f"positions[{i}].offset is the next offset to read (0 or more) or null"
        partition = position.get("partition") or queues.DEFAULT_PARTITION
        metadata = position.get("metadata")
        if not isinstance(partition, str) or (metadata is not None and not isinstance(metadata, str)):
            return (), f"positions[{i}] has a partition or metadata that is not a string"
        out.append(
            transactions.TxnPosition(
                base + i, position["queue"], check_group(position.get("consumerGroup")), partition, offset, metadata
            )
        )
    return tuple(out), None


def parse_transaction(body: Any) -> transactions.TxnBundle:
    """A ``POST /transaction`` body as a bundle; raise the 400/413 refusals."""
    body = json_object(body)
    for name in _ARRAYS:
        if body.get(name) is not None and not isinstance(body[name], list):
            raise InvalidArgument(f"{name} must be an array")
    operations: list[Any] = body.get("operations") or []
    lease = _leases(operations, body.get("requiredLeases") or [])
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
                if "queue" not in op or "payload" not in op:
                    invalid = invalid or f"operations[{i}] pushes no items and no inline queue and payload"
                    continue
                raw_items = [{k: v for k, v in op.items() if k != "type"}]
            for pushed in parse_push_items(raw_items):
                pushes.append(transactions.TxnPush(index, pushed))
                index += 1
        else:
            raise InvalidArgument(f"operations[{i}].type must be push or ack (KV and timer ops go in kv and timers)")
    kv_ops = kv_wire.parse_ops(body.get("kv") or [], in_transaction=True)
    timer_ops = timers_wire.parse_timer_ops(body.get("timers") or [], max_ops=2**31)
    positions, bad_position = _positions(body.get("positions") or [], index + len(kv_ops) + len(timer_ops))
    return transactions.TxnBundle(
        acks=tuple(acks),
        pushes=tuple(pushes),
        positions=positions,
        kv=tuple(kv_ops),
        timers=tuple(timer_ops),
        invalid=invalid or bad_position,
    )


def _result_out(result: transactions.TxnResult, sees_permit: kv_wire.SeesPermit) -> dict[str, Any]:
    if isinstance(result, transactions.AckDone):
        return {
            "index": result.index,
            "type": "ack",
            "success": True,
            "transactionId": result.transaction_id,
            "error": None,
            "dlq": result.dlq,
        }
    if isinstance(result, transactions.Pushed):
        out: dict[str, Any] = {
            "index": result.index,
            "type": "push",
            "success": True,
            "transactionId": result.transaction_id,
            "messageId": result.message_id,
            "queueName": result.queue,
        }
        if result.duplicate:
            out["duplicate"] = True
        return out
    if isinstance(result, transactions.KVDone):
        element = kv_wire.result_out(result.index, result.result, sees_permit=sees_permit)
        return {**element, "type": "kv", "opIndex": result.op_index}
    if isinstance(result, transactions.TimerDone):
        element = timers_wire.outcome_out(result.outcome)
        return {"index": result.index, "type": "timer", "opIndex": result.op_index, **element}
    return {"index": result.index, "type": "position", "success": True}


def outcome_out(outcome: transactions.TxnOutcome, *, sees_permit: kv_wire.SeesPermit | None = None) -> dict[str, Any]:
    """The answer of a commit or a rollback (protocol 5.3, 5.4); HTTP 200 both.

    ``sees_permit``: as in ``kv_wire.result_out`` (a lock permit read by a
    caller who may not write its lock shows fingerprints).
    """
    if outcome.success:
        sees = sees_permit or kv_wire.sees_all
        return {
            "transactionId": outcome.transaction_id,
            "success": True,
            "results": [_result_out(r, sees) for r in outcome.results],
        }
    out: dict[str, Any] = {
        "transactionId": outcome.transaction_id,
        "success": False,
        "reason": outcome.reason,
        "error": outcome.error,
        "results": [],
    }
    failed = outcome.precondition
    if failed is not None:
        out.update(
            ok=False,
            failedIndex=failed.failed_index,
            kvReason=failed.kv_reason,
            version=failed.version,
            value=failed.value,
        )
    return out
