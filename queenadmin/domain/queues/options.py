"""Queue options (protocol section 10): the declaration, the rules on values, merging.

``OPTIONS`` declares every option once: its name, default (whose type is
its kind), label, unit and what it does here. ``INT_OPTIONS`` and
``BOOL_OPTIONS`` are read from it, and so are the API's schema
(``api/wire/configure.py``) and the dashboard's settings table and forms.

Options are stored in ``Queue.options`` under the protocol's own option
names (``leaseTime``, ``retryLimit``...), every option with its value, so
those names are the log's vocabulary for them, not only the wire's.

Where the checks live:

- the wire parser (``api/wire/configure.py``) checks shape and JSON types: the
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


@dataclass(frozen=True)
class Option:
    """One queue option as declared: its stored name, its default on
    configure, and what it does here, for the people who set it (the
    dashboard's settings table reads these, so the table cannot miss one)."""

    #: The protocol's name, stored as is in ``Queue.options``.
    name: str
    #: Its value on configure when not given (an int or a bool: its kind).
    default: OptionValue
    #: A short label ("Lease time").
    label: str
    #: What a value counts ("s", "ms", "messages"); "" for a flag or a rank.
    unit: str
    #: What it does here, one sentence.
    meaning: str
    #: Whether anything here acts on it; False: stored and answered back
    #: (Queen's clients and console read it), with no effect of its own.
    enforced: bool = True

    @property
    def is_flag(self) -> bool:
        return isinstance(self.default, bool)


#: Every queue option, in the order the dashboard shows them; defaults on
#: configure (protocol section 10). ``INT_OPTIONS`` and ``BOOL_OPTIONS``
#: below are read from this one declaration.
OPTIONS: tuple[Option, ...] = (
    Option(
        "leaseTime",
        300,
        "Lease time",
        "s",
        "How long a popped batch stays leased before it is handed out again (0: 60 s).",
    ),
    Option(
        "retryLimit",
        3,
        "Retry limit",
        "",
        "Failed deliveries of a message a consumer group retries before it goes to the dead-letter queue.",
    ),
    Option(
        "retryDelay",
        1000,
        "Retry delay",
        "ms",
        "A failed message is retried at once here; the value is kept for Queen's clients.",
        enforced=False,
    ),
    Option(
        "deadLetterQueue",
        True,
        "Dead-letter queue",
        "",
        "Queen's switch for the DLQ; here a message past its retry limit always goes to the DLQ.",
        enforced=False,
    ),
    Option(
        "dlqAfterMaxRetries",
        True,
        "DLQ after max retries",
        "",
        "Queen's switch for dead-lettering past the retry limit; here it always happens.",
        enforced=False,
    ),
    Option(
        "ttl",
        3600,
        "Time to live",
        "s",
        "Kept for Queen's clients; messages are deleted by the retention windows below.",
        enforced=False,
    ),
    Option(
        "retentionEnabled",
        False,
        "Retention enabled",
        "",
        "Queen's opt-in for the retention windows; needed here only with QUEENADMIN_RETENTION_REQUIRES_ENABLED.",
    ),
    Option("retentionSeconds", 0, "Retention", "s", "Messages older than this are deleted, consumed or not (0: kept)."),
    Option(
        "completedRetentionSeconds",
        0,
        "Completed retention",
        "s",
        "Messages older than this are deleted once every consumer of the partition is past them (0: kept).",
    ),
    Option(
        "maxWaitTimeSeconds",
        0,
        "Max wait time",
        "s",
        "Like retention (the shorter wins), even without retentionEnabled: Queen's eviction (0: off).",
    ),
    Option(
        "priority", 0, "Priority", "", "Pops by namespace or task serve higher-priority queues first (-1000 to 1000)."
    ),
    Option(
        "delayedProcessing",
        0,
        "Delayed processing",
        "s",
        "A message becomes claimable this long after its push; until then it is parked.",
    ),
    Option(
        "windowBuffer",
        0,
        "Window buffer",
        "s",
        "A partition pushed to within this many seconds delivers nothing until it has been quiet that long.",
    ),
    Option(
        "maxSize",
        0,
        "Max size",
        "messages",
        "Most messages the queue holds unconsumed; a push past it fails (0: no cap).",
    ),
    Option(
        "dedupWindowSeconds",
        3600,
        "Dedup window",
        "s",
        "A push whose transactionId the partition took within this window is a duplicate (0: off).",
    ),
    Option(
        "maxQueueSize",
        0,
        "Max queue size",
        "messages",
        "Kept for Queen's console; maxSize is the cap enforced here.",
        enforced=False,
    ),
    Option(
        "minPopWaitTime",
        0,
        "Min pop wait",
        "ms",
        "Kept for Queen's clients (clamped to 0..60000); pops here are not held back by it.",
        enforced=False,
    ),
    Option(
        "encryptionEnabled",
        False,
        "Encryption",
        "",
        "Kept for Queen's clients; payloads are stored as sent here.",
        enforced=False,
    ),
    Option(
        "retentionSinkHold",
        False,
        "Retention sink hold",
        "",
        "Kept for Queen's retention sink, which this server has none of.",
        enforced=False,
    ),
    Option(
        "retentionSinkHoldMaxSeconds",
        604800,
        "Sink hold max",
        "s",
        "Kept for Queen's retention sink (clamped to 60..31536000).",
        enforced=False,
    ),
)

#: Integer options and their defaults on configure (from ``OPTIONS``).
INT_OPTIONS: dict[str, int] = {o.name: o.default for o in OPTIONS if not isinstance(o.default, bool)}
#: Boolean options and their defaults on configure (from ``OPTIONS``).
BOOL_OPTIONS: dict[str, bool] = {o.name: o.default for o in OPTIONS if isinstance(o.default, bool)}
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


@dataclass(frozen=True)
class OptionSetting:
    """One option of a queue: its declaration and the value stored."""

    option: Option
    value: OptionValue

    @property
    def differs(self) -> bool:
        """Whether the value is not the option's default."""
        return self.value != self.option.default or type(self.value) is not type(self.option.default)


def option_settings(stored: Mapping[str, Any]) -> tuple[OptionSetting, ...]:
    """Every declared option with its value in ``stored`` (a queue's
    options), in ``OPTIONS`` order; an option stored before it was declared
    (absent) has its default, as ``merge_options`` reads it."""
    return tuple(OptionSetting(o, stored.get(o.name, o.default)) for o in OPTIONS)
