"""KV rows on PostgreSQL: advisory key locks, a sequence, set-based SQL.

How versions stay in commit order per key: every version-assigning
statement first holds the key's advisory transaction lock and draws
``nextval()`` (sequence, CACHE 1) only after it. The next writer of the key
gets the lock only after the previous one committed, so its draw is larger.
Measured safe in ``shared/pg-version-ordering.md`` section 4.1 (0 inversions
in 1.09M writes); the plain ``INSERT ... VALUES (nextval())`` upsert is not.

Besides the interface, this store answers the lone writes that
``planner.fast_path_of`` names in one autocommit statement each (one round
trip instead of BEGIN, lock, read, write, COMMIT).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, ClassVar

from queenadmin.domain.kv import keep
from queenadmin.domain.kv.ops import KVDelete, KVPut
from queenadmin.domain.kv.planner import Stored, Upsert, expires
from queenadmin.domain.kv.store.base import (
    COLUMNS,
    HISTORY_COLUMNS,
    HISTORY_TABLE,
    TABLE,
    GroupItem,
    Ident,
    Store,
    Written,
    stored_of,
)
from queenadmin.plumbing.db import pg_run

SEQUENCE = "queenadmin_kv_version"
#: First argument of the two-int advisory lock form, so our key locks live
#: apart from any other advisory-lock user of the database.
ADVISORY_CLASS = 0x51AD

_UPSERT_TAIL = (
    "ON CONFLICT (namespace, key) DO UPDATE SET "
    "value_json = excluded.value_json, version = excluded.version, "
    "expires_at = excluded.expires_at, updated_at = excluded.updated_at, "
    # A put over an expired row creates the key anew.
    f"created_at = CASE WHEN {TABLE}.expires_at IS NULL OR {TABLE}.expires_at > %s "
    f"THEN {TABLE}.created_at ELSE excluded.created_at END "
)


def _lock_name(namespace: str, key: str) -> str:
    return f"{namespace}/{key}"


_LOCK_ONE = "WITH lk AS (SELECT pg_advisory_xact_lock(%s, hashtext(%s)) AS held) "
#: One row inserted under its key's advisory lock, its version drawn after
#: the lock (``_locked_insert_params`` fills it); an ON CONFLICT clause ends it.
_LOCKED_INSERT = (
    _LOCK_ONE + f"INSERT INTO {TABLE} (namespace, key, value_json, version, expires_at, created_at, updated_at) "
    f"SELECT %s, %s, %s, nextval('{SEQUENCE}'), %s, %s, %s FROM lk "
)
#: A lone write's history row, from the write's own ``RETURNING`` (CTE
#: ``wr``): namespace, key, the version (a delete draws its own), then
#: ``_kept_params``.
_KEEP_ONE = (
    f"kept AS (INSERT INTO {HISTORY_TABLE} ({HISTORY_COLUMNS}) "
    "SELECT %s, %s, {version}, %s, %s, %s, %s, %s, %s, {expires} FROM wr) "
)


def _kept(write: str, returning: str, *, delete: bool = False) -> str:
    """A lone write (``_LOCK_ONE`` then its statement, without RETURNING)
    with its history row in the same statement: a data-modifying CTE, which
    runs to completion even though the outer SELECT does not read it."""
    body = write.removeprefix(_LOCK_ONE)
    assert body != write
    version = f"nextval('{SEQUENCE}')" if delete else "wr.version"
    return (
        f"{_LOCK_ONE}, wr AS ({body} RETURNING {returning}, expires_at AS wexp), "
        + _KEEP_ONE.format(version=version, expires="NULL::timestamptz" if delete else "wr.wexp")
        + f"SELECT {returning} FROM wr"
    )


def _kept_params(op: KVPut | KVDelete, kind: str, now: datetime, by: str | None) -> list[Any]:
    held = keep.kept(op.value_json, op.namespace, op.waited_ms) if isinstance(op, KVPut) else keep.DELETED
    return [op.namespace, op.key, kind, *held, now, by]


_PUT_KEPT = _kept(_LOCKED_INSERT + _UPSERT_TAIL, "version")
_CREATE = (
    _LOCKED_INSERT + "ON CONFLICT (namespace, key) DO UPDATE SET "
    "value_json = excluded.value_json, version = excluded.version, expires_at = excluded.expires_at, "
    "created_at = excluded.created_at, updated_at = excluded.updated_at "
    f"WHERE {TABLE}.expires_at IS NOT NULL AND {TABLE}.expires_at <= %s "
)
_CREATE_KEPT = _kept(_CREATE, "version")
_CAS = (
    _LOCK_ONE + f"UPDATE {TABLE} SET value_json = %s, version = nextval('{SEQUENCE}'), expires_at = %s, "
    "updated_at = %s FROM lk WHERE namespace = %s AND key = %s AND version = %s "
    "AND (expires_at IS NULL OR expires_at > %s) "
)
_CAS_KEPT = _kept(_CAS, "version")


def _locked_insert_params(op: KVPut, now: datetime) -> list[Any]:
    lock = _lock_name(op.namespace, op.key)
    return [ADVISORY_CLASS, lock, op.namespace, op.key, op.value_json, expires(op.ttl, now), now, now]


class PostgresStore(Store):
    one_statement_writes = True
    _EPOCH: ClassVar[str] = "EXTRACT(EPOCH FROM {0})::float8"

    def lock_keys(self, idents: Iterable[Ident]) -> None:
        names = sorted({_lock_name(ns, key) for ns, key in idents})
        if not names:
            return
        # The subquery sorts the hashes first, so every transaction takes its
        # locks in the same order and two multi-key writers cannot deadlock.
        pg_run(
            "SELECT count(pg_advisory_xact_lock(%s, h)) FROM "
            "(SELECT DISTINCT hashtext(n) AS h FROM unnest(%s::text[]) AS n ORDER BY 1) AS s",
            [ADVISORY_CLASS, names],
        )

    def read_keys(self, idents: Iterable[Ident], now: datetime) -> dict[Ident, Stored]:
        found: dict[Ident, Stored] = {}
        by_ns: dict[str, list[str]] = {}
        for ns, key in idents:
            by_ns.setdefault(ns, []).append(key)
        if len(by_ns) > 1 and sum(len(keys) for keys in by_ns.values()) <= 500:
            # Several namespaces (a lock's guard beside a state write): one
            # statement for all, not one per namespace (bench/transactions.py:
            # read_keys was 7.5% of a guarded transaction's server CPU).
            pairs = [[ns, key] for ns, keys in by_ns.items() for key in keys]
            records = pg_run(
                f"SELECT {', '.join('t.' + c for c in COLUMNS.split(', '))} FROM {TABLE} AS t "
                "JOIN (SELECT r->>0 AS ns, r->>1 AS k FROM jsonb_array_elements(%s::jsonb) AS r) AS w "
                "ON t.namespace = w.ns AND t.key = w.k",
                [json.dumps(pairs)],
                prepare=False,
            )
            for record in records:
                found[(record[1], record[2])] = stored_of(record, now)
            return found
        for ns, keys in by_ns.items():
            for start in range(0, len(keys), 500):
                # The keys as one JSON parameter: a short constant statement
                # (psycopg re-parses a long one on every call) and one C-speed
                # encode instead of quoting every array element in Python.
                records = pg_run(
                    f"SELECT {COLUMNS} FROM {TABLE} WHERE namespace = %s "
                    "AND key = ANY(ARRAY(SELECT jsonb_array_elements_text(%s::jsonb)))",
                    [ns, json.dumps(keys[start : start + 500])],
                    prepare=False,  # a generic plan may seq-scan: see pg_run
                )
                for record in records:
                    found[(ns, record[2])] = stored_of(record, now)
        return found

    def draw_versions(self, count: int) -> list[int]:
        if count <= 0:
            return []
        drawn = pg_run(f"SELECT nextval('{SEQUENCE}') FROM generate_series(1, %s::int)", [count])
        return sorted(int(r[0]) for r in drawn)

    def write_upserts(self, upserts: list[Upsert], now: datetime) -> None:
        if not upserts:
            return
        rows = _upsert_rows(upserts, with_version=True)
        pg_run(
            f"INSERT INTO {TABLE} (namespace, key, value_json, version, expires_at, created_at, updated_at) "
            "SELECT r->>0, r->>1, r->>2, (r->>3)::bigint, (r->>4)::timestamptz, (r->>5)::timestamptz, %s "
            "FROM jsonb_array_elements(%s::jsonb) AS r "
            "ON CONFLICT (namespace, key) DO UPDATE SET "
            "value_json = excluded.value_json, version = excluded.version, "
            "expires_at = excluded.expires_at, created_at = excluded.created_at, "
            "updated_at = excluded.updated_at",
            [now, json.dumps(rows, ensure_ascii=False)],
        )

    def lock_and_read(self, idents: Sequence[Ident], now: datetime) -> dict[Ident, Stored]:
        """The keys' advisory locks and their rows in one call.

        ``queenadmin_kv_lock_and_read`` (made by the migrations) takes the locks in
        the order every writer follows, then reads the rows in a statement
        whose snapshot follows the locks: a row a writer made, changed or
        deleted while we waited is read as it committed. The rows are read
        ``FOR NO KEY UPDATE``, which adds nothing to the advisory locks
        every writer of these keys takes first. The function's plan is
        cached per connection and always the unique index, so this call is
        prepared: planning it on every call was ~240 us of PostgreSQL CPU in
        a guarded transaction of ~800.
        """
        wanted = sorted(set(idents))
        if not wanted or len(wanted) > 500:
            return super().lock_and_read(idents, now)
        names = sorted({_lock_name(ns, key) for ns, key in wanted})
        records = pg_run(
            f"SELECT {COLUMNS} FROM queenadmin_kv_lock_and_read(%s::integer, %s::text[], %s::text[], %s::text[])",
            [ADVISORY_CLASS, names, [ns for ns, _ in wanted], [key for _, key in wanted]],
        )
        return {(r[1], r[2]): stored_of(r, now) for r in records}

    def stamp_and_write(self, upserts: list[Upsert], now: datetime, *, by: str | None = None) -> None:
        """``write_upserts`` drawing each version in the statement, after the
        rows are sorted into list order (volatile output expressions run after
        ORDER BY, as in ``put_many_fast``): one statement, not two. The caller
        holds every key's advisory lock, so each draw follows the previous
        writer's commit (pattern 4.1 of ``shared/pg-version-ordering.md``)."""
        if not upserts:
            return
        rows = _upsert_rows(upserts, with_version=False)
        sql = (
            f"INSERT INTO {TABLE} (namespace, key, value_json, version, expires_at, created_at, updated_at) "
            f"SELECT r->>0, r->>1, r->>2, nextval('{SEQUENCE}'), (r->>3)::timestamptz, (r->>4)::timestamptz, %s "
            "FROM jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS e(r, i) ORDER BY i "
            "ON CONFLICT (namespace, key) DO UPDATE SET "
            "value_json = excluded.value_json, version = excluded.version, "
            "expires_at = excluded.expires_at, created_at = excluded.created_at, "
            "updated_at = excluded.updated_at RETURNING namespace, key, version, expires_at"
        )
        kept = [
            [u.namespace, u.key, u.op, *keep.kept(u.value_json, u.namespace, u.waited_ms)]
            for u in upserts
            if keep.recorded(u.namespace)
        ]
        if kept:
            # The history rows ride in the same statement: pairs of the
            # rows written and what history keeps of each.
            sql = (
                f"WITH wr AS ({sql}), kept AS (INSERT INTO {HISTORY_TABLE} ({HISTORY_COLUMNS}) "
                "SELECT wr.namespace, wr.key, wr.version, k->>2, k->>3, k->>4, (k->>5)::int, %s, %s, wr.expires_at "
                "FROM wr JOIN jsonb_array_elements(%s::jsonb) AS k ON k->>0 = wr.namespace AND k->>1 = wr.key) "
                "SELECT namespace, key, version FROM wr"
            )
        params: list[Any] = [now, json.dumps(rows, ensure_ascii=False)]
        if kept:
            params += [now, by, json.dumps(kept, ensure_ascii=False)]
        stored = pg_run(sql, params)
        versions = {(ns, key): int(version) for ns, key, version, *_ in stored}
        for upsert in upserts:
            upsert.version = versions[(upsert.namespace, upsert.key)]

    def trim_turn(self) -> bool:
        # Every serving process runs the retention loop: the first to take
        # this lock trims, the others skip the step (no double work).
        rows = pg_run("SELECT pg_try_advisory_xact_lock(%s, hashtext('kv-history-trim'))", [ADVISORY_CLASS])
        return bool(rows[0][0])

    def delete_pks(self, pks: list[int]) -> None:
        if pks:
            pg_run(f"DELETE FROM {TABLE} WHERE id = ANY(%s)", [pks], prepare=False)

    def reap(self, *, before: datetime, batch_size: int) -> int:
        # SKIP LOCKED: rows a writer holds are skipped, so the reaper never
        # waits on, or deadlocks with, a write.
        rows = pg_run(
            f"DELETE FROM {TABLE} WHERE id IN (SELECT id FROM {TABLE} WHERE expires_at <= %s "
            "ORDER BY expires_at LIMIT %s FOR UPDATE SKIP LOCKED) RETURNING id",
            [before, batch_size],
            prepare=False,
        )
        return len(rows)

    # ----------------------------------------------------------------------
    # One-statement forms (planner.fast_path_of); each runs in autocommit

    def put_fast(self, op: KVPut, now: datetime, by: str | None = None) -> int:
        """An unconditional put; its new version.

        The advisory lock in the CTE is taken before ``nextval()`` is drawn
        (the CTE is materialised because the lock function is volatile), and
        the statement's own transaction releases it at commit: pattern 4.1
        of ``shared/pg-version-ordering.md``, as one round trip.
        """
        params = [*_locked_insert_params(op, now), now]
        if keep.recorded(op.namespace):
            row = pg_run(_PUT_KEPT, [*params, *_kept_params(op, "put", now, by)])
        else:
            row = pg_run(_LOCKED_INSERT + _UPSERT_TAIL + "RETURNING version", params)
        return int(row[0][0])

    def create_fast(self, op: KVPut, now: datetime, by: str | None = None) -> int | None:
        """A put that must not exist, when no live row exists; its version.

        Same lock-then-draw order as ``put_fast``. A row expired at ``now``
        is taken over in the same statement (the key created anew), so a
        caller that waited for the key's lock (a lease's holder in a guarded
        step) answers as soon as it is granted, before anyone who asked
        later: were the take-over a second transaction, it would queue for
        the key again, behind them. ``ON CONFLICT ... WHERE`` reads the
        newest row, not the statement's snapshot. When a live row exists
        nothing is written and None is returned: the planner answers
        ``exists``.
        """
        params = [*_locked_insert_params(op, now), now]
        if keep.recorded(op.namespace):
            rows = pg_run(_CREATE_KEPT, [*params, *_kept_params(op, "put", now, by)])
        else:
            rows = pg_run(_CREATE + "RETURNING version", params)
        return int(rows[0][0]) if rows else None

    def cas_fast(self, op: KVPut, now: datetime, by: str | None = None) -> int | None:
        """A put at ``expect`` (above 0) over a live row at that version; its
        new version.

        One conditional UPDATE under the key's advisory lock, ``nextval()``
        drawn after it (the lock's row feeds every output row), like
        ``put_fast``. The statement's snapshot predates the lock, but the
        row lock re-checks the newest row version (EvalPlanQual, which
        draws its version again), so a row changed or deleted meanwhile is
        not written; a row made meanwhile is not seen. A live row keeps its
        ``created_at``, as ``planner.decide`` does. None when nothing was
        written: the planner then answers (``version`` or ``absent``).
        """
        recorded = keep.recorded(op.namespace)
        rows = pg_run(
            _CAS_KEPT if recorded else _CAS + "RETURNING version",
            [
                ADVISORY_CLASS,
                _lock_name(op.namespace, op.key),
                op.value_json,
                expires(op.ttl, now),
                now,
                op.namespace,
                op.key,
                op.expect,
                now,
                *(_kept_params(op, "put", now, by) if recorded else ()),
            ],
        )
        return int(rows[0][0]) if rows else None

    def delete_fast(self, op: KVDelete, now: datetime, by: str | None = None) -> tuple[int, str] | None:
        """Delete of a live key (at ``expect`` when given); (version, value_json).

        It holds the key's advisory lock like every writer, so it serialises
        with a conditional write of the same key: both cannot apply on one
        version. The statement's snapshot predates the lock, but the row
        lock re-checks the newest row version (EvalPlanQual), so a row
        changed meanwhile is not deleted; a row made meanwhile is not seen.
        Either way nothing is deleted and None is returned.
        """
        sql = (
            _LOCK_ONE + f"DELETE FROM {TABLE} USING lk WHERE namespace = %s AND key = %s "
            "AND (expires_at IS NULL OR expires_at > %s)"
        )
        params: list[Any] = [ADVISORY_CLASS, _lock_name(op.namespace, op.key), op.namespace, op.key, now]
        if op.expect is not None:
            sql += " AND version = %s"
            params.append(op.expect)
        if keep.recorded(op.namespace):
            rows = pg_run(
                _kept(sql, "version, value_json", delete=True), [*params, *_kept_params(op, "delete", now, by)]
            )
        else:
            rows = pg_run(sql + " RETURNING version, value_json", params)
        return (int(rows[0][0]), rows[0][1]) if rows else None

    def put_many_fast(self, ops: Sequence[KVPut], now: datetime, by: str | None = None) -> dict[Ident, int]:
        """A call of unconditional puts only, as one statement; the versions.

        The ``lk`` CTE takes every key's advisory lock, sorted (as
        ``lock_keys`` does), and the rows it feeds are sorted into apply
        order before ``nextval()`` runs (PostgreSQL evaluates volatile
        output expressions after ORDER BY), so every version is drawn after
        all the locks, in key order. A put needs no old value: whether the
        row is live only decides ``created_at``, which the upsert decides.
        """
        ordered = sorted(ops, key=lambda op: (op.namespace, op.key.encode()))
        rows = [
            [op.namespace, op.key, op.value_json, None if op.ttl is None else (now + op.ttl).isoformat()]
            for op in ordered
        ]
        names = sorted({_lock_name(op.namespace, op.key) for op in ordered})
        kept = [
            [op.namespace, op.key, "put", *keep.kept(op.value_json, op.namespace, op.waited_ms)]
            for op in ordered
            if keep.recorded(op.namespace)
        ]
        insert = (
            f"INSERT INTO {TABLE} (namespace, key, value_json, version, expires_at, created_at, updated_at) "
            f"SELECT r->>0, r->>1, r->>2, nextval('{SEQUENCE}'), (r->>3)::timestamptz, %s, %s "
            "FROM lk, jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS e(r, i) ORDER BY i "
            + _UPSERT_TAIL
            + "RETURNING namespace, key, version, expires_at"
        )
        lk = (
            "WITH lk AS (SELECT count(pg_advisory_xact_lock(%s, h)) AS held FROM "
            "(SELECT DISTINCT hashtext(n) AS h FROM unnest(%s::text[]) AS n ORDER BY 1) AS s)"
        )
        params: list[Any] = [ADVISORY_CLASS, names, now, now, json.dumps(rows, ensure_ascii=False), now]
        if kept:
            sql = (
                f"{lk}, wr AS ({insert}), kept AS (INSERT INTO {HISTORY_TABLE} ({HISTORY_COLUMNS}) "
                "SELECT wr.namespace, wr.key, wr.version, k->>2, k->>3, k->>4, (k->>5)::int, %s, %s, wr.expires_at "
                "FROM wr JOIN jsonb_array_elements(%s::jsonb) AS k ON k->>0 = wr.namespace AND k->>1 = wr.key) "
                "SELECT namespace, key, version FROM wr"
            )
            params += [now, by, json.dumps(kept, ensure_ascii=False)]
        else:
            sql = f"{lk} {insert}"
        stored = pg_run(sql, params)
        return {(ns, key): int(version) for ns, key, version, *_ in stored}

    def write_group(self, items: Sequence[GroupItem]) -> list[Written | None]:
        """Several lone writes of distinct keys as one statement (``group``).

        Each kind keeps its one-statement form's SQL, as one data-modifying
        CTE over the rows of its kind (only the kinds present): ``put`` the
        upsert of ``put_fast``, ``create`` the guarded upsert of
        ``create_fast``, ``cas`` the conditional UPDATE of ``cas_fast``
        (EvalPlanQual re-checks a row changed after the statement's
        snapshot, as there), ``delete`` the DELETE of ``delete_fast``. Every
        CTE joins ``lk``, which takes all the keys' advisory locks in sorted
        hash order (as ``lock_keys``) before any row comes out of it, so
        every ``nextval()`` is drawn after the locks: pattern 4.1 of
        ``shared/pg-version-ordering.md`` for each key. Each row carries its
        caller's ``now``. The keys are distinct (``group`` makes sure), so
        the CTEs never touch one row twice. Prepared only when no CTE joins
        the table (puts and creates): a generic plan of the UPDATE's or the
        DELETE's join may scan it (see ``pg_run``).
        """
        recorded = {ns: keep.recorded(ns) for ns in {op.namespace for _, op, _, _ in items}}
        rows = [
            [
                kind,
                op.namespace,
                op.key,
                op.value_json if isinstance(op, KVPut) else None,
                None if not isinstance(op, KVPut) or op.ttl is None else (now + op.ttl).isoformat(),
                now.isoformat(),
                op.expect,
                recorded[op.namespace],
                # An opted-out namespace's value is not sent twice (nor hashed).
                *(
                    keep.kept(op.value_json, op.namespace, op.waited_ms)
                    if isinstance(op, KVPut) and recorded[op.namespace]
                    else keep.DELETED
                ),
                by,
            ]
            for kind, op, now, by in items
        ]
        kinds = frozenset(kind for kind, _, _, _ in items)
        stored = pg_run(
            _group_sql(kinds, any(row[7] for row in rows)),
            [json.dumps(rows, ensure_ascii=False), ADVISORY_CLASS],
            prepare=kinds <= {"put", "create"},
        )
        done = {(ns, key): (int(version), value_json) for ns, key, version, value_json, *_ in stored}
        return [done.get((op.namespace, op.key)) for _, op, _, _ in items]


_GROUP_ROWS = (
    "WITH w AS MATERIALIZED (SELECT r->>0 AS kind, r->>1 AS ns, r->>2 AS k, r->>3 AS val, "
    "(r->>4)::timestamptz AS exp, (r->>5)::timestamptz AS at, (r->>6)::bigint AS expect, "
    "(r->>7)::boolean AS rec, r->>8 AS hval, r->>9 AS hdigest, (r->>10)::int AS hsize, r->>11 AS hby "
    "FROM jsonb_array_elements(%s::jsonb) AS r), "
    "lk AS (SELECT count(pg_advisory_xact_lock(%s, h)) AS held FROM "
    "(SELECT DISTINCT hashtext(w.ns || '/' || w.k) AS h FROM w ORDER BY 1) AS s)"
)
_GROUP_INSERT = (
    f"INSERT INTO {TABLE} AS t (namespace, key, value_json, version, expires_at, created_at, updated_at) "
    f"SELECT w.ns, w.k, w.val, nextval('{SEQUENCE}'), w.exp, w.at, w.at FROM lk, w WHERE w.kind = '{{kind}}' "
    "ON CONFLICT (namespace, key) DO UPDATE SET "
    "value_json = excluded.value_json, version = excluded.version, "
    "expires_at = excluded.expires_at, updated_at = excluded.updated_at, "
)
_GROUP_RETURNING = "RETURNING t.namespace, t.key, t.version, t.value_json, t.expires_at"
#: One data-modifying CTE per kind of lone write (see ``write_group``).
_GROUP_PARTS = {
    "put": _GROUP_INSERT.format(kind="put")
    + "created_at = CASE WHEN t.expires_at IS NULL OR t.expires_at > excluded.updated_at "
    "THEN t.created_at ELSE excluded.created_at END " + _GROUP_RETURNING,
    "create": _GROUP_INSERT.format(kind="create") + "created_at = excluded.created_at "
    "WHERE t.expires_at IS NOT NULL AND t.expires_at <= excluded.updated_at " + _GROUP_RETURNING,
    "cas": f"UPDATE {TABLE} AS t SET value_json = w.val, version = nextval('{SEQUENCE}'), expires_at = w.exp, "
    "updated_at = w.at FROM lk, w WHERE w.kind = 'cas' AND t.namespace = w.ns AND t.key = w.k "
    "AND t.version = w.expect AND (t.expires_at IS NULL OR t.expires_at > w.at) " + _GROUP_RETURNING,
    "delete": f"DELETE FROM {TABLE} AS t USING lk, w WHERE w.kind = 'delete' AND t.namespace = w.ns "
    "AND t.key = w.k AND (t.expires_at IS NULL OR t.expires_at > w.at) "
    "AND (w.expect IS NULL OR t.version = w.expect) " + _GROUP_RETURNING,
}


@functools.cache
def _group_sql(kinds: frozenset[str], kept: bool) -> str:
    """``write_group``'s statement for the kinds of a group: the rows as one
    JSON parameter, then the advisory lock class. With ``kept``, the
    history rows of the rows written (those of recorded namespaces) ride in
    the same statement; a delete draws a version of its own there, after
    ``lk`` like every draw."""
    names = [kind for kind in _GROUP_PARTS if kind in kinds]
    ctes = ", ".join(f"{kind}_done AS ({_GROUP_PARTS[kind]})" for kind in names)
    union = " UNION ALL ".join(f"SELECT * FROM {kind}_done" for kind in names)
    if not kept:
        return f"{_GROUP_ROWS}, {ctes} {union}"
    return (
        f"{_GROUP_ROWS}, {ctes}, done AS ({union}), "
        f"kept AS (INSERT INTO {HISTORY_TABLE} ({HISTORY_COLUMNS}) "
        f"SELECT d.namespace, d.key, CASE WHEN w.kind = 'delete' THEN nextval('{SEQUENCE}') ELSE d.version END, "
        "CASE WHEN w.kind = 'delete' THEN 'delete' ELSE 'put' END, w.hval, w.hdigest, w.hsize, w.at, w.hby, "
        "CASE WHEN w.kind = 'delete' THEN NULL ELSE d.expires_at END "
        "FROM done AS d JOIN w ON w.ns = d.namespace AND w.k = d.key WHERE w.rec) "
        "SELECT * FROM done"
    )


def _upsert_rows(upserts: list[Upsert], *, with_version: bool) -> list[list[Any]]:
    """The rows of an upsert as one JSON parameter (see read_keys): namespace,
    key, value JSON, [version,] expiry, creation. Keys never hold NUL;
    value_json travels as a JSON string, so its escapes survive verbatim."""
    return [
        [
            u.namespace,
            u.key,
            u.value_json,
            *((u.version,) if with_version else ()),
            None if u.expires_at is None else u.expires_at.isoformat(),
            u.created_at.isoformat(),
        ]
        for u in upserts
    ]
