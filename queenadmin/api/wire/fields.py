"""One declaration per wire body: the parser's checks and its JSON Schema.

A ``Field`` names a body field's type, bounds and the protocol's reason code
for each refusal; ``Field.read`` is the parser's check of it, and
``Field.schema`` what ``/api/v1/openapi.json`` publishes. An ``Op`` is an
object of fields (one operation of a batch, or a whole body), ``Ops`` a
batch of operations picked by ``op``: both publish their components
(``openapi.body_of``) from the same fields the parsers read, so the two
cannot drift. Rules of the domain (a name's byte budget, answered 413)
stay in the domain: a field hands its value to ``check`` after its own
checks, and its bounds document that check. A ``Param`` is the same for
one query-string parameter, a ``Query`` the parameters a route reads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from queenadmin.api.wire.common import TENANT_FIELDS, is_json_int, is_json_number, json_int

Kind = Literal["integer", "number", "boolean", "string", "array", "object", "null", "any"]
#: Makes the refusal of a reason code: ``bad(reason, detail)``.
Bad = Callable[[str, str], Exception]

#: Text without NUL: PostgreSQL can neither store nor compare one, so every
#: parser refuses it, on SQLite too.
NO_NUL = r"^[^\x00]*$"
#: Non-empty text without NUL.
SOME_TEXT = r"^[^\x00]+$"

_TYPES: dict[str, Callable[[Any], bool]] = {
    "integer": is_json_int,
    "number": is_json_number,
    "boolean": lambda value: isinstance(value, bool),
    "string": lambda value: isinstance(value, str),
    "array": lambda value: isinstance(value, list),
    "object": lambda value: isinstance(value, dict),
    "null": lambda value: value is None,
    "any": lambda value: True,
}
_ABSENT: Any = object()
#: Every value Python reads as false (``0`` matches ``0.0`` in JSON Schema).
FALSY: list[Any] = [None, False, 0, "", [], {}]


class Declared(Protocol):
    """A declaration the document shows: its component and those it uses."""

    @property
    def name(self) -> str: ...

    def components(self) -> dict[str, dict[str, Any]]: ...


@dataclass(frozen=True, slots=True)
class Field:
    """One field: its JSON type, bounds and the reasons of its refusals.

    ``kind`` is a JSON type, or a tuple of the ones accepted. ``reason``
    answers a value of the wrong type, out of ``ge``/``le`` or not among
    ``choices``; ``missing`` one that is absent (``null`` too unless
    ``null_is_bad``; any false value with ``falsy_is_absent``), and makes
    the field required; an optional absent field reads as ``default``.
    ``check`` runs on a value of the right type (the domain's rule).
    ``of`` is the declaration of the object, or of each item of the array,
    which the parser reads itself. ``refusal`` is the detail of every
    refusal of the field where the protocol words it otherwise. ``schema`` adds or replaces JSON Schema
    keywords the checks need (what ``check`` refuses, in the document's
    words).
    """

    kind: Kind | tuple[Kind, ...]
    reason: str = ""
    missing: str | None = None
    default: Any = None
    ge: float | None = None
    le: float | None = None
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None
    const: Any = _ABSENT
    choices: tuple[Any, ...] | None = None
    #: What the document says of the field (``rule`` when empty).
    doc: str = ""
    #: The rule in words, for a refusal's detail (and the document's).
    rule: str = ""
    refusal: str = ""
    #: The detail of a number above ``le`` where it is not ``refusal``'s.
    too_high: str = ""
    #: ``null`` is a bad value (``reason``), not an absent one.
    null_is_bad: bool = False
    #: Any false value (``0``, ``""``, ``[]``…) reads as absent (``value or default``).
    falsy_is_absent: bool = False
    check: Callable[[Any], Any] | None = None
    of: Declared | None = None
    schema_extra: Mapping[str, Any] = field(default_factory=dict)

    #: The type check and whether any bound applies: worked out once, as
    #: ``read`` is on the hot paths (a KV put reads ``required``).
    _accepts: Callable[[Any], bool] = field(init=False, repr=False, compare=False)
    _bounded: bool = field(init=False, repr=False, compare=False)
    #: An integer field (not also a number): a whole float reads as its ``int``.
    _integral: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        kinds = (self.kind,) if isinstance(self.kind, str) else self.kind
        checks = [_TYPES[kind] for kind in kinds]

        def accepts(value: Any) -> bool:
            return any(check(value) for check in checks)

        bounds = (self.choices, self.min_length, self.ge, self.le)
        object.__setattr__(self, "_accepts", checks[0] if len(checks) == 1 else accepts)
        object.__setattr__(self, "_bounded", self.const is not _ABSENT or any(b is not None for b in bounds))
        object.__setattr__(self, "_integral", "integer" in kinds and "number" not in kinds)

    @property
    def required(self) -> bool:
        return self.missing is not None

    def read(self, raw: Mapping[str, Any], name: str, bad: Bad) -> Any:
        """The value of ``name`` in ``raw``, checked; raise ``bad(reason)``.

        An integer field's whole float (``2.0``) reads as its ``int``
        (``json_int``) before the bounds, which hold for that ``int``; only a
        value of another type pays for that look.
        """
        value = raw.get(name, _ABSENT)
        if (
            value is _ABSENT
            or (value is None and not self.null_is_bad and self.kind != "null")
            or (self.falsy_is_absent and not value)
        ):
            if self.missing is not None:
                raise bad(self.missing, self.refusal or f"{name} is required")
            return self.default
        if not self._accepts(value):
            if not self._integral or type(value) is not float or (whole := json_int(value)) is None:
                raise bad(self.reason, self.refusal or f"{name} must be {self.describe()}")
            value = whole
        if self._bounded and not self._in_bounds(value):
            if self.too_high and self.le is not None and value > self.le:
                raise bad(self.reason, self.too_high)
            raise bad(self.reason, self.refusal or f"{name} must be {self.describe()}")
        return value if self.check is None else self.check(value)

    def _in_bounds(self, value: Any) -> bool:
        # ge and le bound the number kinds only (no field mixes them with others).
        if self.const is not _ABSENT and value != self.const:
            return False
        if self.choices is not None and value not in self.choices:
            return False
        if self.min_length is not None and isinstance(value, str | list) and len(value) < self.min_length:
            return False
        if self.ge is not None and value < self.ge:
            return False
        return self.le is None or value <= self.le

    def describe(self) -> str:
        """The rule in words, for a refusal's detail."""
        if self.rule:
            return self.rule
        what = {"integer": "an integer", "number": "a number", "boolean": "a boolean", "string": "a string"}
        kinds = (self.kind,) if isinstance(self.kind, str) else self.kind
        text = " or ".join(what.get(kind, f"a JSON {kind}") for kind in kinds)
        if self.choices is not None:
            text = "one of " + ", ".join(map(repr, self.choices))
        if self.ge is not None and self.le is not None:
            text += f" from {_num(self.ge)} to {_num(self.le)}"
        elif self.ge is not None:
            text += f" >= {_num(self.ge)}"
        return text

    def schema(self) -> dict[str, Any]:
        """The JSON Schema of a value (``null`` added where it reads as absent)."""
        out = self.value_schema()
        documented: dict[str, Any]
        if self.falsy_is_absent and not self.required:
            documented = {"anyOf": [out, {"enum": FALSY}]}
        elif self.required or self.null_is_bad or self.kind in ("null", "any"):
            documented = out
        else:
            documented = {"anyOf": [out, {"type": "null"}]}
        if self.doc or self.rule:
            documented["description"] = self.doc or self.rule
        return documented

    def value_schema(self) -> dict[str, Any]:
        """The JSON Schema of a value that is there."""
        out: dict[str, Any] = (
            {} if self.kind == "any" else {"type": list(self.kind) if isinstance(self.kind, tuple) else self.kind}
        )
        if self.of is not None:
            out.update({"items": ref(self.of.name)} if self.kind == "array" else ref(self.of.name))
        keywords = {
            "minimum": self.ge,
            "maximum": self.le,
            "minLength": self.min_length,
            "maxLength": self.max_length,
            "pattern": self.pattern,
        }
        out.update((key, value) for key, value in keywords.items() if value is not None)
        if self.const is not _ABSENT:
            out["const"] = self.const
        if self.choices is not None:
            out["enum"] = list(self.choices)
        out.update(self.schema_extra)
        return out


def _num(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else str(bound)


def no_tenant(schema: dict[str, Any]) -> dict[str, Any]:
    """The tenant is never a body field (refused by name)."""
    schema["not"] = {"anyOf": [{"required": [name]} for name in TENANT_FIELDS]}
    return schema


@dataclass(frozen=True, slots=True)
class Op:
    """An object of fields: one operation of a batch, or a body.

    ``name`` is its component in the document; ``extra`` adds keywords
    across its fields (``anyOf`` of the ones that go together);
    ``tenant_free``: a body naming the tenant is refused.
    """

    name: str
    fields: Mapping[str, Field]
    doc: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)
    tenant_free: bool = True

    def schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "properties": {name: f.schema() for name, f in self.fields.items()},
            "required": [name for name, f in self.fields.items() if f.required],
            "title": self.name,
            "type": "object",
        }
        if not out["required"]:
            del out["required"]
        if self.doc:
            out["description"] = self.doc
        if self.tenant_free:
            no_tenant(out)
        out.update(self.extra)
        return out

    def components(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for f in self.fields.values():
            if f.of is not None:
                out.update(f.of.components())
        out[self.name] = self.schema()
        return out

    def read(self, raw: Mapping[str, Any], bad: Bad) -> dict[str, Any]:
        """Every field of ``raw``, read in the declared order (``Field.read``)."""
        return {name: f.read(raw, name, bad) for name, f in self.fields.items()}


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


@dataclass(frozen=True, slots=True)
class Ops:
    """Operations picked by ``op`` (or ``key``): one ``Op`` each (``key`` their ``const``)."""

    name: str
    ops: Mapping[str, Op]
    doc: str = ""
    #: The field whose value picks the operation.
    key: str = "op"

    def schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "oneOf": [ref(name) for name in dict.fromkeys(op.name for op in self.ops.values())],
            "discriminator": {
                "propertyName": self.key,
                "mapping": {k: ref(op.name)["$ref"] for k, op in self.ops.items()},
            },
            "title": self.name,
        }
        if self.doc:
            out["description"] = self.doc
        return out

    def components(self) -> dict[str, dict[str, Any]]:
        out = {name: schema for op in self.ops.values() for name, schema in op.components().items()}
        out[self.name] = self.schema()
        return out


@dataclass(frozen=True, slots=True)
class Call:
    """A batch body: ``{"operations": [...]}`` (or the bare array, ``array_too``)."""

    name: str
    operations: Ops
    max_ops: int
    doc: str = ""

    def components(self) -> dict[str, dict[str, Any]]:
        operations: dict[str, Any] = {"items": ref(self.operations.name), "maxItems": self.max_ops, "type": "array"}
        if self.doc:
            operations["description"] = self.doc
        body = {"properties": {"operations": operations}, "required": ["operations"], "title": self.name}
        return {**self.operations.components(), self.name: {**body, "type": "object"}}


#: A query parameter's text as a value of its field's kind (``ValueError``: it is none).
FROM_TEXT: dict[str, Callable[[str], Any]] = {
    "integer": int,
    "boolean": {"true": True, "false": False}.__getitem__,
    "string": str,
}


def any_case(word: str) -> str:
    """A pattern of ``word`` in any case."""
    return "".join(f"[{c.upper()}{c}]" if c.isalpha() else c for c in word)


def flag_text(*words: str) -> str:
    """The pattern of a flag's text: one of ``words`` (any case) or empty."""
    return f"^(?:{'|'.join(map(any_case, words))}|)$"


@dataclass(frozen=True, slots=True)
class Param:
    """A query parameter: its text read as ``field``'s kind, then ``field``'s checks.

    ``parse`` reads the text (default: ``FROM_TEXT`` of the kind) and raises
    ``ValueError`` (or ``KeyError``) on text that is no such value, refused
    with ``field.reason`` as "``name`` must be ``words``". An empty
    parameter reads as absent, a string's only with ``falsy_is_absent``.
    An integer is clamped to ``cap`` after its checks; ``text`` is the
    schema of the text where it is not the value's (a flag's words).
    """

    field: Field
    words: str = ""
    parse: Callable[[str], Any] | None = None
    cap: int | None = None
    text: Mapping[str, Any] | None = None

    @property
    def empty_is_absent(self) -> bool:
        return self.field.kind != "string" or self.field.falsy_is_absent

    def read(self, params: Mapping[str, str], name: str, bad: Bad) -> Any:
        text = params.get(name)
        if text is None or (text == "" and self.empty_is_absent):
            return self.field.read({}, name, bad)
        parse = self.parse or FROM_TEXT[str(self.field.kind)]
        try:
            value = parse(text)
        except (ValueError, KeyError):
            raise bad(self.field.reason, f"{name} must be {self.words or self.field.describe()}") from None
        value = self.field.read({name: value}, name, bad)
        return value if self.cap is None else min(value, self.cap)

    def schema(self) -> dict[str, Any]:
        """The schema of the parameter's text (an empty one too where it reads as absent)."""
        f = self.field
        schema = dict(self.text) if self.text is not None else f.value_schema()
        # Text without NUL takes the empty text already.
        empty_fits = f.kind == "string" and f.pattern in (None, NO_NUL) and f.choices is None and not f.min_length
        if self.text is None and self.empty_is_absent and not f.required and not (empty_fits and not f.schema_extra):
            schema = {"anyOf": [schema, {"const": ""}]}
        doc = f.doc or f.rule
        if self.cap is not None:
            doc = f"{doc}; clamped to {self.cap}" if doc else f"clamped to {self.cap}"
        if doc:
            schema["description"] = doc
        if f.default is not None and "default" not in schema:
            schema["default"] = f.default
        return schema


def flag(
    *,
    default: bool = False,
    doc: str = "",
    true: tuple[str, ...] = ("true", "1"),
    false: tuple[str, ...] = ("false", "0"),
) -> Param:
    """A flag: one of ``true`` or ``false`` in any case (empty: ``default``), else "must be true or false"."""
    words = dict.fromkeys(true, True) | dict.fromkeys(false, False)
    text = {"type": "string", "pattern": flag_text(*true, *false), "default": "true" if default else "false"}
    field = Field("boolean", default=default, doc=doc)
    return Param(field, "true or false", lambda raw: words[raw.lower()], text=text)


@dataclass(frozen=True, slots=True)
class Query:
    """The query parameters a route reads, declared once: read by ``read``,
    published by ``openapi.parameters(query=...)`` from ``schemas``."""

    params: Mapping[str, Param]

    def read(self, params: Mapping[str, str], bad: Bad) -> dict[str, Any]:
        """Every parameter, read in the declared order (``Param.read``)."""
        return {name: p.read(params, name, bad) for name, p in self.params.items()}

    def schemas(self) -> dict[str, dict[str, Any]]:
        """Each parameter's schema and whether it is required."""
        return {name: {**p.schema(), "required": p.field.required} for name, p in self.params.items()}

    def exploded(self, name: str, *, required: bool, rule: Mapping[str, Any]) -> dict[str, Any]:
        """The parameters as one of type object, form, exploded (``?a=&b=``):
        how OpenAPI says that they go together (``rule``)."""
        properties = {k: p.schema() for k, p in self.params.items()}
        schema = {"type": "object", "properties": properties, **rule, "additionalProperties": False}
        return {"name": name, "in": "query", "required": required, "style": "form", "explode": True, "schema": schema}


#: A query parameter's text: empty reads as absent. Every parameter's NUL
#: and lone surrogate are refused before any route (``api/envelope.py``).
TEXT = Param(Field("string", pattern=NO_NUL, falsy_is_absent=True))
#: What a query flag reads by default (any case): ``true``/``1`` or ``false``/``0``.
FLAG_TEXT = flag_text("true", "1", "false", "0")
