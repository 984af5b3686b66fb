"""What a lone compare-and-set, and a lock's acquire, renew and release, cost in statements.

On PostgreSQL each write is one autocommit statement (no BEGIN, no read
first); a renew reads the permit, then writes it at that version. The count
is psycopg's ``Cursor.execute`` (``test_push_statements.counted``), with
whether the connection was in autocommit at each statement. A CAS at a
version that moved, or of a row gone or expired, falls back to the planner,
which answers why. Races: of eight compare-and-sets at one version exactly
one applies.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest

from queenadmin.domain import kv, locks
from queenadmin.plumbing import db
from tests.conftest import start_together
from tests.unit.test_push_statements import counted

pytestmark = pytest.mark.django_db(transaction=True)


@contextmanager
def autocommit_seen() -> Iterator[list[bool]]:
    """Whether each psycopg statement in the block ran in autocommit (PostgreSQL)."""
    seen: list[bool] = []
    import psycopg

    execute = psycopg.Cursor.execute

    def spying(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(bool(self.connection.autocommit))
        return execute(self, query, *args, **kwargs)

    psycopg.Cursor.execute = spying  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        psycopg.Cursor.execute = execute  # type: ignore[method-assign]


def _put(key: str, value: Any, expect: int | None = None, ttl: timedelta | None = None) -> kv.WriteResult:
    (result,) = kv.kv_call([kv.KVPut("cas", key, db.json_text(value), ttl, expect=expect)])
    assert isinstance(result, kv.WriteResult)
    return result


def test_a_compare_and_set_is_one_autocommit_statement() -> None:
    first = _put("k", 1)
    with counted() as statements:
        swapped = _put("k", 2, expect=first.version)
    assert (swapped.applied, swapped.value) == (True, 2)
    assert swapped.version > first.version
    assert kv.kv_get(namespace="cas", key="k").version == swapped.version
    if db.is_postgres():
        assert len(statements) == 1, statements
        with autocommit_seen() as modes:
            _put("k", 3, expect=swapped.version)
        assert modes == [True]


def test_a_compare_and_set_that_misses_answers_why_and_keeps_created_at() -> None:
    first = _put("k", 1)
    stale = _put("k", 2, expect=first.version + 1)
    assert (stale.applied, stale.reason, stale.value, stale.version) == (False, "version", 1, first.version)
    absent = _put("gone", 2, expect=first.version)
    assert (absent.applied, absent.reason, absent.version) == (False, "absent", 0)
    created = kv.kv_get(namespace="cas", key="k").created_at
    swapped = _put("k", 3, expect=first.version, ttl=timedelta(seconds=60))
    row = kv.kv_get(namespace="cas", key="k")
    assert swapped.applied
    assert row.created_at == created
    assert row.expires_at is not None
    assert row.value == 3


def test_a_lock_cycle_costs_one_statement_per_write() -> None:
    with counted() as acquiring:
        got = locks.lock_acquire(name="job", ttl=30, owner="a")
    with counted() as renewing:
        renewed = locks.lock_renew(name="job", token=got.token or 0, ttl=timedelta(seconds=30))
    with counted() as releasing:
        released = locks.lock_release(name="job", token=renewed.token or 0)
    assert got.acquired
    assert renewed.renewed
    assert (renewed.token or 0) > (got.token or 0)
    assert released.released
    if db.is_postgres():
        # Not the time zone a new connection sets once.
        counts = [len([s for s in run if "set_config" not in s]) for run in (acquiring, renewing, releasing)]
        assert counts == [1, 2, 1], (acquiring, renewing, releasing)


def _cas_worker(version: int, me: int) -> dict[str, Any]:
    start_together()
    result = _put("hot", me, expect=version)
    return {"me": me, "applied": result.applied, "version": result.version, "reason": result.reason}


def test_of_eight_concurrent_compare_and_sets_at_one_version_exactly_one_applies(spawn: Any) -> None:
    first = _put("hot", "start")
    results = spawn(_cas_worker, [(first.version, i) for i in range(8)])
    winners = [r for r in results if r["applied"]]
    assert len(winners) == 1
    assert winners[0]["version"] > first.version
    for loser in results:
        if loser is not winners[0]:
            assert (loser["reason"], loser["version"]) == ("version", winners[0]["version"])
    assert kv.kv_get(namespace="cas", key="hot").value == winners[0]["me"]
