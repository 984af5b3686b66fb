"""The in-process lock API for Django code in the same project.

The flexiq style of the seeds: ``hold()``/``ahold()`` scoped forms that wait,
renew in the background every ttl/3 and report a lost lease; an explicit
``Lock`` handle; ``info()`` for people, with owners and tokens masked; and
``reap_expired()``. Everything goes through the wire operations of
``queenadmin.domain.locks.calls``, so a lease taken here and one taken over HTTP
are the same KV row.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import TracebackType
from typing import Literal

from channels.db import database_sync_to_async
from django.db import connection

from queenadmin.domain import clock, kv
from queenadmin.domain.locks.calls import lock_acquire, lock_holders, lock_release, lock_renew
from queenadmin.domain.locks.ops import (
    RETRY_INTERVAL,
    check_caller,
    check_limit,
    check_name,
    check_owner,
    check_ttl,
    guard_check,
)
from queenadmin.domain.masking import mask_token
from queenadmin.errors import LockLost, LockNotAcquired, LockNotHeld

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------
# Reading for people: masked credentials


@dataclass(frozen=True)
class HolderInfo:
    """A live permit as shown to a viewer.

    ``owner`` and ``token`` are bearer credentials: they are raw only when
    the viewer is this holder, else fingerprints (``masked`` is then True).
    ``caller``, who took the lease, is no credential and always shown.
    """

    slot: int
    owner: str | None
    token: int | str | None
    masked: bool
    since: datetime | None
    expires_at: datetime | None
    renewed_at: datetime | None
    caller: str | None = None


@dataclass(frozen=True)
class LockInfo:
    name: str
    held: bool
    holders: tuple[HolderInfo, ...]


def info(name: str, *, viewer: str | Lock | None = None, now: datetime | None = None) -> LockInfo:
    """Who holds ``name``: ``since``, ``expires_at`` and ``renewed_at`` per slot.

    ``viewer`` is an owner string or a ``Lock`` handle. The owner and token
    of every permit that is not the viewer's are masked with
    ``mask_token``. Takes no lock.
    """
    state = lock_holders(name=name, now=now)
    own_owner: str | None = viewer.owner if isinstance(viewer, Lock) else viewer
    own_token: int | None = viewer.token if isinstance(viewer, Lock) else None
    out = []
    for h in state.holders:
        mine = (own_owner is not None and h.owner == own_owner) or (own_token is not None and h.token == own_token)
        out.append(
            HolderInfo(
                slot=h.slot,
                owner=h.owner if mine else mask_token(h.owner),
                token=h.token if mine else mask_token(h.token),
                masked=not mine,
                since=h.since,
                expires_at=h.expires_at,
                renewed_at=h.renewed_at,
                caller=h.caller,
            )
        )
    return LockInfo(state.name, state.held, tuple(out))


def reap_expired(*, before: datetime | None = None) -> int:
    """Delete the expired KV rows (lock permits included); return the count.

    Expired permits never block an acquire; this only frees their space.
    ``serve``'s reaper runs the same KV reap every few seconds.
    """
    total = 0
    batch = kv.REAPER_BATCH_SIZE
    while True:
        removed = kv.kv_reap_expired(before=before, batch_size=batch)
        total += removed
        if removed < batch:
            return total


# --------------------------------------------------------------------------
# The in-process API: a handle, and scoped forms that renew in the background


def _mint_owner() -> str:
    return f"{socket.gethostname()[:128]}:{os.getpid()}:{secrets.token_hex(6)}"


@dataclass
class _Lease:
    token: int
    slot: int
    #: time.monotonic() past which the lease must be assumed gone.
    valid_until: float


def _valid_until(sent: float, ttl: float, expires_at: datetime | None) -> float:
    """When a lease granted by a call sent at ``sent`` must be assumed gone.

    From ``sent`` (before the server could write it), unless the answer says
    when the lease ends: a late grant renewed on the way, or a permit this
    owner already held. That end is read against the wall clock, and never
    taken as more than a whole lease from now.
    """
    if expires_at is None:
        return sent + ttl
    left = (expires_at - clock.now()).total_seconds()
    return time.monotonic() + min(left, ttl)


class Lock:
    """One holder's hold on a lock (or one permit of a semaphore).

    ``acquire()`` and ``extend()`` keep the current token; ``token`` and
    ``guard()`` give it out. Nothing renews in the background unless the
    handle is used through ``hold()``/``ahold()`` (or ``with lock:``).
    Thread-safe: a renew thread and the block may use it at once.
    """

    def __init__(
        self,
        name: str,
        *,
        ttl: timedelta | float = 30,
        limit: int = 1,
        owner: str | None = None,
        timeout: float = 0,
        caller: str | None = None,
    ) -> None:
        self.name = check_name(name)
        self.ttl = check_ttl(ttl)
        self.limit = check_limit(limit)
        self.owner = check_owner(owner) or _mint_owner()
        #: Who takes the lease, for people to read (``lock_acquire``).
        self.caller = check_caller(caller)
        #: Seconds ``with lock:`` waits for the permit.
        self.timeout = timeout
        #: Set when the lease was found lost (a renew answered ``lost`` or
        #: the lifetime passed with no renew); cleared by the next grant.
        self.lost = threading.Event()
        self._mutex = threading.Lock()
        self._lease: _Lease | None = None
        self._scope: _Hold | None = None

    def __repr__(self) -> str:
        return f"<Lock {self.name!r} owner={mask_token(self.owner)} held={self.held}>"

    # ---- state ----------------------------------------------------------

    @property
    def held(self) -> bool:
        """Granted or renewed, and the lifetime has not run out here."""
        with self._mutex:
            return self._lease is not None and time.monotonic() < self._lease.valid_until

    @property
    def valid_until(self) -> float | None:
        """``time.monotonic()`` past which the lease must be assumed gone; None when not held."""
        with self._mutex:
            return self._lease.valid_until if self._lease is not None else None

    @property
    def token(self) -> int | None:
        """The fencing token of the current lease; None when not held."""
        with self._mutex:
            return self._lease.token if self._lease is not None else None

    @property
    def slot(self) -> int | None:
        with self._mutex:
            return self._lease.slot if self._lease is not None else None

    def guard(self) -> kv.KVCheck:
        """The required KV check that holds only while this lease is current.

        Raises ``LockNotHeld`` when the handle holds nothing.
        """
        with self._mutex:
            lease = self._lease
        if lease is None:
            raise LockNotHeld(f"lock {self.name!r} is not held; there is nothing to guard with")
        return guard_check(name=self.name, slot=lease.slot, token=lease.token)

    def info(self) -> LockInfo:
        """``info()`` of this lock, unmasked for this handle's own permit."""
        return info(self.name, viewer=self)

    # ---- operations -----------------------------------------------------

    def try_acquire(self) -> bool:
        """One acquire call; True when granted (also when already held)."""
        sent = time.monotonic()
        result = lock_acquire(name=self.name, ttl=self.ttl, owner=self.owner, limit=self.limit, caller=self.caller)
        if not result.acquired:
            return False
        assert result.token is not None
        assert result.slot is not None
        with self._mutex:
            self._lease = _Lease(
                result.token, result.slot, _valid_until(sent, self.ttl.total_seconds(), result.expires_at)
            )
        self.lost.clear()
        return True

    def acquire(self, *, timeout: float = 0) -> bool:
        """Take the permit, trying every 50 ms for up to ``timeout`` seconds.

        Returns False when it was not free in time. Starts no renew thread.
        """
        deadline = time.monotonic() + timeout
        while True:
            if self.try_acquire():
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(RETRY_INTERVAL, left))

    def extend(self, *, ttl: timedelta | float | None = None) -> bool:
        """Renew the lease now (for ``ttl``, default the handle's).

        True with a new token in place; False when the lease is lost (the
        handle then holds nothing and ``lost`` is set).
        """
        with self._mutex:
            lease = self._lease
        if lease is None:
            return False
        ttl_td = self.ttl if ttl is None else check_ttl(ttl)
        sent = time.monotonic()
        result = lock_renew(name=self.name, token=lease.token, ttl=ttl_td, slot=lease.slot, owner=self.owner)
        with self._mutex:
            if self._lease is not lease:
                # Released (or lost) while the renew was in flight.
                return False
            if result.renewed and result.token is not None:
                self._lease = _Lease(
                    result.token, lease.slot, _valid_until(sent, ttl_td.total_seconds(), result.expires_at)
                )
                return True
            self._lease = None
        self.lost.set()
        return False

    def release(self) -> bool:
        """Give the permit back. True when it was removed; False when it was
        not this handle's any more (or never held)."""
        with self._mutex:
            lease, self._lease = self._lease, None
        if lease is None:
            return False
        return lock_release(name=self.name, token=lease.token, slot=lease.slot).released

    def _expire_if_overdue(self) -> bool:
        with self._mutex:
            if self._lease is None or time.monotonic() < self._lease.valid_until:
                return False
            self._lease = None
        self.lost.set()
        return True

    # ---- async forms ----------------------------------------------------

    async def aacquire(self, *, timeout: float = 0) -> bool:
        """``acquire`` for async code: waits with ``asyncio.sleep``."""
        deadline = time.monotonic() + timeout
        while True:
            if await database_sync_to_async(self.try_acquire)():
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            await asyncio.sleep(min(RETRY_INTERVAL, left))

    async def aextend(self, *, ttl: timedelta | float | None = None) -> bool:
        return bool(await database_sync_to_async(self.extend)(ttl=ttl))

    async def arelease(self) -> bool:
        return bool(await database_sync_to_async(self.release)())

    # ---- scoped use -----------------------------------------------------

    def __enter__(self) -> Lock:
        self._scope = _Hold(self, self.timeout)
        return self._scope.__enter__()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        scope, self._scope = self._scope, None
        assert scope is not None
        scope.__exit__(exc_type, exc, tb)


def lock(
    name: str, *, ttl: timedelta | float = 30, limit: int = 1, owner: str | None = None, caller: str | None = None
) -> Lock:
    """A ``Lock`` handle for explicit ``acquire()``/``extend()``/``release()``."""
    return Lock(name, ttl=ttl, limit=limit, owner=owner, caller=caller)


def _renew_every(lock: Lock) -> float:
    return lock.ttl.total_seconds() / 3


def _retry_pause(lock: Lock, pause: float) -> float | None:
    """After a renew that could not ask: how long until the next try, or
    None when the lifetime ran out on this clock (the lease is lost).

    Not being able to ask is not a loss yet: come back sooner, until then.
    """
    log.warning("renewing lock %r failed", lock.name, exc_info=True)
    if lock._expire_if_overdue():
        return None
    return max(min(pause / 2, _renew_every(lock)), RETRY_INTERVAL)


class LoopLease:
    """The permit a polling loop holds across its steps.

    ``hold()`` before each step takes the permit when it is not held and
    renews it once a third of its lifetime has passed since the last grant;
    the step fences its writes with ``lock.guard()``. Unlike ``hold()``,
    nothing runs in the background: a loop that stops stepping lets its
    lease run out.
    """

    def __init__(self, lock: Lock) -> None:
        self.lock = lock
        self._renewed_at = 0.0

    def hold(self) -> Literal["granted", "held"] | None:
        """Take or renew the permit as due: ``granted`` when this call took
        it, ``held`` when it was held already (and renewed if due), None
        when it is not held (not free, or the renew found it lost)."""
        # The handle counts the lease from before the call that grants it
        # (or from the end the server wrote, for a grant that came back
        # late), so a step's deadline, the handle's ``valid_until``, never
        # runs past the lease the server gave.
        sent = time.monotonic()
        if not self.lock.held:
            if not self.lock.try_acquire():
                return None
            self._renewed_at = sent
            return "granted"
        if sent - self._renewed_at >= _renew_every(self.lock):
            if not self.lock.extend():
                return None
            self._renewed_at = sent
        return "held"

    def renew_due_in(self) -> float:
        """Seconds until ``hold()`` renews (0 or less: at the next call)."""
        return self._renewed_at + _renew_every(self.lock) - time.monotonic()

    def give_up(self) -> None:
        """After a step refused for a lost lease: mark the lease lost and
        release what may be left of it (the permit expires anyway)."""
        self.lock.lost.set()
        with contextlib.suppress(Exception):
            self.lock.release()


def _release_after_block(lock: Lock, exc_type: type[BaseException] | None, was_lost: bool) -> None:
    """Release at the end of a scoped hold; raise ``LockLost`` when the block
    ended normally but the lease was lost meanwhile (or the release found it
    gone): the work may have run unprotected."""
    try:
        released = lock.release()
    except Exception:
        if exc_type is not None:
            # Never mask the block's own error; the permit expires anyway.
            log.warning("releasing lock %r failed", lock.name, exc_info=True)
            return
        raise
    if exc_type is None and (was_lost or not released):
        raise LockLost(f"lock {lock.name!r} was lost while the block ran")


@dataclass
class _Hold:
    """``with hold(...)``: acquire, renew in a thread, release, report loss."""

    lock: Lock
    timeout: float
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> Lock:
        if not self.lock.acquire(timeout=self.timeout):
            raise LockNotAcquired(f"lock {self.lock.name!r} was not free within {self.timeout} s")
        self._thread = threading.Thread(target=self._keep, name=f"queenadmin-lock-{self.lock.name}"[:60], daemon=True)
        self._thread.start()
        return self.lock

    def _keep(self) -> None:
        try:
            pause = _renew_every(self.lock)
            while not self._stop.wait(pause):
                try:
                    if not self.lock.extend():
                        return
                    pause = _renew_every(self.lock)
                except Exception:
                    retry = _retry_pause(self.lock, pause)
                    if retry is None:
                        return
                    pause = retry
        finally:
            # This thread's own database connection.
            connection.close()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        _release_after_block(self.lock, exc_type, self.lock.lost.is_set())


def hold(
    name: str,
    *,
    ttl: timedelta | float = 30,
    timeout: float = 0,
    limit: int = 1,
    owner: str | None = None,
    caller: str | None = None,
) -> Lock:
    """Scoped lock: ``with locks.hold("cache-refresh", ttl=30, timeout=5):``.

    Entering acquires (trying every 50 ms for up to ``timeout`` seconds,
    else raising ``LockNotAcquired``) and renews in a background thread every
    ttl/3. Leaving stops and joins that thread and releases, also when the
    block raises; when the block ended normally but the lease was lost
    meanwhile, it raises ``LockLost``: the work may have run unprotected.
    Yields the ``Lock`` (for ``token`` and ``guard()``). ``caller`` names
    who holds it for people (the locks page); None names nobody. Outside
    any transaction.
    """
    return Lock(name, ttl=ttl, limit=limit, owner=owner, timeout=timeout, caller=caller)


@dataclass
class _AsyncHold:
    lock: Lock
    timeout: float
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Lock:
        if not await self.lock.aacquire(timeout=self.timeout):
            raise LockNotAcquired(f"lock {self.lock.name!r} was not free within {self.timeout} s")
        self._task = asyncio.create_task(self._keep())
        return self.lock

    async def _stopped_within(self, seconds: float) -> bool:
        try:
            await asyncio.wait_for(self._stop.wait(), seconds)
        except TimeoutError:
            return False
        return True

    async def _keep(self) -> None:
        pause = _renew_every(self.lock)
        while not await self._stopped_within(pause):
            try:
                if not await self.lock.aextend():
                    return
                pause = _renew_every(self.lock)
            except Exception:
                retry = _retry_pause(self.lock, pause)
                if retry is None:
                    return
                pause = retry

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        # Let a renew in flight finish rather than cancel it: its thread
        # would carry on and leave the release holding a stale token.
        self._stop.set()
        if self._task is not None:
            await self._task
        await database_sync_to_async(_release_after_block)(self.lock, exc_type, self.lock.lost.is_set())


def ahold(
    name: str,
    *,
    ttl: timedelta | float = 30,
    timeout: float = 0,
    limit: int = 1,
    owner: str | None = None,
    caller: str | None = None,
) -> _AsyncHold:
    """``hold()`` for async code: ``async with locks.ahold("job", ttl=30):``.

    The renewals run as an asyncio task; the database calls go through
    ``database_sync_to_async``. Same errors as ``hold()``.
    """
    return _AsyncHold(Lock(name, ttl=ttl, limit=limit, owner=owner, caller=caller), timeout)
