"""django-ninja names OpenAPI components by class name and silently keeps
one of two schemas that share a name, so an answer is then checked against
the wrong shape (it happened twice while merging). Names must be unique."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections import defaultdict

from pydantic import BaseModel

import queenadmin.api.schemas as schemas


def test_no_two_api_schemas_share_a_class_name() -> None:
    seen: dict[str, set[str]] = defaultdict(set)
    for info in pkgutil.iter_modules(schemas.__path__):
        module = importlib.import_module(f"{schemas.__name__}.{info.name}")
        for name, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, BaseModel) and value.__module__ == module.__name__:
                seen[name].add(module.__name__)
    assert {name: where for name, where in seen.items() if len(where) > 1} == {}
