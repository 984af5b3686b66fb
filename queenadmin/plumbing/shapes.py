"""``quick_init``: a frozen dataclass built at the cost of a plain one.

A frozen dataclass's generated ``__init__`` sets each field through
``object.__setattr__`` (its own ``__setattr__`` refuses): 1.9 us for an
object of seven fields, against 0.75 us written into ``__dict__``
(measured). The hot paths build one per message (a 1,000-message push made
2,000: 10% of its serve CPU, bench/README.md).
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

T = TypeVar("T")


def quick_init(cls: type[T]) -> type[T]:
    """Give frozen dataclass ``cls`` an ``__init__`` that fills its
    ``__dict__``: the same parameters, defaults and instances, still frozen
    after it. Plain defaults only (no ``default_factory``, ``InitVar`` or
    ``__post_init__``; asserted), and not with ``slots``."""
    assert dataclasses.is_dataclass(cls)
    assert "__slots__" not in cls.__dict__, cls
    assert not hasattr(cls, "__post_init__"), cls
    fields = [f for f in dataclasses.fields(cls) if f.init]
    assert len(fields) == len(dataclasses.fields(cls)), cls
    namespace: dict[str, Any] = {}
    params = []
    for f in fields:
        assert f.default_factory is dataclasses.MISSING, (cls, f.name)
        if f.default is dataclasses.MISSING:
            params.append(f.name)
        else:
            namespace[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
    lines = [f"def __init__(self, {', '.join(params)}):", "    d = self.__dict__"]
    lines += [f"    d[{f.name!r}] = {f.name}" for f in fields]
    exec("\n".join(lines), namespace)  # the way dataclasses writes its own
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    cls.__init__ = init  # type: ignore[method-assign]
    return cls
