"""The binary push and transaction bodies (``Content-Type: application/x-queen-push``).

The layouts are the ``queen-mq`` client's (``queen/http/push_binary.py``;
protocol-wave3.md section C), all integers little-endian, ``text16`` a u16
byte length and UTF-8::

    push:        "QPB1" | u8 flags | [u32 raw_len, flag 1] | body
    plain body:  u32 groups | per group: text16 queue | text16 partition | u32 n
                 | n x ([text16 transactionId, flag 4] | u32 len | payload)
    flag 8 body: u32 groups | per group: text16 queue | text16 partition | u32 n
                 | u32 z_len | z, one zstd frame of n stored frames:
                 u32 body_len | u8 flags | u8[16] message id | [u8[16] trace id, flag 1]
                 | text16 transactionId | payload
    transaction: "QTB1" | u8 flags | u32 len | head | the flag 8 body

Each body becomes the JSON body it stands for (the push's ``items``, the
transaction's ``operations`` with one push of every item after the head's
own) and goes through the same parser, so every rule of the JSON route
holds for it. A frame's message id is kept. The body as sent plus whatever
inflates from it counts against ``MAX_BODY_BYTES`` as it inflates, and the payloads' parsed cost
against ``MAX_PARSE_BYTES``: both answer 413 as the JSON body's limits do.
"""

from __future__ import annotations

import dataclasses
import struct
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from django.http import HttpRequest

from queenadmin.api.bodies import BodyTooLarge, ZstdDamaged, decoded_body, inflate_zstd
from queenadmin.api.http import _TOKEN_COST, json_dumps, parse_cost, parse_json_bytes, read_engine_json
from queenadmin.api.wire import transactions as txn_wire
from queenadmin.api.wire.queues import Autopilot, conflation_keys, json_object, parse_push_items
from queenadmin.conf import settings
from queenadmin.domain import queues, transactions
from queenadmin.errors import InvalidArgument

CONTENT_TYPE = "application/x-queen-push"

T = TypeVar("T")

PUSH_MAGIC = b"QPB1"
TXN_MAGIC = b"QTB1"
_FLAG_ZSTD = 1
_FLAG_COUNTS = 2
_FLAG_TXN = 4
_FLAG_FRAMES = 8
#: A stored frame's flags (the client writes 0): 1 a trace id follows the
#: message id, 2 a producer, 4 the payload is encrypted.
_FRAME_TRACE = 1
_FRAME_PRODUCER = 2
_FRAME_ENCRYPTED = 4

#: The parse cost of one item beside its payload: the JSON item it stands
#: for (``{"queue","partition","payload","transactionId"}``) has nine tokens.
_ITEM_COST = 9 * _TOKEN_COST

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")


def is_binary(content_type: str) -> bool:
    """Whether a request's ``Content-Type`` names the binary body."""
    return content_type.split(";")[0].strip().lower() == CONTENT_TYPE


def read_either(request: HttpRequest, *, framed: Callable[[bytes], T], json: Callable[[Any], T]) -> T:
    """The body of a route that takes both forms, parsed by ``framed`` when
    binary, else read as JSON and parsed by ``json``; a body that cannot be
    read is the engine's 400 either way."""
    if is_binary(request.content_type or ""):
        return framed(decoded_body(request, InvalidArgument, "bad_request"))
    return json(read_engine_json(request))


def _bad(detail: str) -> InvalidArgument:
    return InvalidArgument(f"binary body: {detail}")


class _Reader:
    """Little-endian fields off ``data``; reading past the end is a 400."""

    __slots__ = ("at", "data", "what")

    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.at = 0
        self.what = what

    def take(self, length: int) -> bytes:
        end = self.at + length
        if end > len(self.data):
            raise _bad(f"{self.what} is truncated")
        piece = self.data[self.at : end]
        self.at = end
        return piece

    def u8(self) -> int:
        return self.take(1)[0]

    def u16(self) -> int:
        value: int = _U16.unpack(self.take(2))[0]
        return value

    def u32(self) -> int:
        value: int = _U32.unpack(self.take(4))[0]
        return value

    def text(self, field: str) -> str:
        raw = self.take(self.u16())
        try:
            return raw.decode()
        except UnicodeDecodeError:
            raise _bad(f"{field} is not UTF-8") from None

    def done(self) -> bool:
        return self.at >= len(self.data)


class _Items:
    """The items decoded so far, with the budgets they spend."""

    def __init__(self, inflated: int) -> None:
        self.items: list[dict[str, Any]] = []
        self.message_ids: list[str | None] = []
        #: Bytes inflated so far, against ``MAX_BODY_BYTES``.
        self.inflated = inflated
        self.cost = 0

    def inflate(self, data: bytes, what: str) -> bytes:
        try:
            raw = inflate_zstd(data, limit=settings.MAX_BODY_BYTES - self.inflated)
        except ZstdDamaged as exc:
            raise _bad(f"{what} is not valid zstd: {exc}") from exc
        self.inflated += len(raw)
        return raw

    def add(
        self, queue: str, partition: str, payload: bytes, txn: str, message_id: str | None, trace: str | None
    ) -> None:
        index = len(self.items)
        self.cost += _ITEM_COST + parse_cost(payload)
        if self.cost > settings.MAX_PARSE_BYTES:
            raise BodyTooLarge
        if not payload.strip():
            raise _bad(f"items[{index}].payload is empty (one JSON document each)")
        try:
            value = parse_json_bytes(payload, InvalidArgument, "bad_request")
        except InvalidArgument as exc:
            raise _bad(f"items[{index}].payload: {exc.detail}") from exc
        item: dict[str, Any] = {"queue": queue, "partition": partition, "payload": value}
        if txn:
            item["transactionId"] = txn
        if trace is not None:
            item["traceId"] = trace
        self.items.append(item)
        self.message_ids.append(message_id)

    def push_items(self) -> list[queues.PushItem]:
        parsed = parse_push_items(self.items)
        return [
            item if message_id is None else dataclasses.replace(item, message_id=message_id)
            for item, message_id in zip(parsed, self.message_ids, strict=True)
        ]


def _plain_groups(body: _Reader, out: _Items, with_txn: bool) -> None:
    for _ in range(body.u32()):
        queue = body.text("queue")
        partition = body.text("partition")
        for _ in range(body.u32()):
            txn = body.text("transactionId") if with_txn else ""
            payload = body.take(body.u32())
            out.add(queue, partition, payload, txn, None, None)


def _frame_groups(body: _Reader, out: _Items) -> None:
    for group in range(body.u32()):
        queue = body.text("queue")
        partition = body.text("partition")
        count = body.u32()
        frames = _Reader(out.inflate(body.take(body.u32()), f"group {group}"), f"group {group}'s frames")
        for _ in range(count):
            frame = _Reader(frames.take(frames.u32()), "a frame")
            flags = frame.u8()
            if flags & ~(_FRAME_TRACE | _FRAME_PRODUCER | _FRAME_ENCRYPTED):
                raise _bad(f"a frame has unknown flags {flags}")
            if flags & _FRAME_ENCRYPTED:
                raise _bad("an encrypted frame (the broker stores plaintext frames only)")
            if flags & _FRAME_PRODUCER:
                raise _bad("a frame names its producer, which the broker sets")
            message_id = str(uuid.UUID(bytes=frame.take(16)))
            trace = str(uuid.UUID(bytes=frame.take(16))) if flags & _FRAME_TRACE else None
            txn = frame.text("transactionId")
            out.add(queue, partition, frame.data[frame.at :], txn, message_id, trace)
        if not frames.done():
            raise _bad(f"group {group} holds more than its {count} frames")


def parse_push(body: bytes) -> list[queues.PushItem]:
    """A binary ``POST /push`` body as the items its JSON body would give.

    Raises ``InvalidArgument`` (400) for a body that is not whole or not
    this layout, ``BodyTooLarge`` (413) past the limits.
    """
    head = _Reader(body, "the body")
    if len(body) < len(PUSH_MAGIC) or head.take(len(PUSH_MAGIC)) != PUSH_MAGIC:
        raise _bad('a push body starts with "QPB1"')
    flags = head.u8()
    if flags & ~(_FLAG_ZSTD | _FLAG_TXN | _FLAG_FRAMES | _FLAG_COUNTS):
        raise _bad(f"unknown flags {flags}")
    if flags & _FLAG_COUNTS:
        raise _bad("the counts-only answer (flag 2) is not supported; leave it unset")
    out = _Items(len(body))
    rest = body[head.at :]
    if flags & _FLAG_ZSTD:
        raw_len = _Reader(rest, "the body").u32()
        if raw_len > settings.MAX_BODY_BYTES:
            raise BodyTooLarge
        rest = out.inflate(rest[4:], "the body")
        if len(rest) != raw_len:
            raise _bad(f"the body inflates to {len(rest)} bytes, not the {raw_len} it declares")
    reader = _Reader(rest, "the body")
    if flags & _FLAG_FRAMES:
        _frame_groups(reader, out)
    else:
        _plain_groups(reader, out, bool(flags & _FLAG_TXN))
    if not reader.done():
        raise _bad("bytes after the last group")
    return out.push_items()


def parse_transaction(body: bytes) -> transactions.TxnBundle:
    """A binary ``POST /transaction`` body as the bundle its JSON body would give.

    The head's operations come first, then one push of every framed item,
    so the results list them in that order (the client restores its own).
    Raises as ``parse_push`` does, and as the JSON parser does for the head.
    """
    reader = _Reader(body, "the body")
    if len(body) < len(TXN_MAGIC) or reader.take(len(TXN_MAGIC)) != TXN_MAGIC:
        raise _bad('a transaction body starts with "QTB1"')
    flags = reader.u8()
    if flags:
        raise _bad(f"unsupported flags {flags} (the counts-only answer, flag 2, is not supported)")
    head_bytes = reader.take(reader.u32())
    head: dict[str, Any] = {}
    if head_bytes.strip():
        try:
            head = json_object(parse_json_bytes(head_bytes, InvalidArgument, "bad_request"))
        except InvalidArgument as exc:
            raise _bad(f"the head: {exc.detail}") from exc
    out = _Items(len(body))
    _frame_groups(reader, out)
    if not reader.done():
        raise _bad("bytes after the last group")
    operations = head.get("operations")
    if operations is None:
        operations = []
    if not isinstance(operations, list):
        raise InvalidArgument("operations must be an array")
    pushes = [{"type": "push", "items": out.items}] if out.items else []
    bundle = txn_wire.parse_transaction({**head, "operations": [*operations, *pushes]})
    # The framed items are the bundle's last pushes (the head may push too).
    own = len(bundle.pushes) - len(out.message_ids)
    framed = [
        dataclasses.replace(push, item=dataclasses.replace(push.item, message_id=message_id))
        for push, message_id in zip(bundle.pushes[own:], out.message_ids, strict=True)
    ]
    return dataclasses.replace(bundle, pushes=(*bundle.pushes[:own], *framed))


# --------------------------------------------------------------------------
# The framed pop answer

POP_CONTENT_TYPE = "application/x-queen-pop"

_U64 = struct.Struct("<Q")
#: A claim after its partition: start, end, deliveryAttempt, records.
_CLAIM = struct.Struct("<QQII")
#: A record: base offset, created_at_us, count, codec (0 raw), byte length.
_RECORD = struct.Struct("<QqIBI")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def _text16(out: bytearray, text: str) -> None:
    data = text.encode()
    out += _U16.pack(len(data))
    out += data


def render_pop_frames(claim: queues.Claim, autopilot: Autopilot | None, waited_ms: int) -> bytes | None:
    """A pop's answer as the framed one (``frames=true``), or None where a
    message cannot travel in it (an id that is not a UUID): the JSON answer
    then goes, which the client reads as well.

    The layout is the client's (``queen/http/pop_frames.py``)::

        "QPF1" | u8 1 | u32 len, the answer's own keys as JSON
        text16 queue | text16 leaseId | text16 consumerGroup | u32 claims
        per claim:  u64 partitionId | text16 partition | u64 start | u64 end
                    | u32 deliveryAttempt | u32 records
        per record: u64 base_offset | i64 created_at_us | u32 count | u8 codec | u32 len | frames

    A claim is a run of messages of one partition with one delivery
    attempt; each message is a record of its own (its own ``createdAt``),
    raw: the payloads are stored as JSON text, not as zstd frames.
    """
    runs: list[list[queues.Delivered]] = []
    for message in claim.messages:
        last = runs[-1][-1] if runs else None
        if (
            last is not None
            and last.partition_id == message.partition_id
            and last.delivery_attempt == message.delivery_attempt
        ):
            runs[-1].append(message)
        else:
            runs.append([message])
    own: dict[str, Any] = {}
    if autopilot is not None and not claim.conflation:
        own["autopilot"] = {"batch": autopilot.batch, "partitions": autopilot.partitions, "waitMs": waited_ms}
    if len(runs) != len(claim.partitions):
        own["partitionsClaimed"] = len(claim.partitions)
    own.update(conflation_keys(claim.conflation, claim.conflation_conflict))
    own_json = json_dumps(own) if own else b""
    out = bytearray(b"QPF1\x01")
    out += _U32.pack(len(own_json))
    out += own_json
    _text16(out, claim.queue or "")
    _text16(out, claim.lease_id)
    _text16(out, claim.group)
    out += _U32.pack(len(runs))
    try:
        for run in runs:
            first = run[0]
            out += _U64.pack(first.partition_id)
            _text16(out, first.partition)
            offsets = [m.offset for m in run]
            out += _CLAIM.pack(min(offsets), max(offsets), first.delivery_attempt, len(run))
            for m in run:
                payload = m.payload_json.encode()
                txn = m.transaction_id.encode()
                trace = b"" if m.trace_id is None else uuid.UUID(m.trace_id).bytes
                producer = None if m.producer_sub is None else m.producer_sub.encode()
                size = 1 + 16 + len(trace) + 2 + len(txn) + len(payload)
                if producer is not None:
                    size += 2 + len(producer)
                created_us = (m.created_at - _EPOCH) // _MICROSECOND
                out += _RECORD.pack(m.offset, created_us, 1, 0, 4 + size)
                out += _U32.pack(size)
                out.append((_FRAME_TRACE if trace else 0) | (0 if producer is None else _FRAME_PRODUCER))
                out += uuid.UUID(m.message_id).bytes
                out += trace
                out += _U16.pack(len(txn))
                out += txn
                if producer is not None:
                    out += _U16.pack(len(producer))
                    out += producer
                out += payload
    except ValueError:
        return None
    return bytes(out)
