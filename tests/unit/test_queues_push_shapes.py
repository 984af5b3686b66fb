from __future__ import annotations

import dataclasses
import inspect

import pytest

from queenadmin.domain import queues
from queenadmin.domain.queues.consume.commands import AckItem, AckOutcome, Delivered
from queenadmin.plumbing.shapes import quick_init

SHAPES = [queues.PushItem, queues.PushResult, Delivered, AckItem, AckOutcome]


@pytest.mark.parametrize("cls", SHAPES)
def test_quick_init_takes_every_field_in_order_with_its_default(cls):
    """The quick ``__init__`` takes every field, in order, with its default, and sets it."""
    fields = dataclasses.fields(cls)
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    assert [p.name for p in params] == [f.name for f in fields]
    assert [p.default for p in params] == [
        inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default for f in fields
    ]
    values = [f"v{n}" for n in range(len(fields))]
    made = cls(*values)
    assert [getattr(made, f.name) for f in fields] == values
    assert made == cls(**{f.name: v for f, v in zip(fields, values, strict=True)})
    assert hash(made) == hash(cls(*values))
    assert dataclasses.replace(made, **{fields[0].name: "other"}) != made
    required = [f for f in fields if f.default is dataclasses.MISSING]
    short = cls(*values[: len(required)])
    assert [getattr(short, f.name) for f in fields[len(required) :]] == [f.default for f in fields[len(required) :]]


@pytest.mark.parametrize("cls", SHAPES)
def test_quick_init_shapes_stay_frozen(cls):
    """An answer cannot be changed after the fact."""
    made = cls(*[f"v{n}" for n in range(len(dataclasses.fields(cls)))])
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.index = 4


def test_quick_init_refuses_what_it_cannot_copy():
    @dataclasses.dataclass(frozen=True)
    class Made:
        items: list[int] = dataclasses.field(default_factory=list)

    with pytest.raises(AssertionError):
        quick_init(Made)
