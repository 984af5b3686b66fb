"""The KV store's commands, results and the rules every caller shares.

Commands are frozen dataclasses, one per operation; the wire parser
(``api/wire/kv.py``) and the in-process API build them, and nothing in the
domain reads a wire dict. The value checks here (namespace, key, value
size, ttl) are the store's own rules, so they hold for every caller.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Context, Decimal, Inexact, InvalidOperation, Overflow
from typing import Any, ClassVar, Literal

from queenadmin.conf import settings
from queenadmin.domain import names
from queenadmin.errors import KVBadRequest, KVConflict, KVPayloadTooLarge

NAMESPACE_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
#: Upper bound on a lifetime (100 years), so an absurd TTL is a refusal,
#: not an overflow.
MAX_TTL = timedelta(days=100 * 365)
MAX_PAGE_LIMIT = 1000
#: Expired rows the reaper deletes per statement. Internal, not a setting
#: (docs/settings.md, "Internal constants").
REAPER_BATCH_SIZE = 500
DEFAULT_PAGE_LIMIT = 100
#: A page of rows stops early once it carries this many value bytes.
PAGE_READ_BUDGET = 4 * 1024 * 1024
#: ``incr`` is exact for every number below 10**INCR_DIGITS in magnitude
#: with at most INCR_DIGITS digits after the point; anything else is
#: refused (Python's default context kept 28 digits: 10**30 + 1 stayed
#: 10**30 and still answered applied).
INCR_DIGITS = 100
#: Enough precision for the sum of any two such numbers, with rounding
#: trapped so that a lost digit can only ever be an error.
INCR_CONTEXT = Context(prec=2 * INCR_DIGITS + 2, traps=[Inexact, InvalidOperation, Overflow])
#: Budgets of a KV call inside a transaction (protocol 5.2).
TXN_MAX_OPS = 64
TXN_MAX_KEYS = 256
#: The namespace whose rows are lock permits (see ``domain/locks``).
LOCKS_NAMESPACE = "queen-locks"

#: Why a write or check did not apply (protocol 2.3).
Reason = Literal["exists", "absent", "version", "limit", "type"]
WriteOpName = Literal["put", "putIfAbsent", "delete", "incr", "check"]


# --------------------------------------------------------------------------
# Commands


@dataclass(frozen=True, slots=True)
class KVGet:
    """Read one key; sees the call's write of it only if that write comes earlier in the call."""

    namespace: str
    key: str


@dataclass(frozen=True, slots=True)
class KVGetMany:
    """Read several keys (distinct, in request order); sees every write of the call."""

    namespace: str
    keys: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class KVGetPrefix:
    """One page of keys under ``prefix`` in byte order, after ``after``."""

    namespace: str
    prefix: str
    after: str = ""
    limit: int = DEFAULT_PAGE_LIMIT
    keys_only: bool = False


@dataclass(frozen=True, slots=True)
class KVPut:
    """Write a value. ``expect``: None = upsert, 0 = must not exist, N = at N.

    ``if_absent`` is the protocol's ``putIfAbsent`` (``expect`` is then 0).
    """

    namespace: str
    key: str
    #: The value as compact JSON text (``db.json_text``), as stored.
    value_json: str
    #: None = forever.
    ttl: timedelta | None
    expect: int | None = None
    required: bool = False
    if_absent: bool = False
    #: A lock permit's acquire only: how long its owner waited for it, kept
    #: in the lock's history (``keep.kept``), never in the permit.
    waited_ms: int | None = None

    def __post_init__(self) -> None:
        check_new_key(self.key)

    @property
    def name(self) -> WriteOpName:
        return "putIfAbsent" if self.if_absent else "put"


@dataclass(frozen=True, slots=True)
class KVDelete:
    """Delete a live key (at version ``expect`` when given; 0 = must be absent)."""

    namespace: str
    key: str
    expect: int | None = None
    required: bool = False

    name: ClassVar[WriteOpName] = "delete"


@dataclass(frozen=True, slots=True)
class KVIncr:
    """Add ``delta`` exactly; refuse past ``minimum``/``maximum``.

    ``ttl`` applies when the counter is created; a live counter keeps its
    expiry.
    """

    namespace: str
    key: str
    delta: Decimal
    ttl: timedelta | None
    minimum: Decimal | None = None
    maximum: Decimal | None = None
    required: bool = False

    name: ClassVar[WriteOpName] = "incr"

    def __post_init__(self) -> None:
        check_new_key(self.key)


def check_incr_number(number: Decimal, what: str, refusal: type[KVBadRequest] = KVBadRequest) -> Decimal:
    """``number`` when ``incr`` can compute with it exactly, else ``refusal``
    (``KVConflict`` for a number the stored value decides)."""
    if not number.is_finite():
        raise refusal(f"{what} must be a finite number")
    if number and (number.adjusted() >= INCR_DIGITS or number.as_tuple().exponent < -INCR_DIGITS):  # type: ignore[operator]
        raise refusal(
            f"{what} is beyond what incr computes exactly (magnitude below 1e{INCR_DIGITS}, "
            f"at most {INCR_DIGITS} decimal places)"
        )
    return number


def incr_sum(base: Decimal, delta: Decimal) -> Decimal:
    """``base + delta``, exactly (both checked by ``check_incr_number``).

    Refuse (``KVConflict``: the stored value decides, not the request) a sum
    beyond the range, or a fraction that a JSON reader (a double) could not
    hold exactly: it would read back rounded.
    """
    total = check_incr_number(INCR_CONTEXT.add(base, delta), "the result", KVConflict)
    if total != total.to_integral_value() and Decimal(repr(float(total))) != total:
        raise KVConflict("the result has more significant digits than a fractional number keeps (17)")
    return total


@dataclass(frozen=True, slots=True)
class KVCheck:
    """Hold while the key is at version ``expect`` (0 = while absent).

    With ``required`` a check that does not hold aborts the whole call
    (``PreconditionFailed``): this is how a lock guards a write.
    """

    namespace: str
    key: str
    expect: int
    required: bool = False

    name: ClassVar[WriteOpName] = "check"


KVRead = KVGet | KVGetMany | KVGetPrefix
KVWrite = KVPut | KVDelete | KVIncr | KVCheck
KVOp = KVRead | KVWrite
#: For ``isinstance``: the commands that write or check a key.
WRITES = (KVPut, KVDelete, KVIncr, KVCheck)
#: The commands that change a key (a ``check`` writes nothing).
CHANGES = (KVPut, KVDelete, KVIncr)


def is_write(op: KVOp) -> bool:
    return isinstance(op, WRITES)


def refuse_permit_changes(ops: Iterable[KVOp]) -> None:
    """Raise ``KVBadRequest`` (``kv_locks_namespace``) if a command changes a lock permit.

    The rows of ``LOCKS_NAMESPACE`` are written by the lock operations
    only (``domain/locks``): a raw put there would take a lock that an
    acquire refused as held, and a raw delete would end another holder's
    lease. Reads and ``check`` (a guard) stay open to every caller.
    """
    for op in ops:
        if isinstance(op, CHANGES) and op.namespace == LOCKS_NAMESPACE:
            raise KVBadRequest(
                f"{LOCKS_NAMESPACE} holds lock permits: they change through the lock operations"
                " (POST /api/v1/locks) only, never through a KV write",
                reason="kv_locks_namespace",
            )


# --------------------------------------------------------------------------
# Results


@dataclass(frozen=True, slots=True)
class KVRow:
    namespace: str
    key: str
    value: Any
    version: int
    expires_at: datetime | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class GetResult:
    key: str
    row: KVRow | None


@dataclass(frozen=True, slots=True)
class GetManyResult:
    rows: tuple[KVRow, ...]
    missing: tuple[str, ...]
    truncated: bool


@dataclass(frozen=True, slots=True)
class PageResult:
    rows: tuple[KVRow, ...]
    truncated: bool
    next_after: str | None
    keys_only: bool


@dataclass(frozen=True, slots=True)
class WriteResult:
    """The answer to a put, putIfAbsent, delete, incr or check.

    ``value`` and ``version`` follow protocol section 2.3: the written (or
    removed) value and version when applied, the current live ones (``None``
    and 0 when absent) when not.
    """

    op: WriteOpName
    applied: bool
    key: str
    value: Any
    version: int
    reason: Reason | None = None


KVResult = GetResult | GetManyResult | PageResult | WriteResult


# --------------------------------------------------------------------------
# The store's rules on names and sizes


def _bad(reason: str, detail: str) -> KVBadRequest:
    return KVBadRequest(detail, reason=reason)


@dataclass(frozen=True, slots=True)
class Limits:
    """The size limits, read from settings once per call (not once per op)."""

    key_bytes: int
    value_bytes: int

    @classmethod
    def current(cls) -> Limits:
        return cls(settings.KV_MAX_KEY_BYTES, settings.KV_MAX_VALUE_BYTES)


def check_namespace(namespace: str) -> str:
    """Return ``namespace`` if it is one, else raise ``kv_bad_namespace``."""
    if not NAMESPACE_RE.fullmatch(namespace):
        raise _bad("kv_bad_namespace", "ns must match ^[a-z0-9][a-z0-9._-]{0,63}$")
    return namespace


def check_stored_namespace(namespace: str) -> str:
    """Return ``namespace`` if a stored row may be under it, else raise
    ``kv_bad_namespace``: for an operator's delete, which must find a row
    in a namespace stored before ``NAMESPACE_RE`` held (a newline, a
    capital), so only the empty text and what no database can hold
    (``names.unstorable``) are refused."""
    fault = names.unstorable(namespace)
    if not namespace or fault is not None:
        raise _bad("kv_bad_namespace", f"ns {fault or 'must be a non-empty string'}")
    return namespace


def check_key(key: str, what: str = "key", *, limits: Limits | None = None) -> str:
    """Return ``key`` if it is one, else raise ``kv_bad_key`` or 413."""
    if not key or "\x00" in key:
        raise _bad("kv_bad_key", f"{what} must be a non-empty string without NUL")
    max_bytes = limits.key_bytes if limits is not None else settings.KV_MAX_KEY_BYTES
    if len(key.encode()) > max_bytes:
        raise KVPayloadTooLarge(f"{what} is over {max_bytes} bytes", reason="kv_key_too_large")
    return key


def check_new_key(key: str, what: str = "key") -> str:
    """Return ``key`` if a row may be written under it (a put or an incr),
    else raise ``kv_bad_key``: the rule of every stored name
    (``domain.names``). Reads and deletes check only ``check_key``, so that
    a key stored before the rule can still be read and deleted."""
    fault = names.fault(key)
    if fault is not None:
        raise _bad("kv_bad_key", f"{what} {fault}")
    return key


def check_value_json(value_json: str, *, limits: Limits | None = None) -> str:
    """Return the value's JSON text if it fits, else raise 413."""
    max_bytes = limits.value_bytes if limits is not None else settings.KV_MAX_VALUE_BYTES
    if len(value_json.encode()) > max_bytes:
        raise KVPayloadTooLarge(f"value is over {max_bytes} bytes", reason="kv_value_too_large")
    return value_json


def check_ttl(ttl: timedelta | None) -> timedelta | None:
    """Return ``ttl`` (None = forever) if positive and within 100 years."""
    if ttl is not None and not timedelta(0) < ttl <= MAX_TTL:
        raise _bad("kv_bad_ttl", f"ttlSeconds must be an integer from 1 to {int(MAX_TTL.total_seconds())}")
    return ttl
