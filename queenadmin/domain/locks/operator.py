"""Locks for operators: every live permit, page by page, and force release.

``locks_page`` lists permits across names (one keyset page of the
``queen-locks`` namespace, plus one aggregate for how many permits each
shown name holds: two queries whatever the data). ``lock_force_release``
deletes a permit on an operator's word, as a compare-and-set on the lease
the operator saw, and writes its audit entry in the same transaction.

Results carry raw owners and tokens: callers that show people (the
dashboard) mask them with ``domain.masking.mask_token``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import reduce
from operator import or_
from typing import Literal

from django.db import transaction
from django.db.models import Count, Q

from queenadmin.domain import clock, kv
from queenadmin.domain.audit import Who
from queenadmin.domain.locks import history as lock_history
from queenadmin.domain.locks import tally
from queenadmin.domain.locks.ops import (
    NAMESPACE,
    caller_of,
    check_slot,
    check_stored_name,
    owner_of,
    since_of,
    slot_of,
)
from queenadmin.domain.masking import mask_token
from queenadmin.models import KVEntry


@dataclass(frozen=True)
class Permit:
    """One live permit as an operator sees it (raw values: mask to show)."""

    name: str
    slot: int
    owner: str | None
    token: int
    since: datetime
    renewed_at: datetime
    expires_at: datetime | None
    #: Live permits of ``name`` right now (the semaphore's holders).
    held: int
    #: Who took the lease (a token's name, a JWT's ``sub``, an in-process
    #: caller's word); None when nobody was named. No credential: shown as is.
    caller: str | None = None

    @property
    def key(self) -> str:
        return f"{self.name}#{self.slot}"

    @property
    def renewed(self) -> bool:
        return self.renewed_at > self.since


@dataclass(frozen=True)
class PermitPage:
    permits: tuple[Permit, ...]
    #: The KV key to continue after, when more follow.
    next_after: str | None


@dataclass(frozen=True)
class ServerLock:
    """A lock the server's own loops hold (dogfooded: ordinary permits)."""

    name: str
    #: What holds its permits.
    holder: str
    #: What a force release of one of its permits does, for the warning.
    release_effect: str


#: The locks of the server's loops, by name (``timers.ops.LOOP_LOCK`` and
#: ``queues.sampler.SAMPLER_LOCK``; a test keeps them equal, and importing
#: the loops here would import the log into the locks).
SERVER_LOCKS: dict[str, ServerLock] = {
    lock.name: lock
    for lock in (
        ServerLock(
            "queenadmin.timers",
            "the timer loops (one permit per firing loop)",
            "The loop holding this permit stops firing timers: the step in flight commits nothing "
            "(its guard fails) and its timers stay due. Another loop, on this or another replica, "
            "takes the free permit at its next poll and fires them: timers are late by up to a poll, "
            "never lost, and the log's dedup keeps a timer from firing twice.",
        ),
        ServerLock(
            "queenadmin.sampler",
            "the statistics sampler (one per deployment)",
            "The sampler holding this permit stops sampling: the sample in flight commits nothing "
            "(its guard fails). Another replica's sampler (or this one's, at its next tick) takes "
            "the permit and resumes on the same grid of ticks, so the charts may miss a sample or two.",
        ),
    )
}


def server_lock(name: str) -> ServerLock | None:
    """The server's own lock ``name``, or None for a user's lock."""
    return SERVER_LOCKS.get(name)


def server_permits_held(*, now: datetime | None = None) -> int:
    """Live permits of the server's own locks (a handful: one statement)."""
    now = now or clock.now()
    ranges = [Q(key__gte=f"{name}#", key__lt=f"{name}$") for name in SERVER_LOCKS]
    return KVEntry.objects.live(now).filter(reduce(or_, ranges), namespace=NAMESPACE).count()


def _split(key: str) -> tuple[str, int] | None:
    name, sep, _tail = key.rpartition("#")
    if not sep:
        return None
    slot = slot_of(name, key)
    return None if slot is None else (name, slot)


def locks_page(*, prefix: str = "", after: str = "", limit: int = 50, now: datetime | None = None) -> PermitPage:
    """Live permits whose lock name starts with ``prefix``, by name and key.

    ``after`` is the ``next_after`` of the previous page. Two queries.
    Takes no lock.
    """
    now = now or clock.now()
    page = kv.kv_list(namespace=NAMESPACE, prefix=prefix, after=after, limit=limit, now=now)
    found = [(row, _split(row.key)) for row in page.rows]
    names = sorted({split[0] for _, split in found if split is not None})
    held: dict[str, int] = {}
    if names:
        ranges = [Q(key__gte=f"{name}#", key__lt=f"{name}$") for name in names]
        counts = (
            KVEntry.objects.live(now)
            .filter(reduce(or_, ranges), namespace=NAMESPACE)
            .aggregate(**{f"n{i}": Count("id", filter=r) for i, r in enumerate(ranges)})
        )
        held = {name: int(counts[f"n{i}"] or 0) for i, name in enumerate(names)}
    permits = tuple(
        Permit(
            name=split[0],
            slot=split[1],
            owner=owner_of(row.value),
            token=row.version,
            since=since_of(row),
            renewed_at=row.updated_at,
            expires_at=row.expires_at,
            held=held.get(split[0], 1),
            caller=caller_of(row.value),
        )
        for row, split in found
        if split is not None
    )
    return PermitPage(permits, page.next_after if page.truncated else None)


def lease_mark(*, owner: str | None, since: datetime) -> str:
    """What identifies one lease across its renews, safe to show and post.

    A renew changes the token but keeps the owner and ``since``, so a force
    release aims at the lease the operator saw, not at a token that the
    holder's next renew replaces.
    """
    return (mask_token(f"{owner}|{since.isoformat()}") or "").rstrip("…")


@dataclass(frozen=True)
class ForceRelease:
    """The outcome of a force release.

    ``released``: the permit is gone and ``token`` (the last one) is dead.
    Otherwise ``reason`` says why nothing changed: ``gone`` (no live permit
    in the slot: it expired or was released) or ``changed`` (another lease
    holds the slot now; ``current`` is it).
    """

    name: str
    slot: int
    released: bool
    reason: Literal["gone", "changed"] | None = None
    token: int | None = None
    owner: str | None = None
    current: Permit | None = None


@transaction.atomic(durable=True)
def lock_force_release(*, name: str, slot: int, lease: str, who: Who, now: datetime | None = None) -> ForceRelease:
    """Delete the permit ``name#slot`` if it is still the lease ``lease``.

    ``lease`` is ``lease_mark`` of the permit the operator saw. The delete
    is a compare-and-set on the permit's current version, so a renew racing
    it wins and the answer is ``changed``. Released: the holder's token is
    dead, its next renew answers lost and every write it guards with the
    token fails. Writes ``who``'s audit entry (owner and token masked) in
    the same transaction when it releases. Must be the outermost call.
    """
    now = now or clock.now()
    # A lock named before the rule of names is released too.
    name, slot = check_stored_name(name), check_slot(slot)
    key = f"{name}#{slot}"
    got = kv.kv_call_in_txn([kv.KVGet(NAMESPACE, key)], now=now)[0]
    assert isinstance(got, kv.GetResult)
    row = got.row
    if row is None:
        return ForceRelease(name, slot, False, "gone")
    owner, since = owner_of(row.value), since_of(row)
    if lease_mark(owner=owner, since=since) != lease:
        current = Permit(name, slot, owner, row.version, since, row.updated_at, row.expires_at, 1, caller_of(row.value))
        return ForceRelease(name, slot, False, "changed", current=current)
    deleted = kv.kv_call_in_txn([kv.KVDelete(NAMESPACE, key, expect=row.version)], now=now, permits=True)[0]
    assert isinstance(deleted, kv.WriteResult)
    if not deleted.applied:
        return ForceRelease(name, slot, False, "changed")
    lock_history.mark_forced_in_txn(key=key)
    held = max(0.0, (now - since).total_seconds())
    transaction.on_commit(lambda: tally.hold(held))
    expires = clock.iso_micros_z(row.expires_at) or "never"
    caller = caller_of(row.value)
    taken = f", taken by {caller}" if caller is not None else ""
    who.record_in_txn(
        now=now,
        action="lock.release",
        target=key,
        before=f"held by owner {mask_token(owner) or '(none)'}{taken}, token {mask_token(row.version)}, expiring {expires}",
        after="released; the token is dead",
    )
    return ForceRelease(name, slot, True, token=row.version, owner=owner)
