"""The versioned KV store: the only writer of ``KVEntry``.

Every write draws the next value of one store-wide counter, so a key's
version only rises, across delete and re-create, and a version is a fencing
token (how each database keeps that order: ``store/postgres.py`` and
``store/sqlite.py``). Liveness is exact and lazy: a row is live while
``expires_at > now``; expired rows are invisible to reads and never block
``expect=0``. The reaper deletes them in small batches.

- ``ops``: the commands (``KVPut``, ``KVIncr``, ...) and results;
- ``planner``: what each write does to the row it finds, with no database;
- ``store``: the SQL, one class per database behind one interface;
- ``calls``: ``kv_call`` (a call as its own transaction) and ``kv_call_in_txn``
  (the same inside a caller's transaction);
- ``inprocess``: ``kv_get``, ``kv_put``, ... for Django code;
- ``keep`` and ``history``: each key's versions (issue 41).
"""

from __future__ import annotations

from queenadmin.domain.kv.calls import kv_call, kv_call_in_txn
from queenadmin.domain.kv.history import (
    HistoryPage,
    KVVersionRow,
    kv_history,
    kv_history_trim,
    kv_version,
    kv_version_at,
)
from queenadmin.domain.kv.inprocess import (
    ScannedKey,
    kv_delete,
    kv_get,
    kv_get_stored,
    kv_incr,
    kv_list,
    kv_list_stored,
    kv_namespaces,
    kv_namespaces_keep_in_txn,
    kv_namespaces_kept,
    kv_put,
    kv_reap_expired,
    kv_scan_stored,
    kv_totals,
    lifetime,
)
from queenadmin.domain.kv.ops import (
    CHANGES,
    DEFAULT_PAGE_LIMIT,
    INCR_DIGITS,
    LOCKS_NAMESPACE,
    MAX_PAGE_LIMIT,
    MAX_TTL,
    REAPER_BATCH_SIZE,
    TXN_MAX_KEYS,
    TXN_MAX_OPS,
    WRITES,
    GetManyResult,
    GetResult,
    KVCheck,
    KVDelete,
    KVGet,
    KVGetMany,
    KVGetPrefix,
    KVIncr,
    KVOp,
    KVPut,
    KVRead,
    KVResult,
    KVRow,
    KVWrite,
    Limits,
    PageResult,
    Reason,
    WriteResult,
    check_incr_number,
    check_key,
    check_namespace,
    check_ttl,
    check_value_json,
    is_write,
    refuse_permit_changes,
)
from queenadmin.domain.kv.store.base import prefix_upper_bound

__all__ = [
    "CHANGES",
    "DEFAULT_PAGE_LIMIT",
    "INCR_DIGITS",
    "LOCKS_NAMESPACE",
    "MAX_PAGE_LIMIT",
    "MAX_TTL",
    "REAPER_BATCH_SIZE",
    "TXN_MAX_KEYS",
    "TXN_MAX_OPS",
    "WRITES",
    "GetManyResult",
    "GetResult",
    "HistoryPage",
    "KVCheck",
    "KVDelete",
    "KVGet",
    "KVGetMany",
    "KVGetPrefix",
    "KVIncr",
    "KVOp",
    "KVPut",
    "KVRead",
    "KVResult",
    "KVRow",
    "KVVersionRow",
    "KVWrite",
    "Limits",
    "PageResult",
    "Reason",
    "ScannedKey",
    "WriteResult",
    "check_incr_number",
    "check_key",
    "check_namespace",
    "check_ttl",
    "check_value_json",
    "is_write",
    "kv_call",
    "kv_call_in_txn",
    "kv_delete",
    "kv_get",
    "kv_get_stored",
    "kv_history",
    "kv_history_trim",
    "kv_incr",
    "kv_list",
    "kv_list_stored",
    "kv_namespaces",
    "kv_namespaces_keep_in_txn",
    "kv_namespaces_kept",
    "kv_put",
    "kv_reap_expired",
    "kv_scan_stored",
    "kv_totals",
    "kv_version",
    "kv_version_at",
    "lifetime",
    "prefix_upper_bound",
    "refuse_permit_changes",
]
