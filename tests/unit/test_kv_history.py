"""A key's history in the domain: what is kept, and its trimming."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.db import connection
from django.test import override_settings

from queenadmin.domain import clock, kv, locks
from queenadmin.domain.kv import history
from queenadmin.models import KVVersion

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 10, 8, 10, 0, tzinfo=UTC)


def _versions(key: str, ns: str = "h") -> list[int]:
    return [v.version for v in kv.kv_history(namespace=ns, key=key, limit=1000).versions]


def test_lock_permits_keep_who_took_them_never_their_owner():
    """A permit's owner is a credential: its history keeps the caller only."""
    locks.locks_call(
        [locks.LockOp(op="acquire", name="jobs", ttl=timedelta(seconds=60), owner="secret-owner-string")],
        caller="tok",
    )
    (row,) = KVVersion.objects.filter(namespace=kv.LOCKS_NAMESPACE)
    assert (row.key, row.op, row.value_json) == ("jobs#0", "put", '{"caller":"tok"}')
    assert row.expires_at is not None
    assert not KVVersion.objects.filter(value_json__contains="secret-owner-string").exists()


def test_who_wrote_is_kept_cut_to_a_label():
    kv.kv_call([kv.KVPut("h", "k", "1", None)], by="token-name")
    kv.kv_call([kv.KVPut("h", "k", "2", None)], by="x\n" + "y" * 400)
    newest, oldest = kv.kv_history(namespace="h", key="k").versions
    assert oldest.by == "token-name"
    assert newest.by == "x\ufffd" + "y" * 148


@override_settings(QUEENADMIN_HISTORY_MAX_ENTRIES=5, QUEENADMIN_HISTORY_MAX_AGE_SECONDS=0)
def test_trim_keeps_the_newest_versions_of_each_key():
    for i in range(12):
        kv.kv_put(namespace="h", key="busy", value=i, ttl=None)
    for i in range(3):
        kv.kv_put(namespace="h", key="calm", value=i, ttl=None)
    busy, calm = _versions("busy"), _versions("calm")
    trimmed = kv.kv_history_trim()
    assert trimmed == history.Trimmed(old=0, extra=7)
    assert _versions("busy") == busy[:5]
    assert _versions("calm") == calm
    # Written again: only what is new is looked at, and trimmed again.
    kv.kv_put(namespace="h", key="busy", value="again", ttl=None)
    assert kv.kv_history_trim().extra == 1
    assert len(_versions("busy")) == 5


@override_settings(QUEENADMIN_HISTORY_MAX_ENTRIES=20, QUEENADMIN_HISTORY_MAX_AGE_SECONDS=0)
def test_a_key_within_the_slack_is_left_then_cut_back_to_the_limit():
    """Up to the limit plus a tenth a key is not trimmed; one more write
    and the next pass cuts it back to the limit, in one statement."""
    assert history.count_slack(20) == 2
    for i in range(22):
        kv.kv_put(namespace="h", key="k", value=i, ttl=None)
    assert kv.kv_history_trim().extra == 0
    assert len(_versions("k")) == 22
    kv.kv_put(namespace="h", key="k", value="one more", ttl=None)
    newest = _versions("k")[:20]
    assert kv.kv_history_trim().extra == 3
    assert _versions("k") == newest


@override_settings(QUEENADMIN_HISTORY_MAX_ENTRIES=5, QUEENADMIN_HISTORY_MAX_AGE_SECONDS=0)
def test_the_count_trims_mark_is_in_the_database(monkeypatch):
    """A pass starts where the last pass of any process stopped: the mark
    is a row of the history table, never a key's version, and the next
    pass looks only at what was written since."""
    from queenadmin.domain.kv.store import store
    from queenadmin.domain.kv.store.base import MARK_KEY, MARK_NAMESPACE

    for i in range(3):
        kv.kv_put(namespace="h", key="a", value=i, ttl=None)
    kv.kv_history_trim()
    mark = store().trim_mark()
    assert mark == KVVersion.objects.exclude(namespace=MARK_NAMESPACE).order_by("id").last().id
    windows = []
    keys_over = type(store()).keys_over

    def spy(self, *, after_id, upto_id, count):
        windows.append((after_id, upto_id))
        return keys_over(self, after_id=after_id, upto_id=upto_id, count=count)

    monkeypatch.setattr(type(store()), "keys_over", spy)
    kv.kv_put(namespace="h", key="b", value=1, ttl=None)
    kv.kv_history_trim()
    assert windows[0][0] == mark
    (row,) = KVVersion.objects.filter(namespace=MARK_NAMESPACE)
    assert (row.key, row.version) == (MARK_KEY, store().trim_mark())
    assert row.version >= windows[0][1]


@override_settings(QUEENADMIN_HISTORY_MAX_ENTRIES=5, QUEENADMIN_HISTORY_MAX_AGE_SECONDS=0)
def test_the_mark_points_at_a_write_not_at_its_own_row():
    """The mark row may be newer than the writes it marks (another
    process's pass made it after them): a pass marks the newest write,
    never the mark row's own id."""
    from queenadmin.domain.kv.store import store

    for i in range(3):
        kv.kv_put(namespace="h", key="a", value=i, ttl=None)
    store().set_trim_mark(0, clock.now())
    kv.kv_history_trim()
    assert store().trim_mark() == KVVersion.objects.exclude(namespace="").order_by("id").last().id


@override_settings(QUEENADMIN_HISTORY_MAX_ENTRIES=0, QUEENADMIN_HISTORY_MAX_AGE_SECONDS=3600)
def test_trim_drops_versions_older_than_the_age():
    with time_machine.travel(T0, tick=False):
        kv.kv_put(namespace="h", key="a", value=1, ttl=None)
        kv.kv_put(namespace="h", key="b", value=1, ttl=None)
    with time_machine.travel(T0 + timedelta(minutes=50), tick=False):
        kv.kv_put(namespace="h", key="a", value=2, ttl=None)
    with time_machine.travel(T0 + timedelta(minutes=61), tick=False):
        assert kv.kv_history_trim() == history.Trimmed(old=2, extra=0)
    assert [v.value for v in kv.kv_history(namespace="h", key="a").versions] == [2]
    assert kv.kv_history(namespace="h", key="b").versions == ()


@override_settings(QUEENADMIN_HISTORY_MAX_ENTRIES=0, QUEENADMIN_HISTORY_MAX_AGE_SECONDS=0)
def test_trim_with_no_limits_keeps_everything():
    for i in range(3):
        kv.kv_put(namespace="h", key="k", value=i, ttl=None)
    assert kv.kv_history_trim() == history.Trimmed(0, 0)
    assert len(_versions("k")) == 3


@pytest.mark.django_db(transaction=True)
@override_settings(QUEENADMIN_HISTORY_MAX_ENTRIES=1, QUEENADMIN_HISTORY_MAX_AGE_SECONDS=1)
def test_only_one_process_trims_at_a_time():
    """While another connection holds the trim's turn, a trim skips (PostgreSQL)."""
    if connection.vendor != "postgresql":
        pytest.skip("SQLite has one writer at a time: its turn is the write lock")
    import psycopg
    from django.conf import settings

    from queenadmin.domain.kv.store.postgres import ADVISORY_CLASS

    for i in range(3):
        kv.kv_put(namespace="h", key="k", value=i, ttl=None)
    params = settings.DATABASES["default"]
    dsn = f"host={params['HOST']} port={params['PORT']} user={params['USER']} dbname={params['NAME']}"
    with psycopg.connect(dsn) as other:
        other.execute("BEGIN")
        assert other.execute(
            "SELECT pg_try_advisory_xact_lock(%s, hashtext('kv-history-trim'))", [ADVISORY_CLASS]
        ).fetchone() == (True,)
        assert kv.kv_history_trim() == history.Trimmed(0, 0)
        other.execute("ROLLBACK")
    assert kv.kv_history_trim().extra == 2
