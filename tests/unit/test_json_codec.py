"""The API's JSON: msgspec where it is exact, ``json`` everywhere else.

Reading must give what the strict ``json`` reading gives for every body
(integers of any size exact, the same refusals with the same words), and
writing must give JSON that reads back to the same value. A body whose
parsed objects would take more than ``MAX_PARSE_BYTES`` is refused unread.
"""

from __future__ import annotations

import json
import tracemalloc
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import msgspec
import pytest
from django.test import RequestFactory
from hypothesis import given, settings
from hypothesis import strategies as st

from queenadmin.api.envelope import BodyTooLarge
from queenadmin.api.http import embed_json, json_dumps, parse_cost, read_json, utc_micros_z
from queenadmin.domain import clock
from queenadmin.errors import InvalidArgument


def _read(body: bytes) -> Any:
    request = RequestFactory().post("/api/v1/kv", data=body, content_type="application/json")
    return read_json(request, InvalidArgument, "bad_request")


def _refusal(body: bytes) -> str:
    with pytest.raises(InvalidArgument) as refused:
        _read(body)
    return str(refused.value)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_reading_matches_strict_json(value):
    body = json.dumps(value, ensure_ascii=False).encode()
    read = _read(body)
    assert read == json.loads(body)
    assert json.dumps(read) == json.dumps(json.loads(body))


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_writing_reads_back_exactly(value):
    assert json.loads(json_dumps(value)) == value


@pytest.mark.parametrize(
    "number", [2**64, 2**70 + 1, -(2**63) - 1, 10**30 + 1, 123456789012345678901234567890, 18446744073709551615]
)
def test_integers_of_any_size_stay_exact(number):
    read = _read(f'{{"n": {number}}}'.encode())["n"]
    assert type(read) is int
    assert read == number
    assert json_dumps({"n": number}) == f'{{"n":{number}}}'.encode()


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"1e400", "too large to represent"),
        (b"[-1e400]", "too large to represent"),
        (b"NaN", "not valid JSON"),
        (b'{"a": Infinity}', "not valid JSON"),
        (b'"\\ud800"', "lone UTF-16 surrogate"),
        (b'"\xff"', "not valid JSON"),
        (b"{", "not valid JSON"),
        (b"[" * 200 + b"]" * 200, "nests deeper than 128"),
        (b"[" * 5000 + b"]" * 5000, "nests deeper than 128"),
    ],
)
def test_refusals_keep_their_words(body, words):
    assert words in _refusal(body)


def test_written_json_is_compact_utf8():
    assert json_dumps({"a": [1, "é", None, True, 1.5]}) == '{"a":[1,"é",null,true,1.5]}'.encode()
    # A non-string key is written as json writes it.
    assert json_dumps({1: "x"}) == b'{"1":"x"}'


def test_an_embedded_json_text_is_written_as_it_is():
    stored = '{"a": [1e-07, 12345678901234567890], "s": "\\"\u2028"}'
    data = {"data": embed_json(stored), "n": 1}
    assert json_dumps(data) == b'{"data":' + stored.encode() + b',"n":1}'
    # Where msgspec refuses (a key it cannot write), json parses the text.
    assert json.loads(json_dumps({**data, None: 2})) == {"data": json.loads(stored), "n": 1, "null": 2}


@pytest.mark.parametrize(
    "moment",
    [
        datetime(2026, 12, 7, 5, 16, 1, 120000, tzinfo=UTC),
        datetime(2026, 12, 7, 5, 16, 1, 1, tzinfo=UTC),
        datetime(2026, 12, 7, 5, 16, 1, tzinfo=UTC),
        datetime(12, 1, 2, 3, 4, 5, 999999, tzinfo=UTC),
        datetime(2026, 12, 7, 6, 16, 1, 5, tzinfo=timezone(timedelta(hours=1))),
        datetime(2026, 12, 7, 5, 16, 1, 5, tzinfo=ZoneInfo("UTC")),
    ],
)
def test_a_datetime_is_written_as_iso_micros_z(moment):
    wanted = f'"{clock.iso_micros_z(moment)}"'.encode()
    assert json_dumps(utc_micros_z(moment)) == wanted
    assert json_dumps({None: utc_micros_z(moment)}) == b'{"null":' + wanted + b"}"


#: Bodies of one element repeated, from the densest JSON there is to a
#: plain string: what ``parse_cost`` must bound.
_SHAPES = {
    "one-key dicts": b'{"a":0}',
    "empty dicts": b"{}",
    "empty lists": b"[]",
    "two-letter strings": b'"ab"',
    "one-letter strings": b'"a"',
    "floats": b"0.5",
    "integers": b"100000",
    "messages": b'{"queue":"q","payload":{"id":12345,"name":"something"}}',
    "nested": b'{"k":[1,2,{"x":"yz"}]}',
    "long strings": b'"' + b"x" * 1000 + b'"',
    "wide strings": '"x😀xxxxxxxx"'.encode(),
    "escaped wide strings": b'"xx\\ud83d\\ude00xxxxxx"',
    "latin strings": '"héllo wörld"'.encode(),
}


@pytest.mark.parametrize("shape", sorted(_SHAPES))
def test_parse_cost_bounds_what_parsing_takes(shape):
    """The estimate is at least 0.9 and at most 2.5 times what msgspec's
    objects take, as tracemalloc counts them (an over-estimate only refuses
    a body sooner). 200 kB bodies: the ratios agree with 2 MB ones to 2%
    (2.048 against 2.033 for empty lists), for a tenth of the CPU."""
    element = _SHAPES[shape]
    body = b"[" + b",".join([element] * (200_000 // len(element) + 1)) + b"]"
    tracemalloc.start()
    try:
        parsed = msgspec.json.decode(body)
        taken = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    del parsed
    estimate = parse_cost(body)
    assert 0.9 * taken <= estimate <= 2.5 * taken, (shape, estimate / taken)


def test_a_body_that_would_parse_too_large_is_refused_unread(settings):
    settings.QUEENADMIN_MAX_PARSE_BYTES = 8 * 1024 * 1024
    dense = b"[" + b",".join([b'{"a":0}'] * 200_000) + b"]"  # 1.5 MiB, ~38 MiB parsed
    assert parse_cost(dense) > 8 * 1024 * 1024
    with pytest.raises(BodyTooLarge):
        _read(dense)
    # A plain string of the same size parses into its own size: read.
    plain = b'["' + b"x" * len(dense) + b'"]'
    assert len(_read(plain)[0]) == len(dense)
