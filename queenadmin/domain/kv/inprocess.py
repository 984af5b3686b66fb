"""The in-process KV API for Django code: one command per call, typed."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from queenadmin.domain import clock, events
from queenadmin.domain.kv.calls import kv_call
from queenadmin.domain.kv.ops import (
    DEFAULT_PAGE_LIMIT,
    MAX_PAGE_LIMIT,
    REAPER_BATCH_SIZE,
    GetResult,
    KVDelete,
    KVGet,
    KVIncr,
    KVPut,
    KVRow,
    PageResult,
    WriteResult,
    check_incr_number,
    check_key,
    check_namespace,
    check_ttl,
    check_value_json,
)
from queenadmin.domain.kv.store import store
from queenadmin.errors import KVBadRequest
from queenadmin.plumbing import db


def lifetime(ttl: timedelta | float | None) -> timedelta | None:
    """A lifetime in whole seconds (rounded up, at least 1); None = forever."""
    if ttl is None:
        return None
    seconds = ttl.total_seconds() if isinstance(ttl, timedelta) else float(ttl)
    if not math.isfinite(seconds):
        raise KVBadRequest("ttl must be finite", reason="kv_bad_ttl")
    return check_ttl(timedelta(seconds=max(1, math.ceil(seconds))))


def _number(value: int | float | Decimal, what: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        raise KVBadRequest(f"{what} must be a number")
    number = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    return check_incr_number(number, what)


def _write(op: KVPut | KVDelete | KVIncr, now: datetime | None) -> WriteResult:
    result = kv_call([op], now=now)[0]
    assert isinstance(result, WriteResult)
    return result


def kv_get(*, namespace: str, key: str, now: datetime | None = None) -> KVRow | None:
    """Return the live row of ``key``, or None."""
    op = KVGet(check_namespace(namespace), check_key(key))
    result = kv_call([op], now=now)[0]
    assert isinstance(result, GetResult)
    return result.row


def kv_put(
    *,
    namespace: str,
    key: str,
    value: Any,
    ttl: timedelta | float | None,
    expect: int | None = None,
    now: datetime | None = None,
) -> WriteResult:
    """Write ``value`` (any JSON value); ``ttl=None`` means forever.

    ``expect``: None = upsert, 0 = only if absent, N = only at version N.
    Returns the ``WriteResult`` (``applied=False`` with its reason when the
    version did not match). Raises ``KVBadRequest`` for a bad name, key,
    ttl or a value JSON cannot hold, 413 for one over the size limit. Must
    be the outermost call.
    """
    try:
        value_json = db.json_text(value)
    except (TypeError, ValueError) as exc:
        raise KVBadRequest("value is not valid JSON") from exc
    if expect is not None and expect < 0:
        raise KVBadRequest("expect must be an integer >= 0", reason="kv_bad_expect")
    op = KVPut(
        check_namespace(namespace),
        check_key(key),
        check_value_json(value_json),
        lifetime(ttl),
        expect=expect,
    )
    return _write(op, now)


def kv_delete(*, namespace: str, key: str, expect: int | None = None, now: datetime | None = None) -> WriteResult:
    """Delete ``key`` if live (and at version ``expect`` when given).

    Must be the outermost call.
    """
    return _write(KVDelete(check_namespace(namespace), check_key(key), expect=expect), now)


def kv_incr(
    *,
    namespace: str,
    key: str,
    delta: int | float | Decimal = 1,
    ttl: timedelta | float | None,
    minimum: int | float | Decimal | None = None,
    maximum: int | float | Decimal | None = None,
    now: datetime | None = None,
) -> WriteResult:
    """Add ``delta`` exactly; refuse (reason ``limit``) past the bounds.

    ``ttl`` applies when the counter is created. Must be the outermost call.
    """
    op = KVIncr(
        check_namespace(namespace),
        check_key(key),
        _number(delta, "delta"),
        lifetime(ttl),
        minimum=None if minimum is None else _number(minimum, "min"),
        maximum=None if maximum is None else _number(maximum, "max"),
    )
    return _write(op, now)


def kv_namespaces() -> list[tuple[str, int]]:
    """Every namespace with its row count (expired-but-unreaped included)."""
    return store().namespaces()


def kv_namespaces_keep_in_txn(*, counts: list[tuple[str, int]], now: datetime) -> None:
    """Keep ``counts`` (``kv_namespaces()``, read before the transaction)
    as the store's key counts as of ``now``: the statistics sampler's, once
    a tick, for pages that cannot scan every key at each render."""
    store().keep_namespace_counts(counts, now)


def kv_namespaces_kept() -> tuple[datetime | None, list[tuple[str, int]]]:
    """The counts ``kv_namespaces_keep_in_txn`` kept last, and when they
    were counted (None: never); one read of a row per namespace."""
    return store().kept_namespace_counts()


def kv_totals() -> tuple[int, int]:
    """Rows in the store and the size of their keys and values.

    Counts expired-but-unreaped rows too. The size is in characters (equal
    to bytes for ASCII; SQLite has no portable octet length). One aggregate
    over the table: for the console's resource list, not for a hot path.
    """
    return store().totals()


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
    rows, truncated, next_after = store().read_page(
        namespace=check_namespace(namespace),
        prefix=prefix,
        after=after,
        limit=limit,
        now=None if include_expired else (now or clock.now()),
    )
    return PageResult(rows, truncated, next_after, False)


def kv_list_stored(
    *, namespace: str, prefix: str = "", after: str = "", limit: int = DEFAULT_PAGE_LIMIT, now: datetime | None = None
) -> PageResult:
    """``kv_list`` of a namespace as stored, not checked against the rules
    for names: a database may hold names from before them, and the
    dashboard shows what is stored. Text with NUL matches nothing where
    the database cannot store it (PostgreSQL)."""
    if "\x00" in namespace + prefix + after and db.is_postgres():
        return PageResult((), False, None, False)
    limit = max(1, min(MAX_PAGE_LIMIT, limit))
    rows, truncated, next_after = store().read_page(
        namespace=namespace, prefix=prefix, after=after, limit=limit, now=now or clock.now()
    )
    return PageResult(rows, truncated, next_after, False)


@dataclass(frozen=True, slots=True)
class ScannedKey:
    """A row of ``kv_scan_stored``: the value as JSON text, not parsed."""

    key: str
    value_json: str
    updated_at: datetime
    #: None means forever.
    expires_at: datetime | None


def kv_scan_stored(*, namespace: str, limit: int) -> list[ScannedKey]:
    """The first ``limit`` rows of ``namespace`` as stored, in key order,
    expired ones not yet reaped included, times to the millisecond: one
    statement, for a page that reads a whole small namespace each render
    (the consumer heartbeats)."""
    if "\x00" in namespace and db.is_postgres():
        return []

    def moment(seconds: float) -> datetime:
        # SQLite's julianday is a double: a few microseconds off.
        return datetime.fromtimestamp(round(seconds, 3), UTC)

    return [
        ScannedKey(key, value, moment(written), None if ends is None else moment(ends))
        for key, value, written, ends in store().scan_values(namespace=namespace, limit=limit)
    ]


def kv_get_stored(*, namespace: str, key: str, now: datetime | None = None) -> KVRow | None:
    """The live row of ``key`` as stored, or None; unchecked as ``kv_list_stored``."""
    if not key:
        return None
    rows = kv_list_stored(namespace=namespace, prefix=key, limit=1, now=now).rows
    # A key sorts first among the keys it prefixes.
    return rows[0] if rows and rows[0].key == key else None


def kv_reap_expired(*, before: datetime | None = None, batch_size: int | None = None) -> int:
    """Delete up to ``batch_size`` rows that expired at or before ``before``.

    Returns how many it removed. Rows a writer holds are skipped on
    PostgreSQL (SKIP LOCKED), so the reaper never waits on a write.
    """
    removed = store().reap(before=before or clock.now(), batch_size=batch_size or REAPER_BATCH_SIZE)
    if removed:
        events.broadcast_on_commit(events.KV_GROUP, {"type": "kv.changed", "namespaces": []})
    return removed
