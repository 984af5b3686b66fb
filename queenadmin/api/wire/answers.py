"""One declaration per answer body: the model the document shows and the renderer.

An ``Answer`` names each key of a body once (``Key``): its JSON name, its
type and description as ``/api/v1/openapi.json`` shows them, whether the
body may leave it out, and where its value comes from in the domain's
result. From that it makes ``model``, the pydantic model the document
shows (and ``tests/api/test_contract.py`` holds every answer to), and
``render``, the function that builds the body: one dict literal, written
out and compiled once at import as dataclasses write ``__init__``, so a hot
path keeps the speed of a hand-written one.

Where a value comes from (``Key``): a one-value ``Literal`` (or ``None``)
with no ``src`` is that constant, as is ``const``; otherwise ``src`` (by
default the key's name in snake case) is one of the renderer's arguments
(``args``) or the subject, followed by a dotted path (attributes, and
indexes: ``"0.id"``), or the subject itself (``"."``). ``via`` turns it
into the wire's value (``with_args`` names arguments it takes after it),
or into the subject of a nested ``Answer`` (or ``Many`` of one), which
renders with its own keys, handed the arguments it shares with its
parent. ``mask`` is applied when the ``masked`` argument is true (a
fingerprint for a caller who may not see the value). ``omit``: the body
leaves the key out unless ``when`` (an argument or attribute, or a
function of the subject; by default the value not being ``None``) holds.
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin

from pydantic import Field, create_model

from queenadmin.api.schemas.common import Omit, WireOut

Render = Callable[..., dict[str, Any]]
_UNSET: Any = object()


def one(value: Any) -> Any:
    """``Literal[value]``, for a constant that is a variable."""
    return Literal[value]


def list_of(*answers: Answer) -> Any:
    """``list[A | B]`` of ``answers``' models, as a type of the document."""
    return list[either(*answers)]  # type: ignore[misc]


def either(*answers: Answer) -> Any:
    """The union of ``answers``' models (``A | B``), as a type of the document."""
    return functools.reduce(operator.or_, (answer.model for answer in answers))


class Many:
    """A list of ``answer``s; ``args`` gives its arguments by ``src`` (by
    default, the parent's arguments of the same names)."""

    def __init__(self, answer: Answer, **args: str) -> None:
        self.answer = answer
        self.args = args


@dataclass(frozen=True, slots=True)
class Key:
    """One key of an answer body (see the module's docstring)."""

    type: Any
    doc: str = ""
    src: str | None = None
    via: Callable[..., Any] | None = None
    with_args: tuple[str, ...] = ()
    mask: Callable[[Any], Any] | None = None
    omit: bool = False
    when: str | Callable[[Any], bool] | None = None
    #: Always this value (``[]``: a new empty list per body).
    const: Any = _UNSET

    def annotation(self) -> Any:
        if isinstance(self.type, Answer):
            return self.type.model
        if isinstance(self.type, Many):
            return list_of(self.type.answer)
        return self.type

    def constant(self) -> tuple[bool, Any]:
        if self.const is not _UNSET or self.type is None:
            return True, None if self.const is _UNSET else self.const
        values = get_args(self.type) if get_origin(self.type) is Literal else ()
        return (self.src is None and len(values) == 1), (values[0] if values else None)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class Answer:
    """An answer body, declared once: ``model`` for the document, ``render`` for the wire.

    ``keys`` are ``Key``s, or types (a ``Key`` of nothing else). ``render(subject,
    *args)`` takes the renderer's arguments in ``args``' order (``masked``
    among them where a key masks), and writes the keys ``first`` names
    before the others, in that order (the document lists them where they
    are declared).
    """

    def __init__(
        self, name: str, /, *, doc: str = "", args: tuple[str, ...] = (), first: tuple[str, ...] = (), **keys: Any
    ) -> None:
        self.name = name
        self.args = args
        self.first = first
        self.keys: dict[str, Any] = {json: key if isinstance(key, Key) else Key(key) for json, key in keys.items()}
        fields: dict[str, Any] = {}
        for json_name, key in self.keys.items():
            annotation = key.annotation()
            if key.omit:
                fields[json_name] = (annotation | Omit, Field(None, description=key.doc or None))
            elif key.doc:
                fields[json_name] = (annotation, Field(description=key.doc))
            else:
                fields[json_name] = (annotation, ...)
        self.model: type[WireOut] = create_model(
            name, __base__=WireOut, __doc__=doc or None, __module__=__name__, **fields
        )
        self.render: Render = self._compile()

    def within(self, name: str, **keys: Any) -> Answer:
        """This answer with ``keys`` first: a part of a bigger body (a transaction's result)."""
        return Answer(name, doc="", args=self.args, **keys, **self.keys)

    def _compile(self) -> Render:
        scope: dict[str, Any] = {}

        def name_of(value: Any) -> str:
            ident = f"_g{len(scope)}"
            scope[ident] = value
            return ident

        head, tail = self._keys("r", {arg: arg for arg in self.args}, name_of, 0)
        body = "{" + ", ".join(head) + "}"
        source = f"def render({', '.join(('r', *self.args))}):\n"
        source += (
            f"    out = {body}\n" + "".join(f"{line}\n" for line in tail) + "    return out\n"
            if tail
            else f"    return {body}\n"
        )
        self.source = source
        exec(compile(source, f"<answer {self.name}>", "exec"), scope)
        render: Render = scope["render"]
        render.__qualname__ = f"{self.name}.render"
        return render

    def _keys(
        self, subject: str, bound: dict[str, str], name_of: Callable[[Any], str], depth: int
    ) -> tuple[list[str], list[str]]:
        """The dict literal's entries and the statements after it, of ``subject``
        (an expression), with the arguments ``bound`` to expressions."""
        head: list[str] = []
        tail: list[str] = []

        def read(path: str) -> str:
            if path == ".":
                return subject
            first, *rest = path.split(".")
            start = bound[first] if first in bound else subject + (f"[{first}]" if first.isdigit() else f".{first}")
            return start + "".join(f"[{part}]" if part.isdigit() else f".{part}" for part in rest)

        first = {json_name: place for place, json_name in enumerate(self.first)}
        for json_name, key in sorted(self.keys.items(), key=lambda item: first.get(item[0], len(first))):
            is_const, const = key.constant()
            if is_const:
                assert const in ([], None) or isinstance(const, str | bool | int), const
                expr = repr(const)
            else:
                expr = read(key.src or _snake(json_name))
            if key.via is not None:
                expr = f"{name_of(key.via)}({expr}{''.join(f', {bound[arg]}' for arg in key.with_args)})"
            if isinstance(key.type, Many | Answer):
                expr = self._nested(json_name, key.type, expr, read, bound, name_of, depth)
            if key.mask is not None:
                assert "masked" in bound, f"{self.name}.{json_name} masks: give the masked argument"
                expr = f"({name_of(key.mask)}({expr}) if {bound['masked']} else {expr})"
            if key.omit or tail:
                if not key.omit:
                    tail.append(f"    out[{json_name!r}] = {expr}")
                elif key.when:
                    when = read(key.when) if isinstance(key.when, str) else f"{name_of(key.when)}({subject})"
                    tail.append(f"    if {when}:\n        out[{json_name!r}] = {expr}")
                else:
                    tail.append(f"    if (v := {expr}) is not None:\n        out[{json_name!r}] = v")
            else:
                head.append(f"{json_name!r}: {expr}")
        return head, tail

    def _nested(
        self,
        json_name: str,
        nested: Many | Answer,
        expr: str,
        read: Callable[[str], str],
        bound: dict[str, str],
        name_of: Callable[[Any], str],
        depth: int,
    ) -> str:
        """A nested answer of ``expr``; written inline when its body is a dict
        literal (a list of them: one comprehension) and ``expr`` is read once."""
        answer = nested.answer if isinstance(nested, Many) else nested
        given = dict(nested.args) if isinstance(nested, Many) else {}
        missing = set(answer.args) - set(bound) - set(given)
        assert not missing, f"{self.name}.{json_name}: {answer.name} needs {missing}"
        args = {arg: read(given[arg]) if arg in given else bound[arg] for arg in answer.args}
        rest = "".join(f", {value}" for value in args.values())
        if not isinstance(nested, Many):
            # Inline only what is read once (a name): a property is not run per key.
            if expr.isidentifier():
                head, tail = answer._keys(expr, args, name_of, depth + 1)
                if not tail:
                    return f"{{{', '.join(head)}}}"
            return f"{name_of(answer.render)}({expr}{rest})"
        item = f"x{depth}"
        head, tail = answer._keys(item, args, name_of, depth + 1)
        if tail:
            return f"[{name_of(answer.render)}({item}{rest}) for {item} in {expr}]"
        return f"[{{{', '.join(head)}}} for {item} in {expr}]"


# --------------------------------------------------------------------------
# Refusals (``api/errors.py`` renders a ``QueenError`` with its answer)


def _reason(exc: Any) -> Any:
    return exc.reason or exc.code


def kv_refusal(name: str, doc: str = "", *, error: Any, reason: Any = str) -> Answer:
    """The KV family's body (KV, locks, timers; protocol 1.3) of a refusal:
    ``error`` its code, ``reason`` the finer one (else the code), ``detail``."""
    return Answer(name, doc=doc, error=Key(error, src="code"), reason=Key(reason, src=".", via=_reason), detail=str)


def engine_refusal(name: str, doc: str = "", *, code: Any, error: Any = str) -> Answer:
    """The engine family's body of a refusal: ``error`` its prose (``detail``), ``code`` its code."""
    return Answer(name, doc=doc, error=Key(error, src="detail"), code=Key(code, src="code"))
