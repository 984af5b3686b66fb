"""``wire.answers``: one declaration gives the document's model and the renderer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import pytest

from queenadmin.api.wire.answers import Answer, Key, Many, engine_refusal, kv_refusal, list_of
from queenadmin.errors import InvalidArgument, KVBadRequest


@dataclass
class Item:
    slot: int
    owner: str | None


@dataclass
class Result:
    name: str
    expires_at: int | None
    already: bool
    items: tuple[Item, ...]
    extra: str | None = None


ITEM = Answer("ItemOut", args=("masked",), slot=int, owner=Key(str | None, mask=lambda v: f"#{v}"))
RESULT = Answer(
    "ResultOut",
    doc="A result.",
    args=("index", "masked"),
    index=int,
    op=Key(Literal["get"]),
    name=Key(str, "the name"),
    extra=Key(str, omit=True),
    expiresAt=Key(int | None, via=lambda v: None if v is None else v * 2),
    already=Key(Literal[True], "when held already", omit=True, when="already"),
    items=Key(Many(ITEM)),
)


def test_render_reads_constants_arguments_attributes_and_nested_answers():
    result = Result("a", 5, False, (Item(0, "w"),))
    assert RESULT.render(result, 3, False) == {
        "index": 3,
        "op": "get",
        "name": "a",
        "expiresAt": 10,
        "items": [{"slot": 0, "owner": "w"}],
    }


def test_render_keeps_the_declared_order_with_keys_left_out_or_masked():
    result = Result("a", None, True, (Item(1, "w"), Item(2, None)), extra="x")
    out = RESULT.render(result, 0, True)
    assert list(out) == ["index", "op", "name", "extra", "expiresAt", "already", "items"]
    assert out["already"] is True
    assert out["expiresAt"] is None
    assert out["items"] == [{"slot": 1, "owner": "#w"}, {"slot": 2, "owner": "#None"}]


def test_the_model_is_what_the_document_shows():
    schema = RESULT.model.model_json_schema()
    assert schema["description"] == "A result."
    assert schema["required"] == ["index", "op", "name", "expiresAt", "items"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["already"] == {
        "const": True,
        "description": "when held already",
        "title": "Already",
        "type": "boolean",
    }
    assert schema["properties"]["extra"] == {"title": "Extra", "type": "string"}
    assert schema["properties"]["items"]["items"] == {"$ref": "#/$defs/ItemOut"}
    RESULT.model.model_validate(RESULT.render(Result("a", 1, True, (Item(0, None),)), 1, False))


def test_a_nested_answer_needs_its_arguments_from_its_parent():
    with pytest.raises(AssertionError, match="needs"):
        Answer("BadOut", items=Key(Many(ITEM)))
    with pytest.raises(AssertionError, match="masked argument"):
        Answer("BadOut", owner=Key(str, mask=str))


def test_a_body_may_write_some_keys_first_and_read_the_subject_whole_or_by_index():
    pair = Answer("PairOut", first=("count",), name=Key(str, src="0"), keys=Key(int, src="1"), count=Literal[2])
    assert list(pair.render(("a", 3))) == ["count", "name", "keys"]
    assert list(pair.model.model_json_schema()["properties"]) == ["name", "keys", "count"]
    listing = Answer("ListingOut", pairs=Key(list_of(pair), src=".", via=lambda pairs: [pair.render(p) for p in pairs]))
    assert listing.render([("b", 1)]) == {"pairs": [{"count": 2, "name": "b", "keys": 1}]}
    assert listing.model.model_json_schema()["properties"]["pairs"]["items"] == {"$ref": "#/$defs/PairOut"}


def test_none_and_an_empty_list_are_constants_and_each_body_gets_its_own_list():
    nothing = Answer("NothingOut", error=None, results=Key(list[int], const=[]))
    first, second = nothing.render(object()), nothing.render(object())
    assert first == {"error": None, "results": []}
    assert first["results"] is not second["results"]


def test_when_may_be_a_function_of_the_subject():
    waited = Answer("WaitedOut", waitedMs=Key(int, via=lambda ms: ms or 0, omit=True, when=lambda r: r.name == "a"))
    waited_result = Result("a", None, False, ())
    waited_result.waited_ms = None  # type: ignore[attr-defined]
    assert waited.render(waited_result) == {"waitedMs": 0}
    waited_result.name = "b"
    assert waited.render(waited_result) == {}


def test_a_list_of_flat_answers_is_one_comprehension_handed_its_parents_values():
    @dataclass
    class Claim:
        lease_id: str
        messages: tuple[Item, ...]

    message = Answer("MessageOut", args=("lease",), slot=int, leaseId=Key(str, src="lease"))
    claim = Answer("ClaimOut", messages=Many(message, lease="lease_id"))
    assert claim.render(Claim("l1", (Item(1, None), Item(2, None)))) == {
        "messages": [{"slot": 1, "leaseId": "l1"}, {"slot": 2, "leaseId": "l1"}]
    }
    assert "for x0 in r.messages" in claim.source
    assert "render" not in claim.source.partition("\n")[2]
    # An item with keys left out is rendered by its own function.
    assert "for x0 in r.items" in RESULT.source


def test_via_makes_the_subject_of_a_nested_answer_and_const_is_any_constant():
    segments = Answer("SegOut", segments=Key(int, const=0), messages=Key(int, src="."))
    summary = Answer("SummaryOut", segments=Key(segments, src="items", via=len))
    assert summary.render(Result("a", None, False, (Item(0, None), Item(1, None)))) == {
        "segments": {"segments": 0, "messages": 2}
    }
    assert segments.model.model_json_schema()["properties"]["segments"] == {"title": "Segments", "type": "integer"}


def test_a_refusal_is_read_from_its_exception_whatever_its_model_names():
    kv = kv_refusal("KVRefusedOut", "400: refused.", error=Literal["kv_bad_request"])
    assert kv.render(KVBadRequest("no such op", reason="kv_unknown_op")) == {
        "error": "kv_bad_request",
        "reason": "kv_unknown_op",
        "detail": "no such op",
    }
    # No finer reason: the code stands in for it.
    assert kv.render(InvalidArgument("bad"))["reason"] == "bad_request"
    engine = engine_refusal("EngineRefusedOut", code=Literal["bad_request"])
    assert engine.render(InvalidArgument("limit must be positive")) == {
        "error": "limit must be positive",
        "code": "bad_request",
    }
    schema = kv.model.model_json_schema()
    assert schema["description"] == "400: refused."
    assert schema["properties"]["error"] == {"const": "kv_bad_request", "title": "Error", "type": "string"}
    assert schema["required"] == ["error", "reason", "detail"]
