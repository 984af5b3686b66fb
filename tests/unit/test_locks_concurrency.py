"""Locks under real concurrency: 16 processes on PostgreSQL, 8 on SQLite.

Each race runs 20 s on PostgreSQL and 5 s on SQLite at ``QA_SCALE=full``,
and 5 s and 3 s at ``ci`` (tests/scale.py).

Every worker hammers one lock (or one semaphore) through the domain API with
short lifetimes, random pauses, renews and freezes that outlive the lease.
It records every grant (acquire or renew) with its token and the window in
which the holder may believe it holds: from the answer's arrival until the
request's send time plus the lifetime, cut short by its own release. The
server stamps expiry from its clock when it applies the write, which is
never before the send, so these windows are what any correct lock must keep
apart. Times are ``time.time()``, the clock ``clock.now()`` reads, shared by
the processes of one machine.

SQLite runs one writer at a time, so every call of every contender queues
for the same lock there: fewer contenders and shorter races keep the run
short, and the invariants are the same.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from tests.conftest import one_writer_at_a_time, start_together
from tests.scale import scaled, sized

pytestmark = scaled

#: Seconds each race runs (PostgreSQL, SQLite).
RACE_SECONDS = sized(ci=(5.0, 3.0), full=(20.0, 5.0))
CONTENDERS = (16, 8)
#: Clock noise tolerated between grants of different holders (seconds).
SLACK = 0.002


@dataclass(frozen=True)
class Grant:
    worker: int
    tenure: int
    slot: int
    token: int
    start: float
    end: float


def _acquire(name: str, ttl: float, owner: str, limit: int) -> Any:
    from queenadmin.domain import locks

    return locks.lock_acquire(name=name, ttl=timedelta(seconds=ttl), owner=owner, limit=limit)


def _renew(name: str, token: int, ttl: float, slot: int, owner: str) -> Any:
    from queenadmin.domain import locks

    return locks.lock_renew(name=name, token=token, ttl=timedelta(seconds=ttl), slot=slot, owner=owner)


def _release(name: str, token: int, slot: int) -> Any:
    from queenadmin.domain import locks

    return locks.lock_release(name=name, token=token, slot=slot)


def _hammer(name: str, limit: int, me: int, duration: float) -> list[tuple[Any, ...]]:
    """Acquire, hold (renewing, or freezing past the lease), release; repeat."""
    rng = random.Random(me)
    owner = f"worker-{me}"
    grants: list[tuple[Any, ...]] = []
    start_together()
    stop = time.time() + duration
    tenure = 0
    while time.time() < stop:
        ttl = rng.choice((0.3, 0.4, 0.6))
        sent = time.time()
        got = _acquire(name, ttl, owner, limit)
        received = time.time()
        if not got.acquired:
            time.sleep(rng.uniform(0, 0.02))
            continue
        assert not got.already, "this worker never acquires what it believes it holds"
        tenure += 1
        token, slot = got.token, got.slot
        valid_until = sent + ttl
        grants.append((me, tenure, slot, token, received, valid_until))
        freeze = rng.random() < 0.25
        hold_until = time.time() + rng.uniform(0, 2 * ttl)
        while time.time() < hold_until:
            if freeze:
                # A paused holder: no renew, so the lease may pass.
                time.sleep(hold_until - time.time())
                break
            time.sleep(min(ttl / 3, max(hold_until - time.time(), 0)))
            sent = time.time()
            renewal = _renew(name, token, ttl, slot, owner)
            if not renewal.renewed:
                token = None
                break
            token = renewal.token
            valid_until = sent + ttl
            grants.append((me, tenure, slot, token, time.time(), valid_until))
        if token is not None:
            released_at = time.time()
            release = _release(name, token, slot)
            if release.released or released_at < valid_until:
                # The holder stops believing at its release: cut every
                # window of this tenure there (earlier renews included).
                grants = [(*g[:5], min(g[5], released_at)) if (g[0], g[1]) == (me, tenure) else g for g in grants]
        time.sleep(rng.uniform(0, 0.03))
    return grants


def _scale() -> tuple[float, int]:
    """Seconds each race runs and how many contenders, for this database."""
    pick = int(one_writer_at_a_time())
    return RACE_SECONDS[pick], CONTENDERS[pick]


def _race(spawn: Any, name: str, limit: int, seconds: float, contenders: int) -> list[Grant]:
    per_worker = spawn(_hammer, [(name, limit, i, seconds) for i in range(contenders)])
    return [Grant(*g) for grants in per_worker for g in grants]


def _assert_fenced(grants: list[Grant]) -> int:
    """Overlapping grants of one slot: the later one has the higher token.

    Returns how many overlapping pairs of different holders were seen.
    """
    foreign_overlaps = 0
    by_slot: dict[int, list[Grant]] = defaultdict(list)
    for g in grants:
        by_slot[g.slot].append(g)
    for slot_grants in by_slot.values():
        slot_grants.sort(key=lambda g: g.start)
        active: list[Grant] = []
        for g in slot_grants:
            active = [a for a in active if a.end > g.start]
            for a in active:
                assert g.token > a.token, f"{g} overlaps {a} with a lower token"
                if (a.worker, a.tenure) != (g.worker, g.tenure) and a.end - g.start > SLACK:
                    foreign_overlaps += 1
            active.append(g)
    tokens = [g.token for g in grants]
    assert len(tokens) == len(set(tokens)), "a token was granted twice"
    return foreign_overlaps


def _max_live_permits(grants: list[Grant]) -> int:
    """The most tenures believing they hold a permit at one instant."""
    tenures: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)
    for g in grants:
        tenures[(g.worker, g.tenure)].append((g.start, g.end))
    events: list[tuple[float, int]] = []
    for windows in tenures.values():
        windows.sort()
        merged: list[list[float]] = []
        for start, end in windows:
            if end <= start:
                continue
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        for start, end in merged:
            # Shrink by the clock slack so touching windows do not count.
            events += [(start + SLACK, 1), (end - SLACK, -1)]
    live = peak = 0
    for _, delta in sorted(events, key=lambda e: (e[0], e[1])):
        live += delta
        peak = max(peak, live)
    return peak


def test_contenders_on_one_lock_are_fenced(spawn):
    """No two grants overlap unless the later has the higher token, and
    different holders never overlap at all."""
    seconds, contenders = _scale()
    grants = _race(spawn, "hammered", 1, seconds, contenders)
    workers = {g.worker for g in grants}
    assert len(grants) > 2 * seconds, "the race produced too few grants to mean anything"
    assert len(workers) >= 3
    assert {g.slot for g in grants} == {0}
    assert _assert_fenced(grants) == 0
    assert _max_live_permits(grants) == 1
    _history_agrees("hammered", grants)


def test_a_semaphore_never_has_more_than_limit_live_permits(spawn):
    """Three permits among many contenders: never a fourth holder."""
    seconds, contenders = _scale()
    grants = _race(spawn, "pool", 3, seconds / 2, contenders)
    assert len(grants) > seconds
    assert {g.slot for g in grants} == {0, 1, 2}
    assert _assert_fenced(grants) == 0
    assert _max_live_permits(grants) == 3
    _history_agrees("pool", grants)


def _history_agrees(name: str, grants: list[Any]) -> None:
    """The lock's life, page after page, strictly decreases, and holds an
    ``acquired`` for every grant of the race (by token)."""
    from queenadmin.domain.locks import history

    seen: list[Any] = []
    before = None
    while True:
        page = history.lock_events(name=name, before=before, limit=500)
        seen += page.events
        if page.next_before is None:
            break
        before = page.next_before
    seqs = [e.seq for e in seen]
    assert seqs == sorted(seqs, reverse=True)
    assert len(set(seqs)) == len(seqs)
    # A grant that came back late was renewed at once: its token is a renew's.
    granted = {e.token for e in seen if e.event in ("acquired", "renewed")}
    assert {g.token for g in grants} <= granted
    # Every tenure began with an acquire.
    assert sum(1 for e in seen if e.event == "acquired") >= len({(g.worker, g.tenure) for g in grants})
