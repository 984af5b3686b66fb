"""A key's history (issue 41): every put, incr and delete, read and trimmed.

Each write keeps its row (``KVVersion``) in its own statement or
transaction (``store/``, ``keep``), so history and state always agree: a
version is in the history exactly when it committed. A delete draws a
version of its own (etcd's delete revision), so a key's versions are
distinct and rise in commit order, and a page of them is ordered by
version alone. A lock permit's rows keep no owner (``keep.kept``) and are
read as a lock's life (``domain/locks/history.py``), never as a key's.

Trimming (``kv_history_trim``, from the retention loop) keeps none older
than ``HISTORY_MAX_AGE_SECONDS`` and, per key, at most
``HISTORY_MAX_ENTRIES`` versions plus a slack (``count_slack``) plus what
the key writes between two passes of the loop.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from django.db import transaction

from queenadmin.conf import settings
from queenadmin.domain import clock
from queenadmin.domain.kv.ops import MAX_PAGE_LIMIT, check_key, check_stored_namespace
from queenadmin.domain.kv.store import store
from queenadmin.errors import KVBadRequest
from queenadmin.models import KVVersion

DEFAULT_HISTORY_LIMIT = 50
#: History rows one trim statement deletes at most.
TRIM_BATCH_SIZE = 1000
#: History ids one count-trim statement looks through for written keys.
TRIM_ID_WINDOW = 10_000

Op = Literal["put", "incr", "delete"]


@dataclass(frozen=True, slots=True)
class KVVersionRow:
    """One version of a key. ``value`` is None for a delete and for a value
    kept only as its ``digest`` (``keep.kept``)."""

    version: int
    op: Op
    value: Any
    kept: bool
    digest: str | None
    size: int
    at: datetime
    by: str | None


@dataclass(frozen=True, slots=True)
class HistoryPage:
    """Versions newest first; ``next_before`` continues the page (None: done)."""

    versions: tuple[KVVersionRow, ...]
    next_before: int | None


def _row(record: KVVersion) -> KVVersionRow:
    kept = record.value_json is not None
    return KVVersionRow(
        version=record.version,
        op=record.op,  # type: ignore[arg-type]
        value=json.loads(record.value_json) if record.value_json is not None else None,
        kept=kept,
        digest=record.digest,
        size=record.size,
        at=record.at,
        by=record.actor,
    )


def _versions(namespace: str, key: str) -> Any:
    return KVVersion.objects.filter(namespace=check_stored_namespace(namespace), key=check_key(key))


def kv_history(
    *, namespace: str, key: str, before: int | None = None, limit: int = DEFAULT_HISTORY_LIMIT
) -> HistoryPage:
    """One page of ``key``'s versions, newest first, below ``before``.

    Raises ``KVBadRequest`` for a bad namespace, key or limit. An unknown
    key answers an empty page (its history may have been trimmed).
    """
    if not 1 <= limit <= MAX_PAGE_LIMIT:
        raise KVBadRequest(f"limit must be from 1 to {MAX_PAGE_LIMIT}", reason="kv_bad_limit")
    rows = _versions(namespace, key)
    if before is not None:
        rows = rows.filter(version__lt=before)
    found = [_row(r) for r in rows.order_by("-version")[: limit + 1]]
    more = len(found) > limit
    found = found[:limit]
    return HistoryPage(tuple(found), found[-1].version if more else None)


def kv_version_at(*, namespace: str, key: str, at: datetime) -> KVVersionRow | None:
    """The version of ``key`` in effect at ``at`` (the newest written at or
    before it; a delete when the key was deleted), or None when none is kept.
    A TTL's expiry is not a version: the value shown may have expired."""
    found = _versions(namespace, key).filter(at__lte=at).order_by("-version").first()
    return None if found is None else _row(found)


def kv_version(*, namespace: str, key: str, version: int) -> KVVersionRow | None:
    """Version ``version`` of ``key``, or None when it is not kept."""
    found = _versions(namespace, key).filter(version=version).first()
    return None if found is None else _row(found)


@dataclass(frozen=True, slots=True)
class Trimmed:
    old: int
    extra: int


#: How far past ``HISTORY_MAX_ENTRIES`` a key may go before its count trim:
#: a tenth of the limit. A key is then trimmed back to the limit in one
#: statement once per tenth of the limit it writes, not a little at every
#: pass, and a key that one pass left at the limit is not probed again
#: until it grows.
SLACK_SHARE = 10


def count_slack(keep_newest: int) -> int:
    """Rows a key may hold past ``keep_newest`` before it is trimmed."""
    return keep_newest // SLACK_SHARE


def kv_history_trim(*, now: datetime | None = None) -> Trimmed:
    """Trim every key's history to the retention settings; must not be
    called inside a transaction (each step is a short transaction of its own).

    Rows older than ``HISTORY_MAX_AGE_SECONDS`` go, oldest first, in
    batches. Then the keys written since the last pass (of any process:
    the mark is a row of the history table, ``store.base.MARK_KEY``) that
    hold more than ``HISTORY_MAX_ENTRIES`` plus ``count_slack`` rows are
    cut back to ``HISTORY_MAX_ENTRIES``, each in one statement. A key so
    holds at most the limit, plus the slack, plus what it writes between
    two passes. One trimmer at a time over all the processes
    (``Store.trim_turn``): the others skip.
    """
    now = now or clock.now()
    old = extra = 0
    max_age = settings.HISTORY_MAX_AGE_SECONDS
    if max_age > 0:
        while True:
            step = _trim_old(now - timedelta(seconds=max_age))
            if step is None:
                return Trimmed(old, extra)
            old += step
            if step < TRIM_BATCH_SIZE:
                break
    keep_newest = settings.HISTORY_MAX_ENTRIES
    if keep_newest > 0:
        while True:
            step_done = _trim_extra(keep_newest, now)
            if step_done is None:
                break
            count, more = step_done
            extra += count
            if not more:
                break
    return Trimmed(old, extra)


@transaction.atomic(durable=True)
def _trim_old(before: datetime) -> int | None:
    the_store = store()
    if not the_store.trim_turn():
        return None
    return the_store.trim_old(before=before, batch_size=TRIM_BATCH_SIZE)


@transaction.atomic(durable=True)
def _trim_extra(keep_newest: int, now: datetime) -> tuple[int, bool] | None:
    """One window of the count trim from the shared mark: the rows it
    deleted and whether windows remain; None when another process trims.

    Ids are drawn at insert, not at commit, so a write committing after
    this pass may sit below the new mark: its key is looked at again with
    its next write, and may hold that one row past the bound until then.
    """
    the_store = store()
    if not the_store.trim_turn():
        return None
    last = the_store.last_history_id()
    after_id = min(the_store.trim_mark(), last)
    upto = min(last, after_id + TRIM_ID_WINDOW)
    if upto <= after_id:
        return 0, False
    over = the_store.keys_over(after_id=after_id, upto_id=upto, count=keep_newest + count_slack(keep_newest))
    deleted = sum(the_store.trim_key(ident, keep_newest=keep_newest) for ident in over)
    the_store.set_trim_mark(upto, now)
    return deleted, upto < last
