"""The versioned KV store: the only writer of ``KVEntry``.

Every write draws the next value of one store-wide counter, so a key's
version only rises, across delete and re-create, and a version is a fencing
token. How the draw stays in commit order per key:

- PostgreSQL: every version-assigning statement first holds a per-key
  advisory transaction lock, and draws ``nextval()`` (sequence, CACHE 1)
  only after it. The next writer of the key gets the lock only after the
  previous one committed, so its draw is larger. Measured safe in
  ``shared/pg-version-ordering.md`` section 4.1 (0 inversions in 1.09M
  writes); the plain ``INSERT ... VALUES (nextval())`` upsert is not.
- SQLite: one writer at a time (``BEGIN IMMEDIATE``); a counter row is
  bumped inside the write transaction.

Liveness is exact and lazy: a row is live while ``expires_at > now``;
expired rows are invisible to reads and never block ``expect: 0``. The
reaper deletes them in small batches.

A call (``kv_call``) is a list of operations applied as one transaction in
the protocol's order: single-key gets first (they see the state before the
call), then writes and checks sorted by (namespace, key), then multi-key
reads, which see the call's own writes. Results come back in request order.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any, Literal, TypeGuard

import psycopg
from django.db import connection, transaction
from psycopg import Cursor as PgCursor

from queenadmin.conf import settings
from queenadmin.domain import clock, events
from queenadmin.errors import KVBadRequest, KVPayloadTooLarge, PreconditionFailed

TABLE = "queenadmin_kventry"
SEQUENCE = "queenadmin_kv_version"
#: First argument of the two-int advisory lock form, so our key locks live
#: apart from any other advisory-lock user of the database.
ADVISORY_CLASS = 0x51AD

NAMESPACE_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
#: Upper bound on ttlSeconds (100 years), so an absurd TTL is a 400, not an
#: overflow.
MAX_TTL_SECONDS = 100 * 365 * 86400
MAX_PAGE_LIMIT = 1000
DEFAULT_PAGE_LIMIT = 100
#: A page of rows stops early once it carries this many value bytes.
PAGE_READ_BUDGET = 4 * 1024 * 1024
TXN_MAX_OPS = 64
#: The namespace whose rows are lock permits (see ``domain/locks``).
LOCKS_NAMESPACE = "queen-locks"
TXN_MAX_KEYS = 256

Reason = Literal["exists", "absent", "version", "limit", "type"]
WRITE_OPS = frozenset({"put", "putIfAbsent", "delete", "incr", "check"})
ALL_OPS = frozenset({"get", "getMany", "getPrefix"}) | WRITE_OPS
_TENANT_FIELDS = ("tenant", "tenantId", "_tenant")


# --------------------------------------------------------------------------
# Operations and results


@dataclass(frozen=True)
class KVOp:
    """One validated operation of a call. ``index`` is its request position."""

    index: int
    op: str
    namespace: str
    key: str = ""
    keys: tuple[str, ...] = ()
    prefix: str = ""
    after: str = ""
    limit: int = DEFAULT_PAGE_LIMIT
    keys_only: bool = False
    #: Compact JSON text of the value (put, putIfAbsent).
    value_json: str = "null"
    #: None = forever; only meaningful for put, putIfAbsent and incr.
    ttl: timedelta | None = None
    expect: int | None = None
    required: bool = False
    delta: Decimal = Decimal(0)
    minimum: Decimal | None = None
    maximum: Decimal | None = None

    @property
    def is_write(self) -> bool:
        return self.op in WRITE_OPS


@dataclass(frozen=True)
class KVRow:
    namespace: str
    key: str
    value: Any
    version: int
    expires_at: datetime | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class GetResult:
    index: int
    key: str
    row: KVRow | None


@dataclass(frozen=True)
class GetManyResult:
    index: int
    rows: tuple[KVRow, ...]
    missing: tuple[str, ...]
    truncated: bool


@dataclass(frozen=True)
class PageResult:
    index: int
    rows: tuple[KVRow, ...]
    truncated: bool
    next_after: str | None
    keys_only: bool


@dataclass(frozen=True)
class WriteResult:
    """The answer to a put, putIfAbsent, delete, incr or check.

    ``value`` and ``version`` follow protocol section 2.3: the written (or
    removed) value and version when applied, the current live ones (``None``
    and 0 when absent) when not.
    """

    index: int
    op: str
    applied: bool
    key: str
    value: Any
    version: int
    reason: Reason | None = None


KVResult = GetResult | GetManyResult | PageResult | WriteResult


# --------------------------------------------------------------------------
# Parsing the wire language (shared by /api/v1/kv, locks and transactions)


def _bad(reason: str, detail: str) -> KVBadRequest:
    return KVBadRequest(detail, reason=reason)


def is_json_int(value: Any) -> TypeGuard[int]:
    """A JSON integer: an ``int`` that is not a ``bool``."""
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | Decimal) and not isinstance(value, bool)


def to_decimal(value: Any) -> Decimal:
    """An exact decimal for a JSON number (floats by their shortest repr)."""
    if isinstance(value, Decimal):
        return value
    if isinstance(value, float):
        return Decimal(repr(value))
    return Decimal(value)


def decimal_json(value: Decimal) -> str:
    """JSON text for a decimal: an integer when integral, else plain digits."""
    if value == value.to_integral_value():
        return str(int(value))
    text = format(value, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def dumps_value(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def check_namespace(ns: Any) -> str:
    if not isinstance(ns, str) or not NAMESPACE_RE.match(ns):
        raise _bad("kv_bad_namespace", "ns must match ^[a-z0-9][a-z0-9._-]{0,63}$")
    return ns


@dataclass(frozen=True)
class _Limits:
    """The size limits, read from settings once per call (not once per op)."""

    key_bytes: int
    value_bytes: int

    @classmethod
    def current(cls) -> _Limits:
        return cls(settings.KV_MAX_KEY_BYTES, settings.KV_MAX_VALUE_BYTES)


def check_key(key: Any, what: str = "key", *, limits: _Limits | None = None) -> str:
    if not isinstance(key, str):
        raise _bad("kv_bad_request", f"{what} must be a string")
    if not key or "\x00" in key:
        raise _bad("kv_bad_key", f"{what} must be a non-empty string without NUL")
    max_bytes = limits.key_bytes if limits is not None else settings.KV_MAX_KEY_BYTES
    if len(key.encode()) > max_bytes:
        raise KVPayloadTooLarge(f"{what} is over {max_bytes} bytes", reason="kv_key_too_large")
    return key


def _expiry(raw: dict[str, Any]) -> timedelta | None:
    ttl = raw.get("ttlSeconds")
    forever = raw.get("forever")
    if forever is not None and not isinstance(forever, bool):
        raise _bad("kv_bad_request", "forever must be a boolean")
    if (ttl is None) == (forever is not True):
        raise _bad("kv_expiry_not_specified", "give exactly one of ttlSeconds or forever: true")
    if forever:
        return None
    if not is_json_int(ttl) or ttl <= 0 or ttl > MAX_TTL_SECONDS:
        raise _bad("kv_bad_ttl", f"ttlSeconds must be an integer from 1 to {MAX_TTL_SECONDS}")
    return timedelta(seconds=ttl)


def _expect(raw: dict[str, Any], *, mandatory: bool = False) -> int | None:
    if "expect" not in raw or raw["expect"] is None:
        if mandatory:
            raise _bad("kv_bad_expect", "expect is required")
        return None
    expect = raw["expect"]
    if not is_json_int(expect) or expect < 0:
        raise _bad("kv_bad_expect", "expect must be an integer >= 0")
    return int(expect)


def _required(raw: dict[str, Any]) -> bool:
    required = raw.get("required", False)
    if required is None:
        return False
    if not isinstance(required, bool):
        raise _bad("kv_bad_request", "required must be a boolean")
    return required


def _bound(raw: dict[str, Any], name: str) -> Decimal | None:
    value = raw.get(name)
    if value is None:
        return None
    if not _is_number(value):
        raise _bad("kv_bad_request", f"{name} must be a number")
    result = to_decimal(value)
    if not result.is_finite():
        raise _bad("kv_bad_request", f"{name} must be a finite number")
    return result


def _page_limit(raw: dict[str, Any]) -> int:
    limit = raw.get("limit")
    if limit is None:
        return DEFAULT_PAGE_LIMIT
    if not _is_number(limit):
        raise _bad("kv_bad_request", "limit must be a number")
    # Clamped, never refused (protocol 2.10).
    return int(max(1, min(MAX_PAGE_LIMIT, int(limit))))


def parse_op(index: int, raw: Any, *, in_transaction: bool = False, limits: _Limits | None = None) -> KVOp:
    """Validate one wire operation; raise ``KVBadRequest`` with its reason."""
    limits = limits or _Limits.current()
    if not isinstance(raw, dict):
        raise _bad("kv_bad_request", f"operation {index} is not an object")
    if any(name in raw for name in _TENANT_FIELDS):
        raise _bad("kv_tenant_not_an_input", "the tenant is never a body field")
    op = raw.get("op")
    if not isinstance(op, str) or op not in ALL_OPS:
        raise _bad("kv_unknown_op", f"op must be one of {', '.join(sorted(ALL_OPS))}")
    ns = check_namespace(raw.get("ns"))
    if op == "getPrefix":
        if in_transaction:
            raise _bad(
                "kv_get_prefix_not_allowed_in_transaction",
                "getPrefix is not allowed inside a transaction",
            )
        prefix = raw.get("prefix")
        if not isinstance(prefix, str) or not prefix:
            raise _bad("kv_prefix_required", "getPrefix needs a non-empty prefix")
        if "\x00" in prefix:
            raise _bad("kv_bad_key", "prefix must not contain NUL")
        after = raw.get("after")
        if after is not None and not isinstance(after, str):
            raise _bad("kv_bad_request", "after must be a string")
        keys_only = raw.get("keysOnly", False)
        if keys_only is not None and not isinstance(keys_only, bool):
            raise _bad("kv_bad_request", "keysOnly must be a boolean")
        return KVOp(
            index=index,
            op=op,
            namespace=ns,
            prefix=prefix,
            after=after or "",
            limit=_page_limit(raw),
            keys_only=bool(keys_only),
        )
    if op == "getMany":
        keys = raw.get("keys")
        if not isinstance(keys, list) or not keys:
            raise _bad("kv_bad_request", "getMany needs a non-empty keys array")
        checked = tuple(dict.fromkeys(check_key(k, "keys[]", limits=limits) for k in keys))
        return KVOp(index=index, op=op, namespace=ns, keys=checked)
    key = check_key(raw.get("key"), limits=limits)
    if op == "get":
        return KVOp(index=index, op=op, namespace=ns, key=key)
    required = _required(raw)
    if op == "put" or op == "putIfAbsent":
        if "value" not in raw:
            raise _bad("kv_bad_request", f"{op} needs a value")
        try:
            value_json = dumps_value(raw["value"])
        except (TypeError, ValueError) as exc:
            raise _bad("kv_bad_request", "value is not valid JSON") from exc
        if len(value_json.encode()) > limits.value_bytes:
            raise KVPayloadTooLarge(f"value is over {limits.value_bytes} bytes", reason="kv_value_too_large")
        expect = _expect(raw)
        if op == "putIfAbsent":
            if expect not in (None, 0):
                raise _bad("kv_bad_expect", "putIfAbsent takes no expect other than 0")
            expect = 0
        return KVOp(
            index=index,
            op=op,
            namespace=ns,
            key=key,
            value_json=value_json,
            ttl=_expiry(raw),
            expect=expect,
            required=required,
        )
    if op == "delete":
        return KVOp(index=index, op=op, namespace=ns, key=key, expect=_expect(raw), required=required)
    if op == "check":
        return KVOp(
            index=index,
            op=op,
            namespace=ns,
            key=key,
            expect=_expect(raw, mandatory=True),
            required=required,
        )
    # incr
    if raw.get("expect") is not None:
        raise _bad("kv_bad_expect", "incr takes no expect")
    delta = raw.get("delta")
    if not _is_number(delta):
        raise _bad("kv_bad_request", "incr needs a numeric delta")
    delta_dec = to_decimal(delta)
    if not delta_dec.is_finite():
        raise _bad("kv_bad_request", "delta must be a finite number")
    return KVOp(
        index=index,
        op=op,
        namespace=ns,
        key=key,
        ttl=_expiry(raw),
        required=required,
        delta=delta_dec,
        minimum=_bound(raw, "min"),
        maximum=_bound(raw, "max"),
    )


def parse_ops(raw_ops: Any, *, in_transaction: bool = False) -> list[KVOp]:
    """Validate a whole call: every op, the op and key budgets, duplicates.

    Validation is all-or-nothing: one bad op refuses the whole call.
    """
    if not isinstance(raw_ops, list):
        raise _bad("kv_bad_body", "body must be an array or {operations: [...]}")
    max_ops = TXN_MAX_OPS if in_transaction else settings.KV_MAX_OPS_PER_CALL
    if len(raw_ops) > max_ops:
        raise _bad("kv_too_many_ops", f"at most {max_ops} operations per call")
    limits = _Limits.current()
    ops = [parse_op(i, raw, in_transaction=in_transaction, limits=limits) for i, raw in enumerate(raw_ops)]
    max_keys = TXN_MAX_KEYS if in_transaction else settings.KV_MAX_KEYS_PER_CALL
    key_count = sum(op.limit if op.op == "getPrefix" else len(op.keys) if op.op == "getMany" else 1 for op in ops)
    if key_count > max_keys:
        raise _bad("kv_too_many_keys", f"at most {max_keys} keys per call")
    seen: set[tuple[str, str]] = set()
    for op in ops:
        if op.is_write:
            ident = (op.namespace, op.key)
            if ident in seen:
                raise _bad(
                    "kv_duplicate_key_in_call",
                    f"{op.namespace}/{op.key} is written or checked twice in one call",
                )
            seen.add(ident)
    return ops


# --------------------------------------------------------------------------
# Storage helpers


def _aware(moment: datetime | None) -> datetime | None:
    """The moment in UTC, with ``datetime.UTC`` as its tzinfo."""
    if moment is None or moment.tzinfo is UTC:
        return moment
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def _db_time(moment: datetime | None) -> Any:
    return connection.ops.adapt_datetimefield_value(moment)


_COLUMNS = "id, namespace, key, value_json, version, expires_at, created_at, updated_at"


_EXPLICIT_PREPARE_ONLY = 2**62
_TIMESTAMPTZ_LOADER: Any = psycopg.adapters.get_loader(
    psycopg.adapters.types["timestamptz"].oid,
    psycopg.pq.Format.TEXT,
)


def _pg_run(sql: str, params: Sequence[Any], *, prepare: bool = True) -> list[tuple[Any, ...]]:
    """Run one hot PostgreSQL statement as a prepared statement; its rows.

    Django's cursors bind parameters on the client and never prepare, so
    PostgreSQL parses and plans every statement again: measured here, the
    single-put upsert cost it 167 us of CPU unprepared against 90 us
    prepared (bench/README.md). This runs on Django's connection, inside
    its transaction (or autocommit), with Django's error wrapping; psycopg
    keeps the prepared statements per connection.

    Only statements whose plan cannot go bad are prepared: after five runs
    PostgreSQL may keep a generic plan, and one made while the table was
    nearly empty is a sequential scan (measured: 12 ms of PostgreSQL CPU
    per 100-key read instead of 1.5). ``prepare=False`` still binds on the
    server, planned for the actual values every time.
    """
    with connection.cursor():  # connect and health-check the Django way
        pass
    pg = connection.connection
    if pg.prepare_threshold is None:
        # Django sets None (no automatic preparing), which makes psycopg
        # ignore prepare=True too. A threshold nothing reaches keeps the
        # automatic kind off for everyone else and lets ours through.
        pg.prepare_threshold = _EXPLICIT_PREPARE_ONLY
    with connection.wrap_database_errors, PgCursor(pg) as cursor:
        # psycopg's C timestamptz loader, not Django's pure-Python one
        # (a tenth of the cost; a 100-row read parses 200 of them). Its
        # results are in the session time zone; _aware() makes them UTC.
        cursor.adapters.register_loader("timestamptz", _TIMESTAMPTZ_LOADER)
        cursor.execute(sql, params, prepare=prepare)
        return cursor.fetchall() if cursor.description is not None else []


class _Stored:
    """A row as read inside a write, whether live or not.

    The value is decoded only when something asks for ``row``: a blind put
    over an existing key needs the version and dates, not the old value.
    """

    __slots__ = ("_record", "_row", "created_at", "expires_at", "live", "pk", "version")

    def __init__(self, record: Sequence[Any], now: datetime) -> None:
        self.pk = int(record[0])
        self.version = int(record[4])
        self.expires_at = _aware(record[5])
        self.created_at: datetime = _aware(record[6])  # type: ignore[assignment]
        self.live = _is_live(self.expires_at, now)
        self._record = record
        self._row: KVRow | None = None

    @property
    def row(self) -> KVRow:
        if self._row is None:
            self._row = _row_from_db(self._record)
        return self._row


def _row_from_db(record: Sequence[Any]) -> KVRow:
    return KVRow(
        namespace=record[1],
        key=record[2],
        value=json.loads(record[3]),
        version=int(record[4]),
        expires_at=_aware(record[5]),
        created_at=_aware(record[6]),  # type: ignore[arg-type]
        updated_at=_aware(record[7]),  # type: ignore[arg-type]
    )


def _is_live(expires_at: datetime | None, now: datetime) -> bool:
    return expires_at is None or expires_at > now


def _read_keys(cursor: Any, idents: Iterable[tuple[str, str]], now: datetime) -> dict[tuple[str, str], _Stored]:
    """Every stored row (live or expired) for the given keys."""
    found: dict[tuple[str, str], _Stored] = {}
    by_ns: dict[str, list[str]] = {}
    for ns, key in idents:
        by_ns.setdefault(ns, []).append(key)
    postgres = connection.vendor == "postgresql"
    for ns, keys in by_ns.items():
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            if postgres:
                # The keys as one JSON parameter: a short constant statement
                # (psycopg re-parses a long one on every call) and one C-speed
                # encode instead of quoting every array element in Python.
                records = _pg_run(
                    f"SELECT {_COLUMNS} FROM {TABLE} WHERE namespace = %s "
                    "AND key = ANY(ARRAY(SELECT jsonb_array_elements_text(%s::jsonb)))",
                    [ns, json.dumps(chunk)],
                    prepare=False,  # a table scan: see _pg_run
                )
            else:
                marks = ", ".join(["%s"] * len(chunk))
                cursor.execute(
                    f"SELECT {_COLUMNS} FROM {TABLE} WHERE namespace = %s AND key IN ({marks})",
                    [ns, *chunk],
                )
                records = cursor.fetchall()
            for record in records:
                found[(ns, record[2])] = _Stored(record, now)
    return found


def _lock_keys(cursor: Any, idents: Iterable[tuple[str, str]]) -> None:
    """Take the per-key advisory locks (PostgreSQL), in one fixed order.

    SQLite needs none: its write transaction is exclusive from BEGIN.
    """
    if connection.vendor != "postgresql":
        return
    names = sorted({f"{ns}/{key}" for ns, key in idents})
    if not names:
        return
    # The subquery sorts the hashes first, so every transaction takes its
    # locks in the same order and two multi-key writers cannot deadlock.
    _pg_run(
        "SELECT count(pg_advisory_xact_lock(%s, h)) FROM "
        "(SELECT DISTINCT hashtext(n) AS h FROM unnest(%s::text[]) AS n ORDER BY 1) AS s",
        [ADVISORY_CLASS, names],
    )


def draw_versions(cursor: Any, count: int) -> list[int]:
    """Draw ``count`` new versions from the store-wide counter, ascending.

    Call only while holding the locks of every key they will stamp.
    """
    if count <= 0:
        return []
    if connection.vendor == "postgresql":
        drawn = _pg_run(f"SELECT nextval('{SEQUENCE}') FROM generate_series(1, %s::int)", [count])
        return sorted(int(r[0]) for r in drawn)
    cursor.execute(
        "UPDATE queenadmin_versioncounter SET value = value + %s WHERE id = 1 RETURNING value",
        [count],
    )
    record = cursor.fetchone()
    if record is None:
        cursor.execute("INSERT INTO queenadmin_versioncounter (id, value) VALUES (1, %s)", [count])
        top = count
    else:
        top = int(record[0])
    return list(range(top - count + 1, top + 1))


@dataclass
class _Upsert:
    namespace: str
    key: str
    value_json: str
    expires_at: datetime | None
    created_at: datetime
    version: int = 0


def _write_upserts(cursor: Any, upserts: list[_Upsert], now: datetime) -> None:
    if not upserts:
        return
    if connection.vendor == "postgresql":
        # The rows as one JSON parameter (see _read_keys): one short statement
        # whatever the batch size. Keys never hold NUL; value_json travels as
        # a JSON string, so its own escapes survive verbatim.
        rows = [
            [
                u.namespace,
                u.key,
                u.value_json,
                u.version,
                None if u.expires_at is None else u.expires_at.isoformat(),
                u.created_at.isoformat(),
            ]
            for u in upserts
        ]
        _pg_run(
            f"INSERT INTO {TABLE} (namespace, key, value_json, version, expires_at, created_at, updated_at) "
            "SELECT r->>0, r->>1, r->>2, (r->>3)::bigint, (r->>4)::timestamptz, (r->>5)::timestamptz, %s "
            "FROM jsonb_array_elements(%s::jsonb) AS r "
            "ON CONFLICT (namespace, key) DO UPDATE SET "
            "value_json = excluded.value_json, version = excluded.version, "
            "expires_at = excluded.expires_at, created_at = excluded.created_at, "
            "updated_at = excluded.updated_at",
            [now, json.dumps(rows, ensure_ascii=False)],
        )
        return
    for start in range(0, len(upserts), 200):
        chunk = upserts[start : start + 200]
        marks = ", ".join(["(%s, %s, %s, %s, %s, %s, %s)"] * len(chunk))
        params: list[Any] = []
        stamp = _db_time(now)
        for item in chunk:
            params += [
                item.namespace,
                item.key,
                item.value_json,
                item.version,
                _db_time(item.expires_at),
                _db_time(item.created_at),
                stamp,
            ]
        cursor.execute(
            f"INSERT INTO {TABLE} (namespace, key, value_json, version, expires_at, created_at, updated_at) "
            f"VALUES {marks} ON CONFLICT (namespace, key) DO UPDATE SET "
            "value_json = excluded.value_json, version = excluded.version, "
            "expires_at = excluded.expires_at, created_at = excluded.created_at, "
            "updated_at = excluded.updated_at",
            params,
        )


def _delete_pks(cursor: Any, pks: list[int]) -> None:
    if pks and connection.vendor == "postgresql":
        cursor.execute(f"DELETE FROM {TABLE} WHERE id = ANY(%s)", [pks])
        return
    for start in range(0, len(pks), 500):
        chunk = pks[start : start + 500]
        cursor.execute(f"DELETE FROM {TABLE} WHERE id IN ({', '.join(['%s'] * len(chunk))})", chunk)


# --------------------------------------------------------------------------
# Deciding writes


def _expires(op: KVOp, now: datetime) -> datetime | None:
    return None if op.ttl is None else now + op.ttl


#: "No value given" for ``refuse`` (None is a JSON value).
_UNSET: Any = object()


@dataclass
class _Plan:
    """What a call will write, decided before any version is drawn."""

    results: dict[int, WriteResult] = field(default_factory=dict)
    upserts: list[tuple[KVOp, _Upsert, Any]] = field(default_factory=list)
    deletes: list[int] = field(default_factory=list)
    #: The first required op that did not apply, in apply order.
    failed: WriteResult | None = None


def _decide(op: KVOp, stored: _Stored | None, now: datetime, plan: _Plan) -> None:
    live = stored is not None and stored.live
    cur_version = stored.version if stored is not None and live else 0

    def cur_value() -> Any:
        # Decoded on demand: an applied put never looks at the old value.
        return stored.row.value if stored is not None and live else None

    def refuse(reason: Reason, value: Any = _UNSET, version: int = cur_version) -> None:
        if value is _UNSET:
            value = cur_value()
        result = WriteResult(op.index, op.op, False, op.key, value, version, reason)
        plan.results[op.index] = result
        if op.required and plan.failed is None:
            plan.failed = result

    if op.op == "check":
        if op.expect == 0:
            if live:
                return refuse("exists")
        elif not live:
            return refuse("absent")
        elif cur_version != op.expect:
            return refuse("version")
        plan.results[op.index] = WriteResult(op.index, op.op, True, op.key, None, int(op.expect or 0))
        return None

    if op.op == "delete":
        if op.expect == 0:
            if live:
                return refuse("exists")
            if stored is not None:
                plan.deletes.append(stored.pk)
            plan.results[op.index] = WriteResult(op.index, op.op, True, op.key, None, 0)
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
        plan.results[op.index] = WriteResult(op.index, op.op, True, op.key, cur_value(), cur_version)
        return None

    created_at = stored.created_at if (stored is not None and live) else now

    if op.op in ("put", "putIfAbsent"):
        if op.expect == 0 and live:
            return refuse("exists")
        if op.expect is not None and op.expect > 0:
            if not live:
                return refuse("absent")
            if cur_version != op.expect:
                return refuse("version")
        upsert = _Upsert(op.namespace, op.key, op.value_json, _expires(op, now), created_at)
        plan.upserts.append((op, upsert, json.loads(op.value_json)))
        return None

    # incr
    current = cur_value()
    if live and (isinstance(current, bool) or not isinstance(current, int | float)):
        return refuse("type")
    base = to_decimal(current) if live else Decimal(0)
    try:
        total = base + op.delta
    except InvalidOperation:  # pragma: no cover - finite inputs only
        return refuse("type")
    if (op.minimum is not None and total < op.minimum) or (op.maximum is not None and total > op.maximum):
        return refuse("limit", current if live else 0, cur_version)
    text = decimal_json(total)
    # The TTL applies on creation only: a live counter keeps its expiry.
    expires_at = stored.expires_at if (stored is not None and live) else _expires(op, now)
    upsert = _Upsert(op.namespace, op.key, text, expires_at, created_at)
    plan.upserts.append((op, upsert, json.loads(text)))
    return None


# --------------------------------------------------------------------------
# Reads


def _get_many(cursor: Any, op: KVOp, now: datetime) -> GetManyResult:
    stored = _read_keys(cursor, ((op.namespace, k) for k in op.keys), now)
    rows = sorted((s.row for s in stored.values() if s.live), key=lambda r: r.key.encode())
    present = {r.key for r in rows}
    missing = tuple(k for k in op.keys if k not in present)
    return GetManyResult(op.index, tuple(rows), missing, False)


def prefix_upper_bound(prefix: str) -> str | None:
    """The smallest string above every string that starts with ``prefix``.

    Code point order is UTF-8 byte order, so this bounds a byte-order range.
    None when no such string exists (the prefix is all U+10FFFF).
    """
    chars = list(prefix)
    while chars:
        point = ord(chars.pop()) + 1
        if 0xD800 <= point <= 0xDFFF:
            point = 0xE000
        if point <= 0x10FFFF:
            return "".join(chars) + chr(point)
    return None


def read_page(
    cursor: Any,
    *,
    namespace: str,
    prefix: str,
    after: str,
    limit: int,
    now: datetime | None,
    index: int = 0,
    keys_only: bool = False,
) -> PageResult:
    """One page of keys under ``prefix`` (all keys when empty), in byte order.

    ``now=None`` includes expired rows (the console's ``includeExpired``).
    """
    where = ["namespace = %s"]
    params: list[Any] = [namespace]
    if after and after >= prefix:
        where.append("key > %s")
        params.append(after)
    elif prefix:
        where.append("key >= %s")
        params.append(prefix)
    upper = prefix_upper_bound(prefix) if prefix else None
    if upper is not None:
        # A byte-order range instead of LIKE: LIKE is case-insensitive on
        # SQLite and treats % and _ as wildcards; the range uses the index.
        where.append("key < %s")
        params.append(upper)
    if now is not None:
        where.append("(expires_at IS NULL OR expires_at > %s)")
        params.append(_db_time(now))
    cursor.execute(
        f"SELECT {_COLUMNS} FROM {TABLE} WHERE {' AND '.join(where)} ORDER BY key LIMIT %s",
        [*params, limit + 1],
    )
    records = cursor.fetchall()
    rows: list[KVRow] = []
    budget = 0
    truncated = len(records) > limit
    for record in records[:limit]:
        budget += len(record[3])
        if rows and budget > PAGE_READ_BUDGET:
            truncated = True
            break
        rows.append(_row_from_db(record))
    next_after = rows[-1].key if truncated and rows else None
    return PageResult(index, tuple(rows), truncated, next_after, keys_only)


def _run_reads(cursor: Any, ops: Sequence[KVOp], now: datetime, out: dict[int, KVResult]) -> None:
    gets = [op for op in ops if op.op == "get"]
    if gets:
        stored = _read_keys(cursor, ((op.namespace, op.key) for op in gets), now)
        for op in gets:
            s = stored.get((op.namespace, op.key))
            out[op.index] = GetResult(op.index, op.key, s.row if s is not None and s.live else None)


def _run_multi_reads(cursor: Any, ops: Sequence[KVOp], now: datetime, out: dict[int, KVResult]) -> None:
    for op in ops:
        if op.op == "getMany":
            out[op.index] = _get_many(cursor, op, now)
        elif op.op == "getPrefix":
            out[op.index] = read_page(
                cursor,
                namespace=op.namespace,
                prefix=op.prefix,
                after=op.after,
                limit=op.limit,
                now=now,
                index=op.index,
                keys_only=op.keys_only,
            )


# --------------------------------------------------------------------------
# Calls


def apply_ops(ops: Sequence[KVOp], *, now: datetime) -> list[KVResult]:
    """Apply a validated call inside the caller's transaction.

    For callers that own the transaction (``kv_call``, transactions). Raises
    ``PreconditionFailed`` when a ``required`` op does not apply; the caller
    must then roll back (the exception leaving ``atomic`` does that).
    """
    assert connection.in_atomic_block, "apply_ops needs the caller's transaction"
    out: dict[int, KVResult] = {}
    writes = sorted((op for op in ops if op.is_write), key=lambda op: (op.namespace, op.key.encode(), op.index))
    multi = [op for op in ops if op.op in ("getMany", "getPrefix")]
    with connection.cursor() as cursor:
        idents = [(op.namespace, op.key) for op in writes]
        _lock_keys(cursor, idents)
        single = [op for op in ops if op.op == "get"]
        stored = _read_keys(cursor, idents + [(op.namespace, op.key) for op in single], now)
        for op in single:
            s = stored.get((op.namespace, op.key))
            out[op.index] = GetResult(op.index, op.key, s.row if s is not None and s.live else None)
        plan = _Plan()
        for op in writes:
            _decide(op, stored.get((op.namespace, op.key)), now, plan)
        if plan.failed is not None:
            raise PreconditionFailed(
                failed_index=plan.failed.index,
                kv_reason=plan.failed.reason or "version",
                version=plan.failed.version,
                value=plan.failed.value,
            )
        versions = draw_versions(cursor, len(plan.upserts))
        for (op, upsert, value), version in zip(plan.upserts, versions, strict=True):
            upsert.version = version
            plan.results[op.index] = WriteResult(op.index, op.op, True, op.key, value, version)
        _delete_pks(cursor, plan.deletes)
        _write_upserts(cursor, [u for _, u, _ in plan.upserts], now)
        out.update(plan.results)
        _run_multi_reads(cursor, multi, now, out)
    if plan.upserts or plan.deletes:
        namespaces = sorted({op.namespace for op in writes})
        events.broadcast_on_commit(events.KV_GROUP, {"type": "kv.changed", "namespaces": namespaces})
        if LOCKS_NAMESPACE in namespaces:
            events.broadcast_on_commit(events.LOCKS_GROUP, {"type": "lock.changed"})
    return [out[i] for i in sorted(out)]


@transaction.atomic(durable=True)
def _kv_call_atomic(ops: Sequence[KVOp], now: datetime) -> list[KVResult]:
    return apply_ops(ops, now=now)


def _blind_put_fast(op: KVOp, now: datetime) -> WriteResult:
    """One unconditional put on PostgreSQL as a single autocommit statement.

    The advisory lock in the CTE is taken before ``nextval()`` is drawn
    (the CTE is materialised because the lock function is volatile), and
    the statement's own transaction releases it at commit: pattern 4.1 of
    ``shared/pg-version-ordering.md``, as one round trip. Wrapping it in
    ``atomic()`` would only add BEGIN and COMMIT round trips
    (framework-ceilings.md, item 4).
    """
    expires_at = _expires(op, now)
    row = _pg_run(
        "WITH lk AS (SELECT pg_advisory_xact_lock(%s, hashtext(%s)) AS held) "
        f"INSERT INTO {TABLE} (namespace, key, value_json, version, expires_at, created_at, updated_at) "
        f"SELECT %s, %s, %s, nextval('{SEQUENCE}'), %s, %s, %s FROM lk "
        "ON CONFLICT (namespace, key) DO UPDATE SET "
        "value_json = excluded.value_json, version = excluded.version, "
        "expires_at = excluded.expires_at, updated_at = excluded.updated_at, "
        f"created_at = CASE WHEN {TABLE}.expires_at IS NULL OR {TABLE}.expires_at > %s "
        f"THEN {TABLE}.created_at ELSE excluded.created_at END "
        "RETURNING version",
        [
            ADVISORY_CLASS,
            f"{op.namespace}/{op.key}",
            op.namespace,
            op.key,
            op.value_json,
            expires_at,
            now,
            now,
            now,
        ],
    )
    version = int(row[0][0])
    _changed(op.namespace)
    return WriteResult(op.index, op.op, True, op.key, json.loads(op.value_json), version)


def _create_fast(op: KVOp, now: datetime) -> WriteResult | None:
    """``putIfAbsent`` of a key with no row at all, as one statement.

    Same lock-then-draw order as ``_blind_put_fast``. When any row exists
    (live or expired) nothing is written and None is returned: the caller
    then takes the transactional path, which answers ``exists`` or takes
    over the expired row. So only the common uncontended acquire is fast.
    """
    rows = _pg_run(
        "WITH lk AS (SELECT pg_advisory_xact_lock(%s, hashtext(%s)) AS held) "
        f"INSERT INTO {TABLE} (namespace, key, value_json, version, expires_at, created_at, updated_at) "
        f"SELECT %s, %s, %s, nextval('{SEQUENCE}'), %s, %s, %s FROM lk "
        "ON CONFLICT (namespace, key) DO NOTHING RETURNING version",
        [ADVISORY_CLASS, f"{op.namespace}/{op.key}", op.namespace, op.key, op.value_json, _expires(op, now), now, now],
    )
    if not rows:
        return None
    _changed(op.namespace)
    return WriteResult(op.index, op.op, True, op.key, json.loads(op.value_json), int(rows[0][0]))


def _delete_fast(op: KVOp, now: datetime) -> WriteResult | None:
    """Delete of a live key (at version ``expect`` when given), one statement.

    It holds the key's advisory lock like every writer, so it serialises
    with a conditional write of the same key: both cannot apply on one
    version. The statement's snapshot predates the lock, but the row lock
    re-checks the newest row version (EvalPlanQual), so a row changed
    meanwhile is not deleted; a row made meanwhile is not seen. Either
    way no row is deleted and None is returned: the caller then takes the
    transactional path, which also answers every refusal.
    """
    sql = (
        "WITH lk AS (SELECT pg_advisory_xact_lock(%s, hashtext(%s)) AS held) "
        f"DELETE FROM {TABLE} USING lk WHERE namespace = %s AND key = %s "
        "AND (expires_at IS NULL OR expires_at > %s)"
    )
    params: list[Any] = [ADVISORY_CLASS, f"{op.namespace}/{op.key}", op.namespace, op.key, now]
    if op.expect is not None:
        sql += " AND version = %s"
        params.append(op.expect)
    rows = _pg_run(sql + " RETURNING version, value_json", params)
    if not rows:
        return None
    _changed(op.namespace)
    return WriteResult(op.index, op.op, True, op.key, json.loads(rows[0][1]), int(rows[0][0]))


def _changed(namespace: str) -> None:
    events.broadcast_on_commit(events.KV_GROUP, {"type": "kv.changed", "namespaces": [namespace]})
    if namespace == LOCKS_NAMESPACE:
        events.broadcast_on_commit(events.LOCKS_GROUP, {"type": "lock.changed"})


def _blind_puts_fast(ops: Sequence[KVOp], now: datetime) -> list[KVResult]:
    """A call of unconditional puts only, on PostgreSQL, as one statement.

    The ``lk`` CTE takes every key's advisory lock, sorted (as
    ``_lock_keys`` does), and the rows it feeds are sorted into apply order
    before ``nextval()`` runs (PostgreSQL evaluates volatile output
    expressions after ORDER BY), so every version is drawn after all the
    locks, in key order. A put needs no old value: whether the row is live
    only decides ``created_at``, which the upsert decides itself.
    """
    ordered = sorted(ops, key=lambda op: (op.namespace, op.key.encode()))
    rows = [
        [op.namespace, op.key, op.value_json, None if op.ttl is None else (now + op.ttl).isoformat()] for op in ordered
    ]
    names = sorted({f"{op.namespace}/{op.key}" for op in ordered})
    stored = _pg_run(
        "WITH lk AS (SELECT count(pg_advisory_xact_lock(%s, h)) AS held FROM "
        "(SELECT DISTINCT hashtext(n) AS h FROM unnest(%s::text[]) AS n ORDER BY 1) AS s) "
        f"INSERT INTO {TABLE} (namespace, key, value_json, version, expires_at, created_at, updated_at) "
        f"SELECT r->>0, r->>1, r->>2, nextval('{SEQUENCE}'), (r->>3)::timestamptz, %s, %s "
        "FROM lk, jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS e(r, i) ORDER BY i "
        "ON CONFLICT (namespace, key) DO UPDATE SET "
        "value_json = excluded.value_json, version = excluded.version, "
        "expires_at = excluded.expires_at, updated_at = excluded.updated_at, "
        f"created_at = CASE WHEN {TABLE}.expires_at IS NULL OR {TABLE}.expires_at > %s "
        f"THEN {TABLE}.created_at ELSE excluded.created_at END "
        "RETURNING namespace, key, version",
        [ADVISORY_CLASS, names, now, now, json.dumps(rows, ensure_ascii=False), now],
    )
    versions = {(ns, key): int(version) for ns, key, version in stored}
    for namespace in sorted({op.namespace for op in ops}):
        _changed(namespace)
    return [
        WriteResult(op.index, op.op, True, op.key, json.loads(op.value_json), versions[(op.namespace, op.key)])
        for op in ops
    ]


def _fast_path(op: KVOp, now: datetime) -> WriteResult | None:
    """A one-statement answer for a lone write on PostgreSQL, or None."""
    if op.op == "put" and op.expect is None:
        return _blind_put_fast(op, now)
    if op.op == "putIfAbsent" or (op.op == "put" and op.expect == 0):
        return _create_fast(op, now)
    if op.op == "delete" and op.expect != 0:
        return _delete_fast(op, now)
    return None


def kv_call(ops: Sequence[KVOp], *, now: datetime | None = None) -> list[KVResult]:
    """Apply one KV call; must be the outermost transaction.

    Returns one result per op, in request order. Ordinary outcomes
    (``applied: False`` with its reason) are results; a ``required`` op that
    does not apply raises ``PreconditionFailed`` and nothing is written.
    Read-only calls take no write lock.
    """
    now = now or clock.now()
    if not any(op.is_write for op in ops):
        out: dict[int, KVResult] = {}
        with connection.cursor() as cursor:
            _run_reads(cursor, ops, now, out)
            _run_multi_reads(cursor, ops, now, out)
        return [out[i] for i in sorted(out)]
    if connection.vendor == "postgresql" and not connection.in_atomic_block:
        if len(ops) == 1:
            fast = _fast_path(ops[0], now)
            if fast is not None:
                return [fast]
        elif all(op.op == "put" and op.expect is None for op in ops):
            return _blind_puts_fast(ops, now)
    return _kv_call_atomic(ops, now)


# --------------------------------------------------------------------------
# The in-process API: one call per function, keyword-only


def _ttl_fields(ttl: timedelta | float | None) -> dict[str, Any]:
    if ttl is None:
        return {"forever": True}
    seconds = ttl.total_seconds() if isinstance(ttl, timedelta) else float(ttl)
    return {"ttlSeconds": max(1, int(-(-seconds // 1)))}


def _one(raw: dict[str, Any], now: datetime | None = None) -> Any:
    return kv_call(parse_ops([raw]), now=now)[0]


def kv_get(*, namespace: str, key: str, now: datetime | None = None) -> KVRow | None:
    """Return the live row of ``key``, or None."""
    result = _one({"op": "get", "ns": namespace, "key": key}, now)
    return result.row  # type: ignore[no-any-return]


def kv_put(
    *,
    namespace: str,
    key: str,
    value: Any,
    ttl: timedelta | float | None,
    expect: int | None = None,
    now: datetime | None = None,
) -> WriteResult:
    """Write ``value``; ``ttl=None`` means forever. See protocol 2.5 for expect."""
    raw = {"op": "put", "ns": namespace, "key": key, "value": value, **_ttl_fields(ttl)}
    if expect is not None:
        raw["expect"] = expect
    return _one(raw, now)  # type: ignore[no-any-return]


def kv_delete(*, namespace: str, key: str, expect: int | None = None, now: datetime | None = None) -> WriteResult:
    """Delete ``key`` if live (and at version ``expect`` when given)."""
    raw: dict[str, Any] = {"op": "delete", "ns": namespace, "key": key}
    if expect is not None:
        raw["expect"] = expect
    return _one(raw, now)  # type: ignore[no-any-return]


def kv_incr(
    *,
    namespace: str,
    key: str,
    delta: int | float | Decimal = 1,
    ttl: timedelta | float | None,
    minimum: int | float | None = None,
    maximum: int | float | None = None,
    now: datetime | None = None,
) -> WriteResult:
    """Add ``delta``; refuse (reason ``limit``) past ``minimum``/``maximum``."""
    raw: dict[str, Any] = {"op": "incr", "ns": namespace, "key": key, "delta": delta, **_ttl_fields(ttl)}
    if minimum is not None:
        raw["min"] = minimum
    if maximum is not None:
        raw["max"] = maximum
    return _one(raw, now)  # type: ignore[no-any-return]


def kv_namespaces() -> list[tuple[str, int]]:
    """Every namespace with its row count (expired-but-unreaped included)."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT namespace, count(*) FROM {TABLE} GROUP BY namespace ORDER BY namespace")
        return [(ns, int(n)) for ns, n in cursor.fetchall()]


def kv_totals() -> tuple[int, int]:
    """Rows in the store and the size of their keys and values.

    Counts expired-but-unreaped rows too. The size is in characters (equal
    to bytes for ASCII; SQLite has no portable octet length). One aggregate
    over the table: for the console's resource list, not for a hot path.
    """
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*), coalesce(sum(length(key) + length(value_json)), 0) FROM {TABLE}")
        rows, size = cursor.fetchone()
    return int(rows), int(size)


def kv_list(
    *,
    namespace: str,
    prefix: str = "",
    after: str = "",
    limit: int = DEFAULT_PAGE_LIMIT,
    include_expired: bool = False,
    now: datetime | None = None,
) -> PageResult:
    """One console page of a namespace (``prefix`` empty = every key)."""
    limit = max(1, min(MAX_PAGE_LIMIT, limit))
    with connection.cursor() as cursor:
        return read_page(
            cursor,
            namespace=namespace,
            prefix=prefix,
            after=after,
            limit=limit,
            now=None if include_expired else (now or clock.now()),
        )


def kv_reap_expired(*, before: datetime | None = None, batch_size: int | None = None) -> int:
    """Delete up to ``batch_size`` rows that expired at or before ``before``.

    Returns how many it removed. Rows a writer holds are skipped (SKIP
    LOCKED), so the reaper never waits on, or deadlocks with, a write.
    """
    before = before or clock.now()
    batch_size = batch_size or settings.REAPER_BATCH_SIZE
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                f"DELETE FROM {TABLE} WHERE id IN (SELECT id FROM {TABLE} WHERE expires_at <= %s "
                "ORDER BY expires_at LIMIT %s FOR UPDATE SKIP LOCKED)",
                [before, batch_size],
            )
        else:
            cursor.execute(
                f"DELETE FROM {TABLE} WHERE id IN (SELECT id FROM {TABLE} WHERE expires_at <= %s "
                "ORDER BY expires_at LIMIT %s)",
                [_db_time(before), batch_size],
            )
        removed = int(cursor.rowcount or 0)
    if removed:
        events.broadcast_on_commit(events.KV_GROUP, {"type": "kv.changed", "namespaces": []})
    return removed
