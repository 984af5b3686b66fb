"""A batch ack's parse: the plain path (``wire._plain_acks``) gives what
``ack_item`` gives, acknowledgment by acknowledgment, or steps aside."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from queenadmin.api.wire import queues as wire
from queenadmin.domain import queues
from queenadmin.errors import QueenError

_ABSENT: Any = object()

#: Values a field of an acknowledgment may hold: texts a database refuses
#: (NUL, a lone surrogate) or a name refuses (a control, a bidi mark, too
#: long), other JSON kinds, and absence.
texts = st.sampled_from(
    ["", "t-1", "42", "0", "completed", "failed", "retry", "dlq", "other", "a\x00b", "\ud800", "g\n", "\u202eg"]
)
values = st.one_of(
    st.just(_ABSENT),
    st.none(),
    texts,
    st.text(max_size=6),
    st.sampled_from([0, 7, -1, True, False, 1.5, [], {}, ["x"], {"a": 1}, "x" * 600]),
)
#: Mostly texts, so that many lists are plain throughout.
field = st.one_of(texts, texts, texts, values)
acks = st.fixed_dictionaries(
    {
        "transactionId": field,
        "partitionId": field,
        "status": field,
        "leaseId": field,
        "error": field,
        "consumerGroup": field,
    }
).map(lambda a: {k: v for k, v in a.items() if v is not _ABSENT})
items = st.one_of(acks, acks, acks, acks, st.sampled_from([None, "ack", 3, ["x"]]))
#: Acknowledgments of texts and nulls only: the plain path's own checks.
near = st.one_of(texts, texts, texts, st.none(), st.just(_ABSENT))
near_acks = st.fixed_dictionaries(
    dict.fromkeys(("transactionId", "partitionId", "status", "leaseId", "error", "consumerGroup"), near)
).map(lambda a: {k: v for k, v in a.items() if v is not _ABSENT})


def _one_by_one(raw: list[Any], group: Any) -> list[queues.AckItem] | str:
    try:
        return [
            wire.ack_item(i, a, a.get("consumerGroup", group) if isinstance(a, dict) else group)
            for i, a in enumerate(raw)
        ]
    except QueenError as refused:
        return f"{type(refused).__name__}: {refused}"


@settings(max_examples=600, deadline=None)
@given(st.one_of(st.lists(items, max_size=4), st.lists(near_acks, min_size=1, max_size=4)), values)
def test_the_plain_path_agrees_with_ack_item(raw, group):
    group = None if group is _ABSENT else group
    plain = wire._plain_acks(raw, group)
    if plain is not None:
        assert plain == _one_by_one(raw, group)
    event("plain" if plain is not None else "not plain")


def _ack(n: int, **fields: Any) -> dict[str, Any]:
    return {"transactionId": f"t-{n}", "partitionId": "42", "leaseId": "L", "status": "completed", **fields}


def test_plain_acknowledgments_take_the_plain_path():
    raw = [_ack(0), _ack(1, status="whatever", leaseId=""), _ack(2, consumerGroup="g", error="boom")]
    assert wire._plain_acks(raw, None) == [
        queues.AckItem(0, "t-0", "42", "completed", "L", None, queues.QUEUE_MODE),
        queues.AckItem(1, "t-1", "42", "completed", None, None, queues.QUEUE_MODE),
        queues.AckItem(2, "t-2", "42", "completed", "L", "boom", "g"),
    ]
    assert wire.parse_ack_batch({"acknowledgments": raw}) == _one_by_one(raw, None)


@pytest.mark.parametrize(
    "odd",
    [
        {"partitionId": 42},
        {"error": {"why": 1}},
        {"transactionId": "a\x00b"},
        {"leaseId": "\ud800"},
        {"consumerGroup": "g\n"},
        {"consumerGroup": 5},
    ],
)
def test_anything_else_goes_to_ack_item(odd):
    raw = [_ack(0), _ack(1, **odd)]
    assert wire._plain_acks(raw, None) is None
    expected = _one_by_one(raw, None)
    if isinstance(expected, str):
        with pytest.raises(QueenError) as refused:
            wire.parse_ack_batch({"acknowledgments": raw})
        assert f"{type(refused.value).__name__}: {refused.value}" == expected
    else:
        assert wire.parse_ack_batch({"acknowledgments": raw}) == expected
