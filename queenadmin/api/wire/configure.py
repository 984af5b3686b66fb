"""A queue's configure on the wire (protocol section 10): its body, and each
option declared from the domain's table (``domain/queues/options.py``).

The dashboard's settings form checks its fields with ``option_changes``, so
its refusals are the API's.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from queenadmin.api.wire.fields import NO_NUL, Field, Op
from queenadmin.api.wire.queues import check_text, engine_bad, json_object, name_field
from queenadmin.domain import queues
from queenadmin.domain.queues.options import (
    BOOL_OPTIONS,
    CLAMPS,
    INT_OPTIONS,
    MAX_INT_OPTION,
    RANGES,
    UNSUPPORTED,
    OptionValue,
    option_value,
)


def _option(name: str) -> Field:
    """An option's field, from the domain's table (``queues/options.py``),
    whose rules (``option_value``) check it after its JSON type."""
    check = partial(option_value, name)
    if name in BOOL_OPTIONS:
        doc = f"default {str(BOOL_OPTIONS[name]).lower()}"
        return Field("boolean", refusal=f"option {name} must be a boolean", check=check, doc=doc)
    default = INT_OPTIONS[name]
    bounds: dict[str, Any] = {"minimum": 0, "maximum": MAX_INT_OPTION}
    doc = f"default {default}"
    if name in UNSUPPORTED:
        bounds, doc = {"const": default}, f"only {default}: {UNSUPPORTED[name]}"
    elif name in CLAMPS:
        bounds, doc = {}, f"default {default}; clamped to {CLAMPS[name][0]}..{CLAMPS[name][1]}"
    elif name in RANGES:
        bounds = {"minimum": RANGES[name][0], "maximum": RANGES[name][1]}
    return Field("integer", refusal=f"option {name} must be an integer", check=check, schema_extra=bounds, doc=doc)


#: Every option is optional; ``null`` restores its default.
OPTIONS = Op(
    "QueueOptionsIn",
    {name: _option(name) for name in (*INT_OPTIONS, *BOOL_OPTIONS)},
    doc="Every option is optional; ``null`` restores its default; unknown names are dropped.",
    tenant_free=False,
)
#: The configure fields that are not options, in the order they are checked.
_CONFIGURE = {
    "queue": name_field("queue"),
    "mode": Field("string", choices=("merge", "replace"), refusal="mode must be merge or replace", doc="default merge"),
    "options": Field(
        "object", of=OPTIONS, refusal="options must be an object", doc="wins over a flat option of the same name"
    ),
    "namespace": Field(
        "string",
        pattern=NO_NUL,
        refusal="namespace must be a string or null",
        check=partial(check_text, what="namespace"),
    ),
    "task": Field(
        "string", pattern=NO_NUL, refusal="task must be a string or null", check=partial(check_text, what="task")
    ),
}
CONFIGURE = Op(
    "ConfigureIn",
    {**_CONFIGURE, **OPTIONS.fields},
    doc="The queue and its options; options may also be sent flat, beside ``options``.",
    tenant_free=False,
)


def parse_configure(body: Any) -> queues.ConfigureRequest:
    """``POST /configure``: the queue, its namespace and task, the options.

    Options come in ``options`` or flat at the top level (protocol section
    10); ``options`` wins where both name one. Each known option must be an
    integer, a boolean or null as its kind says, and is then checked by the
    domain's rules (``options.option_value``), in body order; unknown names
    are dropped.
    """
    body = json_object(body)
    top = {name: f.read(body, name, engine_bad) for name, f in _CONFIGURE.items()}
    flat = {k: v for k, v in body.items() if k not in _CONFIGURE}
    return queues.ConfigureRequest(
        name=top["queue"],
        namespace=top["namespace"],
        task=top["task"],
        options=queues.QueueOptions(option_changes({**flat, **(top["options"] or {})})),
        replace=top["mode"] == "replace",
    )


def option_changes(given: dict[str, Any]) -> tuple[tuple[str, OptionValue | None], ...]:
    """The changes ``given`` (option name -> JSON value) asks for, checked
    in order as ``parse_configure`` checks them: the dashboard's settings
    form checks each of its fields with this, so its texts are the API's."""
    fields = OPTIONS.fields
    return tuple((name, fields[name].read(given, name, engine_bad)) for name in given if name in fields)
