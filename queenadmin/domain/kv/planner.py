"""Deciding a call's writes, with no database: the KV store's rules.

``decide`` is the one statement of what each write does against the row it
finds (live, expired or none). The transactional path runs it on rows read
under the keys' locks; the one-statement PostgreSQL paths
(``store/postgres.py``) are shortcuts for the cases named by
``fast_path_of``, each returning nothing (and falling back to this planner)
whenever the row is not in the one state it handles. A test runs every op
through both paths and compares (``tests/unit/test_kv_paths.py``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, Literal

from queenadmin.domain.kv.ops import (
    KVCheck,
    KVDelete,
    KVIncr,
    KVOp,
    KVPut,
    KVRow,
    KVWrite,
    Reason,
    WriteResult,
    check_incr_number,
    incr_sum,
)
from queenadmin.errors import KVConflict


class Stored:
    """A row as read inside a write, live or not.

    The value is decoded only when something asks for ``row``: a blind put
    over an existing key needs the version and dates, not the old value.
    """

    __slots__ = (
        "_row",
        "created_at",
        "expires_at",
        "key",
        "live",
        "namespace",
        "pk",
        "updated_at",
        "value_json",
        "version",
    )

    def __init__(
        self,
        *,
        pk: int,
        namespace: str,
        key: str,
        value_json: str,
        version: int,
        expires_at: datetime | None,
        created_at: datetime,
        updated_at: datetime,
        now: datetime,
    ) -> None:
        self.pk = pk
        self.namespace = namespace
        self.key = key
        self.value_json = value_json
        self.version = version
        self.expires_at = expires_at
        self.created_at = created_at
        self.updated_at = updated_at
        self.live = is_live(expires_at, now)
        self._row: KVRow | None = None

    @property
    def row(self) -> KVRow:
        if self._row is None:
            self._row = KVRow(
                namespace=self.namespace,
                key=self.key,
                value=json.loads(self.value_json),
                version=self.version,
                expires_at=self.expires_at,
                created_at=self.created_at,
                updated_at=self.updated_at,
            )
        return self._row


def is_live(expires_at: datetime | None, now: datetime) -> bool:
    return expires_at is None or expires_at > now


def expires(ttl: Any, now: datetime) -> datetime | None:
    return None if ttl is None else now + ttl


def decimal_json(value: Decimal) -> str:
    """JSON text for a decimal: an integer when integral, else plain digits."""
    if value == value.to_integral_value():
        return str(int(value))
    text = format(value, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _exact(number: int | float) -> Decimal:
    # A float by its shortest repr: 0.1 is 0.1, not 0.1000000000000000055...
    return Decimal(repr(number)) if isinstance(number, float) else Decimal(number)


@dataclass
class Upsert:
    """A row to write; its version is drawn after every decision is made."""

    namespace: str
    key: str
    value_json: str
    expires_at: datetime | None
    created_at: datetime
    version: int = 0
    #: The command that wrote it, for the key's history.
    op: Literal["put", "incr"] = "put"
    #: ``KVPut.waited_ms``, for a lock's history.
    waited_ms: int | None = None


@dataclass
class Plan:
    """What a call will write, decided before any version is drawn.

    Keys of ``results`` and the first element of each ``upserts`` entry are
    positions in the call.
    """

    results: dict[int, WriteResult] = field(default_factory=dict)
    upserts: list[tuple[int, KVWrite, Upsert, Any]] = field(default_factory=list)
    deletes: list[int] = field(default_factory=list)
    #: Keys a delete removed while live: each is a version of the key's
    #: history (an expired row pruned by a delete is not).
    tombstones: list[tuple[str, str]] = field(default_factory=list)
    #: Position and result of the first required op that did not apply, in
    #: apply order.
    failed: tuple[int, WriteResult] | None = None


#: "No value given" for ``refuse`` (None is a JSON value).
_UNSET: Any = object()


def decide(position: int, op: KVWrite, stored: Stored | None, now: datetime, plan: Plan) -> None:
    """Add what ``op`` does against ``stored`` (None = no row) to ``plan``."""
    live = stored is not None and stored.live
    cur_version = stored.version if stored is not None and live else 0

    def cur_value() -> Any:
        # Decoded on demand: an applied put never looks at the old value.
        return stored.row.value if stored is not None and live else None

    def refuse(reason: Reason, value: Any = _UNSET, version: int = cur_version) -> None:
        if value is _UNSET:
            value = cur_value()
        result = WriteResult(op.name, False, op.key, value, version, reason)
        plan.results[position] = result
        if op.required and plan.failed is None:
            plan.failed = (position, result)

    if isinstance(op, KVCheck):
        if op.expect == 0:
            if live:
                return refuse("exists")
        elif not live:
            return refuse("absent")
        elif cur_version != op.expect:
            return refuse("version")
        plan.results[position] = WriteResult("check", True, op.key, None, op.expect)
        return None

    if isinstance(op, KVDelete):
        if op.expect == 0:
            if live:
                return refuse("exists")
            if stored is not None:
                plan.deletes.append(stored.pk)
            plan.results[position] = WriteResult("delete", True, op.key, None, 0)
            return None
        if not live:
            if stored is not None:
                # An expired row is still pruned by a delete.
                plan.deletes.append(stored.pk)
            return refuse("absent")
        if op.expect is not None and cur_version != op.expect:
            return refuse("version")
        assert stored is not None
        plan.deletes.append(stored.pk)
        plan.tombstones.append((op.namespace, op.key))
        plan.results[position] = WriteResult("delete", True, op.key, cur_value(), cur_version)
        return None

    created_at = stored.created_at if (stored is not None and live) else now

    if isinstance(op, KVPut):
        if op.expect == 0 and live:
            return refuse("exists")
        if op.expect is not None and op.expect > 0:
            if not live:
                return refuse("absent")
            if cur_version != op.expect:
                return refuse("version")
        upsert = Upsert(op.namespace, op.key, op.value_json, expires(op.ttl, now), created_at, waited_ms=op.waited_ms)
        plan.upserts.append((position, op, upsert, json.loads(op.value_json)))
        return None

    assert isinstance(op, KVIncr)
    current = cur_value()
    if live and (isinstance(current, bool) or not isinstance(current, int | float)):
        return refuse("type")
    base = check_incr_number(_exact(current), "the stored value", KVConflict) if live else Decimal(0)
    total = incr_sum(base, op.delta)
    if (op.minimum is not None and total < op.minimum) or (op.maximum is not None and total > op.maximum):
        return refuse("limit", current if live else 0, cur_version)
    text = decimal_json(total)
    # The TTL applies on creation only: a live counter keeps its expiry.
    expires_at = stored.expires_at if (stored is not None and live) else expires(op.ttl, now)
    upsert = Upsert(op.namespace, op.key, text, expires_at, created_at, op="incr")
    plan.upserts.append((position, op, upsert, json.loads(text)))
    return None


FastPath = Literal["put", "create", "cas", "delete"]


def fast_path_of(op: KVOp) -> FastPath | None:
    """Which one-statement form can answer ``op`` alone, if any.

    - ``put``: an unconditional put applies whatever the row's state
      (``decide`` never refuses it), so one upsert answers it always;
    - ``create``: a put that must not exist applies when there is no row at
      all; the statement writes only then, and otherwise reports nothing;
    - ``cas``: a put at a version (``expect`` above 0) applies when the row
      is live at that version; the statement writes only then, and
      otherwise reports nothing;
    - ``delete``: a delete of a live key (at ``expect`` when given) applies;
      the statement deletes only such a row, and otherwise reports nothing.
    A ``required`` flag changes nothing for these: an applied op never
    aborts the call, and a form that reports nothing falls back to
    ``decide``.
    """
    if isinstance(op, KVPut):
        if op.expect is None:
            return "put"
        if op.expect == 0:
            return "create"
        return "cas"
    if isinstance(op, KVDelete) and op.expect != 0:
        return "delete"
    return None
