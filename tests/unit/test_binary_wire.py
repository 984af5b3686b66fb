"""The binary wire: zstd inflated within a limit, and the framed pop answer
as the ``queen-mq`` client unpacks it (no server, no database)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
import zstandard
from queen.http.pop_frames import decode_pop_frames

from queenadmin.api.bodies import ZstdDamaged, inflate_zstd
from queenadmin.api.envelope import BodyTooLarge
from queenadmin.api.wire import binary
from queenadmin.api.wire.queues import Autopilot
from queenadmin.domain import queues


def _zstd(raw: bytes, *, content_size: bool = True) -> bytes:
    return zstandard.ZstdCompressor(write_content_size=content_size).compress(raw)


def test_inflate_reads_frames_back_to_back_and_skippable_ones():
    """Several frames inflate to their concatenation; a skippable frame adds nothing."""
    skippable = b"\x50\x2a\x4d\x18" + (3).to_bytes(4, "little") + b"abc"
    assert inflate_zstd(_zstd(b"one ") + skippable + _zstd(b"two"), limit=100) == b"one two"


@pytest.mark.parametrize("content_size", [True, False])
def test_inflate_stops_at_the_limit(content_size):
    """Output past the limit is refused, whether the frame declares its size or not."""
    data = _zstd(bytes(10_000), content_size=content_size)
    assert inflate_zstd(data, limit=10_000) == bytes(10_000)
    with pytest.raises(BodyTooLarge):
        inflate_zstd(data, limit=9_999)


@pytest.mark.parametrize("cut", [1, 2, 3, 5, 10])
def test_a_truncated_frame_is_damaged_not_shorter(cut):
    """The decompressor reads a cut frame as a shorter output; the walk refuses it."""
    data = _zstd(b"hello world " * 1000)
    with pytest.raises(ZstdDamaged):
        inflate_zstd(data[:-cut], limit=1 << 20)


def _delivered(offset: int, partition_id: int = 7, attempt: int = 1, **kw) -> queues.Delivered:
    fields = {
        "message_id": str(uuid.uuid4()),
        "transaction_id": f"t{offset}",
        "trace_id": None,
        "payload_json": f'{{"n":{offset}}}',
        "created_at": datetime(2026, 12, 3, 12, 0, 0, 123456, tzinfo=UTC),
        "partition_id": partition_id,
        "partition": f"p{partition_id}",
        "offset": offset,
        "delivery_attempt": attempt,
    } | kw
    return queues.Delivered(**fields)


def test_a_framed_pop_unpacks_to_the_json_answer():
    """The client's decoder reads what ``render_pop_frames`` writes: every
    message, a claim per partition and attempt, the claim count and the
    autopilot echo as the JSON answer has them."""
    trace = str(uuid.uuid4())
    messages = (
        _delivered(3),
        _delivered(4, attempt=2, trace_id=trace),
        _delivered(9, partition_id=8, payload_json="null"),
    )
    claim = queues.Claim(queue="q", lease_id="lease", group="g", partitions=((7, "p7"), (8, "p8")), messages=messages)
    framed = binary.render_pop_frames(claim, Autopilot(batch=100, partitions=4), 12)
    assert framed is not None
    answer = decode_pop_frames(framed)
    assert answer["partitionsClaimed"] == 2
    assert answer["autopilot"] == {"batch": 100, "partitions": 4, "waitMs": 12}
    assert (answer["queue"], answer["leaseId"], answer["consumerGroup"], answer["partitionId"]) == (
        "q",
        "lease",
        "g",
        "7",
    )
    got = [
        (m["id"], m["transactionId"], m["traceId"], m["data"], m["partitionId"], m["offset"], m["deliveryAttempt"])
        for m in answer["messages"]
    ]
    assert got == [
        (messages[0].message_id, "t3", None, {"n": 3}, "7", 3, 1),
        (messages[1].message_id, "t4", trace, {"n": 4}, "7", 4, 2),
        (messages[2].message_id, "t9", None, None, "8", 9, 1),
    ]
    assert {m["createdAt"] for m in answer["messages"]} == {"2026-12-03T12:00:00.123Z"}


def test_a_message_id_that_is_no_uuid_falls_back_to_json():
    """A message the framed answer cannot carry makes the pop answer JSON."""
    claim = queues.Claim(
        queue="q", lease_id="l", group="g", partitions=((7, "p7"),), messages=(_delivered(1, message_id="legacy"),)
    )
    assert binary.render_pop_frames(claim, None, 0) is None


@pytest.mark.parametrize(
    ("conflation", "conflict", "keys"),
    [
        (True, False, {"conflation": True}),
        (False, True, {"conflationConflict": True}),
        (True, True, {"conflation": True, "conflationConflict": True}),
        (False, False, {}),
    ],
)
def test_a_framed_pop_carries_the_conflation_keys_only_when_true(conflation, conflict, keys):
    """The v1 header holds ``conflation`` / ``conflationConflict`` exactly when the JSON answer would."""
    claim = queues.Claim(
        queue="q",
        lease_id="l",
        group="g",
        partitions=((7, "p7"),),
        messages=(_delivered(5),),
        conflation=conflation,
        conflation_conflict=conflict,
    )
    framed = binary.render_pop_frames(claim, None, 0)
    assert framed is not None
    answer = decode_pop_frames(framed)
    assert {k: answer[k] for k in ("conflation", "conflationConflict") if k in answer} == keys
