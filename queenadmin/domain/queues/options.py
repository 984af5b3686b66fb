"""Queue options (protocol section 10): defaults, the rules on values, merging.

Options are stored in ``Queue.options`` under the protocol's own option
names (``leaseTime``, ``retryLimit``...), every option with its value, so
those names are the log's vocabulary for them, not only the wire's.

Where the checks live:

- the wire parser (``api/wire/queues.py``) checks shape and JSON types: the
  options object, flat options beside it, an integer or a boolean or null
  for each known option; unknown names are dropped, as the broker drops
  them. It checks each option in body order and calls ``option_value`` on
  it, so the first refusal is the first bad option, as it always was;
- the rules on values live here: ``option_value`` clamps the options the
  protocol clamps and refuses an integer outside 0..2**31-1, or outside its
  own ``RANGES`` entry (``InvalidArgument``), and a non-default value of an
  ``UNSUPPORTED`` option (``InvalidArgument`` naming it). ``QueueOptions``
  runs it again on construction, so an in-process caller cannot store what
  the wire would refuse (a wrong Python type there is a programming error:
  ``TypeError``);
- defaults, ``null`` restoring a default, and merge against replace are
  ``merge_options``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from queenadmin.errors import InvalidArgument

#: A stored option value.
OptionValue = int | bool

#: Integer options and their defaults on configure (protocol section 10).
INT_OPTIONS: dict[str, int] = {
    "leaseTime": 300,
    "retryLimit": 3,
    "retryDelay": 1000,
    "priority": 0,
    "maxSize": 0,
    "ttl": 3600,
    "delayedProcessing": 0,
    "windowBuffer": 0,
    "retentionSeconds": 0,
    "completedRetentionSeconds": 0,
    "maxWaitTimeSeconds": 0,
    "minPopWaitTime": 0,
    "dedupWindowSeconds": 3600,
    "retentionSinkHoldMaxSeconds": 604800,
    "maxQueueSize": 0,
}
BOOL_OPTIONS: dict[str, bool] = {
    "deadLetterQueue": True,
    "dlqAfterMaxRetries": True,
    "retentionEnabled": False,
    "encryptionEnabled": False,
    "retentionSinkHold": False,
}
#: An auto-created queue (first push) leases for 60 s, not 300.
AUTO_CREATE_OPTIONS: dict[str, OptionValue] = {**INT_OPTIONS, **BOOL_OPTIONS, "leaseTime": 60}


def inferred_namespace_task(name: str) -> tuple[str | None, str | None]:
    """The namespace and task a push gives the queue it creates.

    Queen's push (``lib/schema/procedures/001_push.sql``) takes them from a
    dotted name: ``billing.invoices.eu`` is namespace ``billing``, task
    ``invoices``. Queen also stores a dotless name whole as the namespace
    (``split_part`` of no dot); here a dotless queue has none, so discovery
    by namespace does not mistake every queue for a namespace of its own.
    """
    if "." not in name:
        return None, None
    namespace, task = name.split(".", 2)[:2]
    return namespace or None, task or None


#: Clamped, never refused (protocol section 10).
CLAMPS: dict[str, tuple[int, int]] = {
    "minPopWaitTime": (0, 60000),
    "retentionSinkHoldMaxSeconds": (60, 31536000),
}
MAX_INT_OPTION = 2**31 - 1
#: ``priority`` orders the queues a namespace or task pop visits (higher
#: first). Queen stores any SQL integer; a small symmetric range leaves
#: room to rank queues either side of the default (0) and refuses values
#: that are surely mistakes (a timestamp, a size).
PRIORITY_MIN, PRIORITY_MAX = -1000, 1000
#: Refused (never clamped) outside these bounds, instead of 0..MAX_INT_OPTION.
RANGES: dict[str, tuple[int, int]] = {"priority": (PRIORITY_MIN, PRIORITY_MAX)}
#: Options accepted only at their default, with why a value that would
#: change nothing is refused rather than stored as if it did. None today.
UNSUPPORTED: dict[str, str] = {}


def option_value(name: str, value: object) -> OptionValue:
    """The value option ``name`` stores for ``value``.

    Clamps the options in ``CLAMPS``; raises ``InvalidArgument`` for an
    integer option outside its ``RANGES`` entry (else 0..``MAX_INT_OPTION``), and ``TypeError`` for an
    unknown option or a value of the wrong Python type (the wire parser
    refuses those before they get here).
    """
    if name in INT_OPTIONS:
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"option {name} takes an int, not {value!r}")
        if name in CLAMPS:
            low, high = CLAMPS[name]
            value = max(low, min(high, value))
        low, high = RANGES.get(name, (0, MAX_INT_OPTION))
        if value < low or value > high:
            raise InvalidArgument(f"option {name} must be from {low} to {high}")
        if value != INT_OPTIONS[name] and name in UNSUPPORTED:
            raise InvalidArgument(f"option {name} is not supported: {UNSUPPORTED[name]}; send {INT_OPTIONS[name]}")
        return value
    if name in BOOL_OPTIONS:
        if not isinstance(value, bool):
            raise TypeError(f"option {name} takes a bool, not {value!r}")
        return value
    raise TypeError(f"no option {name}")


@dataclass(frozen=True)
class QueueOptions:
    """The options a configure sets, in the order given.

    Each change is ``(option name, value)``; a value of None restores the
    option's default. Values are checked (and clamped) by ``option_value``
    on construction.
    """

    changes: tuple[tuple[str, OptionValue | None], ...] = ()

    def __post_init__(self) -> None:
        checked = tuple((n, None if v is None else option_value(n, v)) for n, v in self.changes)
        object.__setattr__(self, "changes", checked)


def merge_options(current: Mapping[str, Any], options: QueueOptions, *, replace: bool) -> dict[str, OptionValue]:
    """Every option's value after ``options`` over ``current``.

    ``replace`` starts from the defaults instead of ``current``; an option
    set to None takes its default.
    """
    defaults: dict[str, OptionValue] = {**INT_OPTIONS, **BOOL_OPTIONS}
    result = dict(defaults) if replace else {**defaults, **current}
    for name, value in options.changes:
        result[name] = defaults[name] if value is None else value
    return result
