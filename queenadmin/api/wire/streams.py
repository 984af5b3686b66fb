"""``/streams/v1`` JSON to stream commands and back (protocol-wave3.md A).

Queen's streams routes speak snake_case, answer ``success`` on every body,
and report a cycle that rolled back as a 200 with ``success: false``. Ids
the client echoes back (``query_id``, ``partition_id``) that name nothing
are not refusals: they read as an unknown query or partition, which the
domain answers (no rows; a cycle that fails with the reason).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, TypedDict
from uuid import UUID

from queenadmin.api.wire.queues import check_group, check_name, check_text, json_object
from queenadmin.domain import names, queues, streams
from queenadmin.errors import InvalidArgument
from queenadmin.plumbing import db

#: What an id that names nothing reads as: no query has the nil UUID, no
#: partition the id 0.
NO_QUERY = UUID(int=0)
NO_PARTITION = 0
#: ``ack.status`` values that complete the acked messages (Queen's Raft broker).
_COMPLETED = frozenset({"completed", "success", "acked", "ok", ""})


class QueryCall(TypedDict):
    """``stream_register``'s keywords, as the body gives them."""

    name: str
    source_queue: str
    sink_queue: str | None
    config_hash: str
    reset: bool


def _required_text(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value:
        raise InvalidArgument(f"{name} is required")
    check_text(value, name)
    return value


def _flag(body: dict[str, Any], name: str, default: bool) -> bool:
    value = body.get(name, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise InvalidArgument(f"{name} must be a boolean")
    return value


def query_id_of(body: dict[str, Any]) -> UUID:
    text = _required_text(body, "query_id")
    try:
        return UUID(text)
    except ValueError:
        return NO_QUERY


def partition_id_of(body: dict[str, Any]) -> int:
    raw = body.get("partition_id")
    if isinstance(raw, int) and not isinstance(raw, bool):
        raw = str(raw)
    if not isinstance(raw, str) or not raw:
        raise InvalidArgument("partition_id is required")
    check_text(raw, "partition_id")
    if not raw.isascii() or not raw.isdigit() or len(raw) > 18:
        return NO_PARTITION
    return int(raw)


def parse_query(body: Any) -> QueryCall:
    """``POST /streams/v1/queries``."""
    body = json_object(body)
    name = names.check_engine_name(_required_text(body, "name"), "name")
    source = check_name(body.get("source_queue") or None, "source_queue")
    sink = body.get("sink_queue")
    sink = None if sink is None or sink == "" else check_name(sink, "sink_queue")
    return QueryCall(
        name=name,
        source_queue=source,
        sink_queue=sink,
        config_hash=_required_text(body, "config_hash"),
        reset=_flag(body, "reset", False),
    )


def render_registration(reg: streams.Registration) -> dict[str, Any]:
    if reg.conflict:
        return {
            "success": False,
            "query_id": str(reg.query_id),
            "name": reg.name,
            "error": f"config_hash mismatch: stored {reg.stored_hash}, given {reg.config_hash}",
        }
    return {
        "success": True,
        "query_id": str(reg.query_id),
        "name": reg.name,
        "config_hash": reg.config_hash,
        "fresh": reg.fresh,
        "reset": reg.reset,
    }


class StateGetCall(TypedDict):
    """``stream_state_get``'s keywords, as the body gives them."""

    query_id: UUID
    partition_id: int
    which: streams.StateFilter


def parse_state_get(body: Any) -> StateGetCall:
    """``POST /streams/v1/state/get``: ``keys`` (empty: all), ``key_prefix``, ``ripe_at_or_before``."""
    body = json_object(body)
    query_id, partition_id = query_id_of(body), partition_id_of(body)
    keys = body.get("keys") or []
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise InvalidArgument("keys must be an array of strings")
    for key in keys:
        check_text(key, "keys")
    prefix = body.get("key_prefix") or ""
    if not isinstance(prefix, str):
        raise InvalidArgument("key_prefix must be a string")
    check_text(prefix, "key_prefix")
    ripe = body.get("ripe_at_or_before")
    if ripe is not None:
        if isinstance(ripe, bool) or not isinstance(ripe, int | float):
            # Queen applies the filter only to a JSON number.
            ripe = None
        else:
            ripe = int(max(-(2**63), min(2**63 - 1, ripe // 1)))
    which = streams.StateFilter(tuple(keys), prefix, ripe)
    return StateGetCall(query_id=query_id, partition_id=partition_id, which=which)


def _time(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def render_state(rows: list[streams.StateRow]) -> dict[str, Any]:
    return {
        "success": True,
        "rows": [{"key": r.key, "value": json.loads(r.value_json), "updated_at": _time(r.updated_at)} for r in rows],
    }


def _state_op(index: int, raw: Any) -> streams.StateOp:
    if not isinstance(raw, dict):
        raise InvalidArgument(f"state_ops[{index}] must be an object")
    key = raw.get("key")
    if not isinstance(key, str):
        raise InvalidArgument(f"state_ops[{index}].key must be a string")
    check_text(key, f"state_ops[{index}].key")
    kind = raw.get("type")
    if kind == "delete":
        op: streams.StateOp = streams.StateDelete(key)
    elif kind == "upsert":
        value = raw.get("value")
        if value is None:
            value = {}
        try:
            value_json = db.json_text(value)
        except (TypeError, ValueError) as exc:
            raise InvalidArgument(f"state_ops[{index}].value is not JSON") from exc
        op = streams.StateUpsert(key, value_json, streams.ripe_at_ms(value))
    else:
        raise InvalidArgument(f"state_ops[{index}].type must be upsert or delete")
    streams.check_state_op(op)
    return op


def _push_item(index: int, raw: Any) -> queues.PushItem:
    if not isinstance(raw, dict):
        raise InvalidArgument(f"push_items[{index}] must be an object")
    queue = check_name(raw.get("queue"), f"push_items[{index}].queue")
    partition = raw.get("partition")
    partition = (
        queues.DEFAULT_PARTITION if partition is None else check_name(partition, f"push_items[{index}].partition")
    )
    try:
        payload_json = db.json_text(raw.get("payload"))
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"push_items[{index}].payload is not JSON") from exc
    return queues.PushItem(queue, partition, payload_json)


def _ack(raw: Any) -> streams.CycleAck | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise InvalidArgument("ack must be an object or null")
    txn, lease = raw.get("transactionId"), raw.get("leaseId")
    if not isinstance(txn, str) or not txn or not isinstance(lease, str) or not lease:
        raise InvalidArgument("ack needs transactionId and leaseId")
    check_text(txn, "ack.transactionId")
    check_text(lease, "ack.leaseId")
    status = raw.get("status", "completed")
    if status not in _COMPLETED:
        # The client only completes; a failed batch comes back when its lease ends.
        raise InvalidArgument("ack.status must be completed")
    count = raw.get("count", 0)
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise InvalidArgument("ack.count must be a whole number")
    return streams.CycleAck(txn, lease, count)


def _list(body: dict[str, Any], name: str) -> list[Any]:
    value = body.get(name)
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidArgument(f"{name} must be an array")
    return value


def parse_cycle(body: Any) -> streams.Cycle:
    """``POST /streams/v1/cycle``."""
    body = json_object(body)
    query_id, partition_id = query_id_of(body), partition_id_of(body)
    group = body.get("consumer_group")
    return streams.Cycle(
        query_id=query_id,
        partition_id=partition_id,
        group=check_group(group),
        state_ops=tuple(_state_op(i, raw) for i, raw in enumerate(_list(body, "state_ops"))),
        pushes=tuple(_push_item(i, raw) for i, raw in enumerate(_list(body, "push_items"))),
        ack=_ack(body.get("ack")),
        release_lease=_flag(body, "release_lease", True),
    )


def render_cycle(cycle: streams.Cycle, outcome: streams.CycleOutcome, body: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "success": outcome.success,
        "query_id": str(body.get("query_id")),
        "partition_id": str(body.get("partition_id")),
        "state_ops_applied": outcome.state_ops_applied,
        "push_results": [
            {"messageId": p.message_id, "transactionId": p.transaction_id, "queue": p.queue} for p in outcome.pushed
        ],
        "ack_result": None
        if outcome.acked is None
        else {
            "success": True,
            "count": outcome.acked.count,
            "lease_released": outcome.acked.lease_released,
            "dlq": False,
        },
    }
    if not outcome.success:
        out["error"] = outcome.error
    return out
