"""A lock's life (issue 41): its events, read from its permits' history.

Every write of a permit keeps a history row in its own statement (the KV
store's, ``domain/kv/keep.py``): the version (the token), when, when it
expires, and who took it (``caller``), never the owner. A lock's events
are read from those rows, slot by slot, oldest first:

- a put after no lease (none yet, a release, or a lease that had run out)
  is ``acquired``; a lease that ran out before it is ``expired`` at its
  expiry, shown although nothing was written then (a permit that expires
  is only noticed later, by the next acquire or the reaper);
- a put while the slot's lease is live is ``renewed``, with ``marginMs``,
  how much of the lease was left;
- a delete is ``released`` (``heldMs`` since its acquire), or ``forced``
  when an operator released it from the dashboard;
- ``guard_refused`` is a transaction whose guard carried a stale token:
  kept in a transaction of its own after the rollback.

An acquire that waited is not in the permits' rows: a refused acquire
writes nothing. ``waitedMs`` is what this process saw of the same owner's
refused attempts before the grant (``note_refused``): 0 when it did not
wait, or when it waited through another process.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from django.db import transaction

from queenadmin.domain import clock
from queenadmin.domain.kv import keep
from queenadmin.domain.kv.ops import LOCKS_NAMESPACE, MAX_PAGE_LIMIT, KVCheck
from queenadmin.domain.kv.store import store
from queenadmin.domain.kv.store.base import prefix_range
from queenadmin.domain.locks.ops import check_stored_name
from queenadmin.errors import LocksBadRequest
from queenadmin.models import KVVersion

Event = Literal["acquired", "renewed", "released", "expired", "forced", "guard_refused"]
DEFAULT_EVENTS_LIMIT = 50


@dataclass(frozen=True, slots=True)
class LockEvent:
    """One event of a lock's life. ``token`` is the raw token: callers
    show only its fingerprint (``masking.mask_token``)."""

    event: Event
    at: datetime
    slot: int
    token: int
    holder: str | None
    #: Place in the newest-first order: (version, 1 for an expiry of that version's lease).
    seq: tuple[int, int]
    waited_ms: int | None = None
    held_ms: int | None = None
    margin_ms: int | None = None
    expires_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class LockEventsPage:
    events: tuple[LockEvent, ...]
    next_before: int | None


def _ms(later: datetime, earlier: datetime) -> int:
    return max(0, round((later - earlier).total_seconds() * 1000))


def _caller(value_json: str | None) -> str | None:
    try:
        value = json.loads(value_json) if value_json else None
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    caller = value.get("caller")
    return caller if isinstance(caller, str) else None


def _waited(value_json: str | None) -> int | None:
    try:
        value = json.loads(value_json) if value_json else None
    except ValueError:
        return None
    waited = value.get("waitedMs") if isinstance(value, dict) else None
    return waited if isinstance(waited, int) else None


def _slot_events(slot: int, rows: list[KVVersion], now: datetime, *, complete: bool) -> list[LockEvent]:
    """The events of one slot's rows, oldest first. Without ``complete``
    the first row is context only (what came before the page)."""
    out: list[LockEvent] = []
    lease: KVVersion | None = None  # the live lease before the current row
    acquired_at: datetime | None = None
    for index, row in enumerate(rows):
        shown = complete or index > 0
        if row.op == "refused":
            if shown:
                out.append(LockEvent("guard_refused", row.at, slot, _token_of(row), None, (row.version, 0)))
            continue
        if lease is not None and lease.expires_at is not None and lease.expires_at <= row.at:
            if shown:
                out.append(_expired(lease, lease.expires_at, slot, acquired_at))
            lease = None
        if row.op in ("delete", "forced"):
            if shown:
                held = _ms(row.at, acquired_at) if acquired_at and lease is not None else None
                event: Event = "forced" if row.op == "forced" else "released"
                token = lease.version if lease is not None else row.version
                holder = _caller(lease.value_json) if lease is not None else None
                out.append(LockEvent(event, row.at, slot, token, holder, (row.version, 0), held_ms=held))
            lease = None
            continue
        if lease is None:
            acquired_at = row.at
            if shown:
                out.append(
                    LockEvent(
                        "acquired",
                        row.at,
                        slot,
                        row.version,
                        _caller(row.value_json),
                        (row.version, 0),
                        waited_ms=_waited(row.value_json) or 0,
                        expires_at=row.expires_at,
                    )
                )
        elif shown:
            margin = _ms(lease.expires_at, row.at) if lease.expires_at is not None else None
            out.append(
                LockEvent(
                    "renewed",
                    row.at,
                    slot,
                    row.version,
                    _caller(row.value_json),
                    (row.version, 0),
                    margin_ms=margin,
                    expires_at=row.expires_at,
                )
            )
        lease = row
    if lease is not None and lease.expires_at is not None and lease.expires_at <= now:
        out.append(_expired(lease, lease.expires_at, slot, acquired_at))
    return out


def _expired(lease: KVVersion, expires_at: datetime, slot: int, acquired_at: datetime | None) -> LockEvent:
    """The expiry of ``lease`` (at ``expires_at``, its own), placed when it ran out."""
    held = _ms(expires_at, acquired_at) if acquired_at else None
    return LockEvent(
        "expired", expires_at, slot, lease.version, _caller(lease.value_json), (lease.version, 1), held_ms=held
    )


def _token_of(row: KVVersion) -> int:
    try:
        value = json.loads(row.value_json or "{}")
    except ValueError:
        return 0
    token = value.get("token") if isinstance(value, dict) else None
    return token if isinstance(token, int) else 0


def _slot_of(name: str, key: str) -> int | None:
    head, _, tail = key.rpartition("#")
    return int(tail) if head == name and tail.isdigit() else None


def lock_events(
    *, name: str, before: int | None = None, limit: int = DEFAULT_EVENTS_LIMIT, now: datetime | None = None
) -> LockEventsPage:
    """One page of ``name``'s events (every slot of a semaphore), newest
    first, older than ``before`` (a page's ``next_before``).

    Raises ``LocksBadRequest`` for a bad name or limit. A lock with no
    kept history answers an empty page.
    """
    name = check_stored_name(name)
    if not 1 <= limit <= MAX_PAGE_LIMIT:
        raise LocksBadRequest(f"limit must be from 1 to {MAX_PAGE_LIMIT}", reason="locks_bad_limit")
    now = now or clock.now()
    rows = KVVersion.objects.filter(prefix_range("key", f"{name}#"), namespace=LOCKS_NAMESPACE)
    keys = sorted({k for k in rows.values_list("key", flat=True).distinct() if _slot_of(name, k) is not None})
    events: list[LockEvent] = []
    for key in keys:
        slot = _slot_of(name, key)
        assert slot is not None
        mine = KVVersion.objects.filter(namespace=LOCKS_NAMESPACE, key=key)
        page = mine.filter(version__lt=before) if before is not None else mine
        found = list(page.order_by("-version")[: limit + 2])
        complete = len(found) < limit + 2
        found.reverse()
        if before is not None and found:
            # The slot's next row after the page decides whether its last
            # lease expired: it is past the cursor, so read it apart.
            newer = mine.filter(version__gte=before).order_by("version").first()
            horizon = newer.at if newer is not None else now
        else:
            horizon = now
        for event in _slot_events(slot, found, horizon, complete=complete):
            if before is None or event.seq[0] < before:
                events.append(event)
    events.sort(key=lambda e: e.seq, reverse=True)
    page_events = events[:limit]
    if len(events) > limit and page_events[-1].seq[1] == 1:
        # Never end on an expiry: its lease comes next, at the same version.
        page_events = events[: limit + 1]
    more = len(events) > len(page_events)
    return LockEventsPage(tuple(page_events), page_events[-1].seq[0] if more else None)


# -- writes -------------------------------------------------------------------------


@transaction.atomic(durable=True)
def lock_guard_refused(*, check: KVCheck, now: datetime | None = None) -> None:
    """Keep that a transaction guarded by ``check`` (a lock permit at a
    stale token) was refused: after its rollback, in a transaction of its
    own, under the permit's key lock. Outermost call."""
    if check.namespace != LOCKS_NAMESPACE or not keep.recorded(LOCKS_NAMESPACE):
        return
    now = now or clock.now()
    the_store = store()
    the_store.lock_keys([(check.namespace, check.key)])
    (version,) = the_store.draw_versions(1)
    text = json.dumps({"token": check.expect})
    the_store.keep_versions([(check.namespace, check.key, version, "refused", text, None, len(text), now, None, None)])


def mark_forced_in_txn(*, key: str) -> None:
    """Mark the permit ``key``'s newest history row, its delete, as an
    operator's force release. Inside the delete's transaction."""
    store().retag_newest(namespace=LOCKS_NAMESPACE, key=key, was="delete", now_op="forced")


# -- waits seen by this process ---------------------------------------------------------

_waits_lock = threading.Lock()
#: (lock name, owner) -> monotonic time of the first refused acquire since the last grant.
_waiting: dict[tuple[str, str], float] = {}
_MAX_WAITING = 10_000


def note_refused(name: str, owner: str | None) -> None:
    """An acquire of ``name`` by ``owner`` was refused (held): its wait
    begins, unless it began already."""
    if owner is None:
        return
    with _waits_lock:
        if len(_waiting) >= _MAX_WAITING:
            _waiting.clear()
        _waiting.setdefault((name, owner), time.monotonic())


def waiting_ms(name: str, owner: str | None) -> int | None:
    """How long ``owner`` has waited for ``name`` as this process saw it
    (None: no refusal seen)."""
    if owner is None:
        return None
    with _waits_lock:
        began = _waiting.get((name, owner))
    return None if began is None else round((time.monotonic() - began) * 1000)


def note_granted(name: str, owner: str | None) -> None:
    """``owner``'s acquire of ``name`` was granted: its wait, if any, ends."""
    if owner is not None:
        with _waits_lock:
            _waiting.pop((name, owner), None)
