"""The store interface, and the SQL both databases share."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, ClassVar

from django.db import connection
from django.db.models import Q

from queenadmin.domain.kv import keep
from queenadmin.domain.kv.ops import PAGE_READ_BUDGET, KVDelete, KVPut, KVRow
from queenadmin.domain.kv.planner import FastPath, Stored, Upsert
from queenadmin.plumbing import db

TABLE = "queenadmin_kventry"
COLUMNS = "id, namespace, key, value_json, version, expires_at, created_at, updated_at"
Ident = tuple[str, str]
#: (key, value JSON text, written at and expires at as Unix seconds) of ``Store.scan_values``.
ScannedRow = tuple[str, str, float, float | None]
HISTORY_TABLE = "queenadmin_kvversion"
COUNTS_TABLE = "queenadmin_kvnamespacecount"
HISTORY_COLUMNS = "namespace, key, version, op, value_json, digest, size, at, actor, expires_at"
#: The one history row that is not a write: in the empty namespace, which
#: no key can have (``check_stored_namespace``), its ``version`` is the
#: history id up to which the count limit was applied, shared by every
#: process and replica (``history.kv_history_trim``); its ``at`` moves at
#: each pass, so the age limit never takes it.
MARK_NAMESPACE = ""
MARK_KEY = "count-trim-mark"
#: A lone write for ``write_group``: its one-statement form, the command,
#: its ``now``, and who wrote (for the key's history).
GroupItem = tuple[FastPath, KVPut | KVDelete, datetime, str | None]
#: What a one-statement write did: the version and value written or deleted.
Written = tuple[int, str]


def stored_of(record: Sequence[Any], now: datetime) -> Stored:
    """A ``Stored`` from a row of ``COLUMNS``."""
    return Stored(
        pk=int(record[0]),
        namespace=record[1],
        key=record[2],
        value_json=record[3],
        version=int(record[4]),
        expires_at=db.from_db_time(record[5]),
        created_at=db.from_db_time(record[6]),
        updated_at=db.from_db_time(record[7]),
        now=now,
    )


def row_of(record: Sequence[Any]) -> KVRow:
    """A ``KVRow`` from a row of ``COLUMNS``."""
    return KVRow(
        namespace=record[1],
        key=record[2],
        value=json.loads(record[3]),
        version=int(record[4]),
        expires_at=db.from_db_time(record[5]),
        created_at=db.from_db_time(record[6]),
        updated_at=db.from_db_time(record[7]),
    )


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


def prefix_range(field: str, prefix: str) -> Q:
    """``field`` starts with ``prefix``, as a byte-order range on its index.

    Not ``startswith``: that is LIKE, case-insensitive on SQLite and with
    ``%`` and ``_`` as wildcards, and it may not use the index.
    """
    upper = prefix_upper_bound(prefix)
    match = Q(**{f"{field}__gte": prefix})
    return match & Q(**{f"{field}__lt": upper}) if upper is not None else match


class Store:
    """What the KV domain needs of a database. Subclasses fill in the rest."""

    #: Whether this store has the one-statement forms below (``put_fast``,
    #: ``create_fast``, ``cas_fast``, ``delete_fast``, ``put_many_fast``): a lone write
    #: that ``planner.fast_path_of`` names, or a call of unconditional puts
    #: only, as one autocommit statement instead of a transaction.
    one_statement_writes = False

    def lock_keys(self, idents: Iterable[Ident]) -> None:
        """Hold every key until the transaction ends (one fixed order)."""
        raise NotImplementedError

    def read_keys(self, idents: Iterable[Ident], now: datetime) -> dict[Ident, Stored]:
        """Every stored row, live or expired, of the given keys."""
        raise NotImplementedError

    def draw_versions(self, count: int) -> list[int]:
        """``count`` new versions from the store-wide counter, ascending.

        Call only while holding the locks of every key they will stamp.
        """
        raise NotImplementedError

    def write_upserts(self, upserts: list[Upsert], now: datetime) -> None:
        raise NotImplementedError

    def lock_and_read(self, idents: Sequence[Ident], now: datetime) -> dict[Ident, Stored]:
        """``lock_keys(idents)``, then ``read_keys(idents)`` as of after the locks."""
        self.lock_keys(idents)
        return self.read_keys(idents, now)

    def stamp_and_write(self, upserts: list[Upsert], now: datetime, *, by: str | None = None) -> None:
        """Give ``upserts`` new versions, ascending in list order, and write
        them, each one kept in its key's history (``keep.recorded``) as
        written ``by``.

        Call only while holding the locks of every key they stamp.
        """
        versions = self.draw_versions(len(upserts))
        for upsert, version in zip(upserts, versions, strict=True):
            upsert.version = version
        self.write_upserts(upserts, now)
        self.keep_versions(
            [
                (
                    u.namespace,
                    u.key,
                    u.version,
                    u.op,
                    *keep.kept(u.value_json, u.namespace, u.waited_ms),
                    now,
                    by,
                    u.expires_at,
                )
                for u in upserts
                if keep.recorded(u.namespace)
            ]
        )

    def keep_deletes(self, idents: Sequence[Ident], now: datetime, *, by: str | None = None) -> None:
        """Keep the deletes of ``idents`` in their keys' history, each with a
        version of its own. Call only while holding the keys' locks."""
        kept = [ident for ident in idents if keep.recorded(ident[0])]
        versions = self.draw_versions(len(kept))
        self.keep_versions(
            [(ns, key, v, "delete", *keep.DELETED, now, by, None) for (ns, key), v in zip(kept, versions, strict=True)]
        )

    def keep_versions(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Insert history rows (``HISTORY_COLUMNS``) in the caller's transaction."""
        if not rows:
            return
        with connection.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO {HISTORY_TABLE} ({HISTORY_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [(*row[:7], db.to_db_time(row[7]), row[8], db.to_db_time(row[9])) for row in rows],
            )

    def delete_pks(self, pks: list[int]) -> None:
        raise NotImplementedError

    def reap(self, *, before: datetime, batch_size: int) -> int:
        """Delete up to ``batch_size`` rows expired at ``before``; the count."""
        raise NotImplementedError

    def read_page(
        self, *, namespace: str, prefix: str, after: str, limit: int, now: datetime | None
    ) -> tuple[tuple[KVRow, ...], bool, str | None]:
        """Rows under ``prefix`` (all when empty) in byte order, after ``after``.

        Returns the rows, whether more follow, and the key to continue
        after. ``now=None`` includes expired rows (the console's
        ``includeExpired``).
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
            params.append(db.to_db_time(now))
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT {COLUMNS} FROM {TABLE} WHERE {' AND '.join(where)} ORDER BY key LIMIT %s",
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
            rows.append(row_of(record))
        next_after = rows[-1].key if truncated and rows else None
        return tuple(rows), truncated, next_after

    # ----------------------------------------------------------------------
    # One-statement forms, where ``one_statement_writes``; each runs in
    # autocommit

    def put_fast(self, op: KVPut, now: datetime, by: str | None = None) -> int:
        """An unconditional put; its new version."""
        raise NotImplementedError

    def create_fast(self, op: KVPut, now: datetime, by: str | None = None) -> int | None:
        """A put that must not exist, when no live row exists; its version.

        A row expired at ``now`` is taken over (the key created anew). None
        when a live row exists: nothing is written.
        """
        raise NotImplementedError

    def cas_fast(self, op: KVPut, now: datetime, by: str | None = None) -> int | None:
        """A put at ``expect`` (above 0), when the row is live at that
        version; its new version. None when nothing was written."""
        raise NotImplementedError

    def delete_fast(self, op: KVDelete, now: datetime, by: str | None = None) -> tuple[int, str] | None:
        """Delete of a live key (at ``expect`` when given); (version, value_json).

        None when nothing was deleted.
        """
        raise NotImplementedError

    def put_many_fast(self, ops: Sequence[KVPut], now: datetime, by: str | None = None) -> dict[Ident, int]:
        """A call of unconditional puts only, as one statement; the versions."""
        raise NotImplementedError

    def write_group(self, items: Sequence[GroupItem]) -> list[Written | None]:
        """Several lone writes of other callers, of distinct keys, as one
        statement and one commit (``group``): one answer per item, in order.

        Each item is what its one-statement form would do alone (``put_fast``,
        ``create_fast``, ``cas_fast``, ``delete_fast``) at its own ``now``:
        (version, value_json) when written or deleted, None when its
        condition failed and nothing of it was written.
        """
        raise NotImplementedError

    # ----------------------------------------------------------------------
    # History trimming (``history.kv_history_trim``)

    def trim_turn(self) -> bool:
        """Whether this transaction may trim: one trimmer at a time."""
        return True

    def trim_old(self, *, before: datetime, batch_size: int) -> int:
        """Delete the history rows older than ``before`` among the oldest
        ``batch_size`` (by id, which follows time), the count trim's mark
        apart; the count. Bounded by the batch, so it needs no index on the
        time."""
        with connection.cursor() as cursor:
            cursor.execute(
                f"DELETE FROM {HISTORY_TABLE} WHERE id IN (SELECT id FROM "
                f"(SELECT id, at, namespace FROM {HISTORY_TABLE} ORDER BY id LIMIT %s) AS s "
                "WHERE at < %s AND namespace <> %s)",
                [batch_size, db.to_db_time(before), MARK_NAMESPACE],
            )
            return int(cursor.rowcount or 0)

    def keys_over(self, *, after_id: int, upto_id: int, count: int) -> list[Ident]:
        """The keys written by the history rows of ids ``after_id`` to
        ``upto_id`` that hold more than ``count`` rows.

        Each key's probe walks at most ``count`` + 1 entries of its index
        (``LIMIT 1 OFFSET count``), once per key: a subquery joined to the
        rows instead ran once per row, and at 12,000 rows of 8 hammered
        locks took 3.9 s a pass on PostgreSQL (1.3 million index pages).
        """
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT c.namespace, c.key FROM (SELECT DISTINCT namespace, key FROM {HISTORY_TABLE} "
                "WHERE id > %s AND id <= %s AND namespace <> %s) AS c "
                f"WHERE EXISTS (SELECT 1 FROM {HISTORY_TABLE} AS x WHERE x.namespace = c.namespace "
                "AND x.key = c.key ORDER BY x.version DESC LIMIT 1 OFFSET %s)",
                [after_id, upto_id, MARK_NAMESPACE, count],
            )
            return [(ns, key) for ns, key in cursor.fetchall()]

    def trim_key(self, ident: Ident, *, keep_newest: int) -> int:
        """Delete every version of ``ident`` but the newest ``keep_newest``,
        in one statement; the count."""
        namespace, key = ident
        with connection.cursor() as cursor:
            cursor.execute(
                f"DELETE FROM {HISTORY_TABLE} WHERE namespace = %s AND key = %s AND version < "
                f"(SELECT version FROM {HISTORY_TABLE} WHERE namespace = %s AND key = %s "
                "ORDER BY version DESC LIMIT 1 OFFSET %s)",
                [namespace, key, namespace, key, keep_newest - 1],
            )
            return int(cursor.rowcount or 0)

    def trim_mark(self) -> int:
        """The history id up to which the count limit was applied (0: none)."""
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT version FROM {HISTORY_TABLE} WHERE namespace = %s AND key = %s", [MARK_NAMESPACE, MARK_KEY]
            )
            found = cursor.fetchone()
        return int(found[0]) if found else 0

    def set_trim_mark(self, upto_id: int, now: datetime) -> None:
        """Store the count trim's mark; inside the trim's turn (``trim_turn``)."""
        params = [upto_id, db.to_db_time(now), MARK_NAMESPACE, MARK_KEY]
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {HISTORY_TABLE} SET version = %s, at = %s WHERE namespace = %s AND key = %s", params
            )
            if cursor.rowcount:
                return
            cursor.execute(
                f"INSERT INTO {HISTORY_TABLE} ({HISTORY_COLUMNS}) VALUES (%s, %s, %s, 'mark', NULL, NULL, 0, %s, NULL, NULL)",
                [MARK_NAMESPACE, MARK_KEY, upto_id, db.to_db_time(now)],
            )

    def retag_newest(self, *, namespace: str, key: str, was: str, now_op: str) -> None:
        """Rename the op of ``key``'s newest history row, if it is ``was``
        (inside the transaction that wrote it)."""
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {HISTORY_TABLE} SET op = %s WHERE namespace = %s AND key = %s AND op = %s AND version = "
                f"(SELECT max(version) FROM {HISTORY_TABLE} WHERE namespace = %s AND key = %s)",
                [now_op, namespace, key, was, namespace, key],
            )

    def last_history_id(self) -> int:
        """The newest history id of a write (0 for none): the count trim's
        mark row apart, whose own id may be newer than the writes it marks."""
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT coalesce(max(id), 0) FROM {HISTORY_TABLE} WHERE namespace <> %s", [MARK_NAMESPACE])
            return int(cursor.fetchone()[0])

    # ----------------------------------------------------------------------
    # Reads for the console

    def namespaces(self) -> list[tuple[str, int]]:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT namespace, count(*) FROM {TABLE} GROUP BY namespace ORDER BY namespace")
            return [(ns, int(n)) for ns, n in cursor.fetchall()]

    def keep_namespace_counts(self, counts: Sequence[tuple[str, int]], at: datetime) -> None:
        """Make the kept counts (``KVNamespaceCount``) ``counts`` as of ``at``.

        A row for the empty namespace, which no key can have, says when
        the store was counted, empty or not (its ``keys`` is 0). Rows are
        upserted in namespace order, then the namespaces this count did not
        see are deleted: two steps writing at once (the sampler and an
        operator's refresh) wait for each other on the first row, and the
        later one's count is what stays.
        """
        # No key is stored in the empty namespace (``check_stored_namespace``).
        rows = sorted([(MARK_NAMESPACE, 0), *((ns, n) for ns, n in counts if ns)])
        when = db.to_db_time(at)
        with connection.cursor() as cursor:
            # In slices: SQLite takes at most 32,766 parameters a statement.
            for start in range(0, len(rows), 1_000):
                part = rows[start : start + 1_000]
                values = ", ".join(["(%s, %s, %s)"] * len(part))
                params = [value for namespace, n in part for value in (namespace, n, when)]
                cursor.execute(
                    f"INSERT INTO {COUNTS_TABLE} (namespace, keys, counted_at) VALUES {values}"
                    " ON CONFLICT (namespace) DO UPDATE SET keys = excluded.keys, counted_at = excluded.counted_at",
                    params,
                )
            cursor.execute(f"DELETE FROM {COUNTS_TABLE} WHERE counted_at <> %s", [when])

    def kept_namespace_counts(self) -> tuple[datetime | None, list[tuple[str, int]]]:
        """The kept counts by namespace, and when they were counted (None: never)."""
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT namespace, keys, counted_at FROM {COUNTS_TABLE} ORDER BY namespace")
            rows = cursor.fetchall()
        at = next((db.from_db_time(when) for ns, _, when in rows if ns == MARK_NAMESPACE), None)
        return at, [(ns, int(n)) for ns, n, _ in rows if ns != MARK_NAMESPACE]

    #: SQL of the timestamp column ``{0}`` as Unix seconds (each subclass's).
    _EPOCH: ClassVar[str] = ""

    def scan_values(self, *, namespace: str, limit: int) -> list[ScannedRow]:
        """(key, value JSON text, written at, expires at or None) of the first
        ``limit`` rows of ``namespace`` in key order, expired ones included.

        Times come as Unix seconds from the database: a dashboard reads
        hundreds of rows a render, and a float costs a fraction of what a
        timestamp does to load.
        """
        sql = (
            f"SELECT key, value_json, {self._EPOCH.format('updated_at')}, {self._EPOCH.format('expires_at')}"
            f" FROM {TABLE} WHERE namespace = %s ORDER BY key LIMIT %s"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, [namespace, limit])
            return [
                (key, value, float(written), None if expires is None else float(expires))
                for key, value, written, expires in cursor.fetchall()
            ]

    def totals(self) -> tuple[int, int]:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*), coalesce(sum(length(key) + length(value_json)), 0) FROM {TABLE}")
            rows, size = cursor.fetchone()
        return int(rows), int(size)
