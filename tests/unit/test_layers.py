"""The package stands in layers, and every import runs down (issue 38).

Each module of ``queenadmin/`` belongs to one layer of ``LAYERS``; a module
may import from its own layer and from the layers below it, never from one
above. And no two modules, nor two top-level packages, import each other,
directly or round a longer loop: shared plumbing sits below everything that
uses it. Imports are read with ``ast``, every one of them (those inside a
function or under ``TYPE_CHECKING`` too); a failure names the file and the
line.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from pathlib import Path

from tests.conftest import ROOT

PACKAGE = ROOT / "queenadmin"

#: Top to bottom; each a set of module prefixes (a package takes its
#: submodules). The ground floor holds what everything may use: data shape,
#: errors, settings, the database seam and the framework plumbing.
LAYERS: list[frozenset[str]] = [
    # What Django and the server start from, and what an operator calls.
    frozenset(
        {
            "queenadmin.settings",
            "queenadmin.urls",
            "queenadmin.asgi",
            "queenadmin.wsgi",
            "queenadmin.apps",
            "queenadmin.admin_site",
            "queenadmin.admin",
            "queenadmin.management",
            "queenadmin.templatetags",
        }
    ),
    # The callers of the domain that answer requests.
    frozenset({"queenadmin.api", "queenadmin.dashboard", "queenadmin.accounts"}),
    frozenset({"queenadmin.server"}),
    frozenset({"queenadmin.metrics"}),
    frozenset({"queenadmin.domain", "queenadmin.migrations", "queenadmin.upgrade"}),
    frozenset(
        {
            "queenadmin",
            "queenadmin.models",
            "queenadmin.errors",
            "queenadmin.conf",
            "queenadmin.plumbing",
            "queenadmin.pgbackend",
            "queenadmin.formats",
        }
    ),
]


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def layer_of(module: str) -> int | None:
    """The index in ``LAYERS`` of the longest prefix naming ``module``."""
    best: tuple[int, int] | None = None
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), index)
    return None if best is None else best[1]


def _target(name: str) -> str | None:
    """The module of ours that importing ``name`` loads, or None."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str, source: str, *, is_package: bool = False) -> list[tuple[int, str]]:
    """(line, module of ours) for every import in ``module``'s ``source``."""
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            # ``from package import name``: the submodule when there is one.
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
        else:
            continue
        for name in names:
            target = _target(name)
            if target is not None and target != module:
                found.append((node.lineno, target))
    return found


def _graph() -> dict[str, list[tuple[int, str]]]:
    return {
        module: imports_of(module, path.read_text(), is_package=path.name == "__init__.py")
        for module, path in MODULES.items()
    }


def _top(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected sets of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(edges.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            members = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                members.append(member)
                if member == node:
                    break
            if len(members) > 1:
                found.append(sorted(members))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def _where(graph: dict[str, list[tuple[int, str]]], members: Iterable[str], group: Callable[[str], str]) -> list[str]:
    """``file:line: a -> b``, the first import of each arrow inside a circle
    (``group`` names the node a module stands for)."""
    inside = set(members)
    seen: set[tuple[str, str]] = set()
    found = []
    for module in sorted(graph):
        for line, target in graph[module]:
            arrow = (group(module), group(target))
            if arrow[0] in inside and arrow[1] in inside and arrow[0] != arrow[1] and arrow not in seen:
                seen.add(arrow)
                found.append(f"{MODULES[module].relative_to(ROOT)}:{line}: {arrow[0]} -> {arrow[1]}")
    return found


def _itself(module: str) -> str:
    return module


def test_every_module_has_a_layer():
    """A new top-level module or package is placed in ``LAYERS`` first."""
    assert [module for module in MODULES if layer_of(module) is None] == []


def test_no_import_runs_back_up():
    """A module imports only from its own layer and the layers below."""
    found = [
        f"{MODULES[module].relative_to(ROOT)}:{line}: {module} imports {target}, a higher layer"
        for module, imports in _graph().items()
        for line, target in imports
        if (layer_of(target) or 0) < (layer_of(module) or 0)
    ]
    assert found == [], "\n".join(found)


def test_no_module_imports_itself_round_a_circle():
    """No module imports one that imports it back, however far round
    (an import inside a function included)."""
    graph = _graph()
    edges = {module: {target for _, target in imports} for module, imports in graph.items()}
    found = [_where(graph, members, _itself) for members in _circles(edges)]
    assert found == [], "\n\n".join("\n".join(circle) for circle in found)


def test_no_top_level_packages_import_each_other():
    """No two packages under ``queenadmin/`` (or top-level modules) import
    each other, even through modules that are not in a circle themselves."""
    graph = _graph()
    edges: dict[str, set[str]] = {}
    for module, imports in graph.items():
        edges.setdefault(_top(module), set()).update(_top(t) for _, t in imports if _top(t) != _top(module))
    found = [_where(graph, members, _top) for members in _circles(edges)]
    assert found == [], "\n\n".join("\n".join(circle) for circle in found)


def test_the_checks_see_what_they_look_for():
    """The reader resolves relative and ``from package import module``
    imports, and the circle finder finds a loop, so an empty answer above
    means something."""
    source = "import os\nfrom . import clock\nfrom ..models import kv\nfrom queenadmin.domain.kv import ops\n"
    assert imports_of("queenadmin.domain.x", source) == [
        (2, "queenadmin.domain.clock"),
        (3, "queenadmin.models.kv"),
        (4, "queenadmin.domain.kv.ops"),
    ]
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert layer_of("queenadmin.api.kv") < layer_of("queenadmin.domain.kv") < layer_of("queenadmin.models.kv")
