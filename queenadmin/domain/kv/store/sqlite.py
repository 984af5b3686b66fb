"""KV rows on SQLite: one writer at a time, a counter row for versions.

A write transaction is exclusive from ``BEGIN IMMEDIATE`` (settings.py), so
no key locks are needed, and the counter row bumped inside it hands out
versions in commit order.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, ClassVar

from django.db import connection

from queenadmin.domain.kv.planner import Stored, Upsert
from queenadmin.domain.kv.store.base import COLUMNS, TABLE, Ident, Store, stored_of
from queenadmin.plumbing.db import to_db_time

#: SQLite's host parameter limit is 32766; stay far below it.
_CHUNK = 500


class SqliteStore(Store):
    # Django stores UTC as text; julianday counts days from noon, 4714 BC.
    _EPOCH: ClassVar[str] = "((julianday({0}) - 2440587.5) * 86400.0)"

    def lock_keys(self, idents: Iterable[Ident]) -> None:
        return None

    def read_keys(self, idents: Iterable[Ident], now: datetime) -> dict[Ident, Stored]:
        found: dict[Ident, Stored] = {}
        by_ns: dict[str, list[str]] = {}
        for ns, key in idents:
            by_ns.setdefault(ns, []).append(key)
        with connection.cursor() as cursor:
            for ns, keys in by_ns.items():
                for start in range(0, len(keys), _CHUNK):
                    chunk = keys[start : start + _CHUNK]
                    marks = ", ".join(["%s"] * len(chunk))
                    cursor.execute(
                        f"SELECT {COLUMNS} FROM {TABLE} WHERE namespace = %s AND key IN ({marks})",
                        [ns, *chunk],
                    )
                    for record in cursor.fetchall():
                        found[(ns, record[2])] = stored_of(record, now)
        return found

    def draw_versions(self, count: int) -> list[int]:
        if count <= 0:
            return []
        with connection.cursor() as cursor:
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

    def write_upserts(self, upserts: list[Upsert], now: datetime) -> None:
        stamp = to_db_time(now)
        with connection.cursor() as cursor:
            for start in range(0, len(upserts), 200):
                chunk = upserts[start : start + 200]
                marks = ", ".join(["(%s, %s, %s, %s, %s, %s, %s)"] * len(chunk))
                params: list[Any] = []
                for item in chunk:
                    params += [
                        item.namespace,
                        item.key,
                        item.value_json,
                        item.version,
                        to_db_time(item.expires_at),
                        to_db_time(item.created_at),
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

    def delete_pks(self, pks: list[int]) -> None:
        with connection.cursor() as cursor:
            for start in range(0, len(pks), _CHUNK):
                chunk = pks[start : start + _CHUNK]
                cursor.execute(f"DELETE FROM {TABLE} WHERE id IN ({', '.join(['%s'] * len(chunk))})", chunk)

    def reap(self, *, before: datetime, batch_size: int) -> int:
        with connection.cursor() as cursor:
            cursor.execute(
                f"DELETE FROM {TABLE} WHERE id IN (SELECT id FROM {TABLE} WHERE expires_at <= %s "
                "ORDER BY expires_at LIMIT %s)",
                [to_db_time(before), batch_size],
            )
            return int(cursor.rowcount or 0)
