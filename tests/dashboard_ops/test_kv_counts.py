"""The overview shows the statistics sampler's key counts; ``/kv/`` counts live."""

from __future__ import annotations

import re
import threading
import time
from datetime import datetime, timedelta

import pytest
import time_machine
from django.db import connection, transaction

from queenadmin.domain import clock
from queenadmin.domain.kv import KVCheck, kv_delete, kv_namespaces_keep_in_txn, kv_namespaces_kept, kv_put
from queenadmin.domain.queues import history, sampler
from queenadmin.domain.queues.sampler import SamplerLoop
from queenadmin.errors import PreconditionFailed

pytestmark = pytest.mark.django_db


def _count(html: str, namespace: str) -> str | None:
    found = re.search(rf'<a href="/kv/{namespace}/">{namespace}</a></td>\s*<td class="num">([^<]*)</td>', html)
    return found.group(1).strip() if found else None


def test_overview_and_kv_page_agree_once_the_sampler_counted(viewer):
    """Past any bounded count (the overview's old cap was 1,000), both pages
    say 1,204 once a step counted, one expired-but-unreaped row included."""
    for i in range(1_203):
        kv_put(namespace="big", key=f"k{i}", value=i, ttl=None)
    kv_put(namespace="big", key="brief", value=0, ttl=timedelta(seconds=1))
    with time_machine.travel(clock.now() + timedelta(seconds=5)):
        history.stats_step()
        home = viewer.get("/").content.decode()
        kv_page = viewer.get("/kv/").content.decode()
    assert _count(home, "big") == _count(kv_page, "big") == "1,204"
    assert "Counted at" in home


def test_the_overview_shows_the_last_count_until_the_next_step(viewer):
    """Nothing counted: the tile says so. After a step: that count, and it
    stays until the next step, while ``/kv/`` counts every render."""
    kv_put(namespace="app", key="a", value=1, ttl=None)
    home = viewer.get("/").content.decode()
    assert _count(home, "app") is None
    assert "Not counted yet" in home

    history.stats_step()
    kv_put(namespace="app", key="b", value=2, ttl=None)
    kv_put(namespace="fresh", key="x", value=3, ttl=None)
    home = viewer.get("/").content.decode()
    assert _count(home, "app") == "1"
    assert _count(home, "fresh") is None
    kv_page = viewer.get("/kv/").content.decode()
    assert _count(kv_page, "app") == "2"
    assert _count(kv_page, "fresh") == "1"

    kv_delete(namespace="app", key="a")
    kv_delete(namespace="app", key="b")
    history.stats_refresh()
    home = viewer.get("/").content.decode()
    assert _count(home, "app") is None, "a namespace with no key left goes"
    assert _count(home, "fresh") == "1"


def test_an_empty_store_counted_is_not_never_counted():
    """The count of an empty store has a time: the page says "No keys", not "not yet"."""
    assert kv_namespaces_kept() == (None, [])
    now = clock.now()
    history.stats_step(now=now)
    at, counts = kv_namespaces_kept()
    assert counts == []
    assert at is not None
    assert abs((at - now).total_seconds()) < 1e-3


def test_the_sampler_loop_counts_and_a_lost_lease_writes_no_count():
    """The sampler's step keeps the count (its own lock's permit included);
    a step whose guard no longer holds writes none."""
    kv_put(namespace="app", key="a", value=1, ttl=None)
    assert SamplerLoop(owner="leader").step() is not None
    at, counts = kv_namespaces_kept()
    assert counts == [("app", 1), ("queen-locks", 1)]
    assert at is not None

    kv_put(namespace="app", key="b", value=2, ttl=None)
    lost = KVCheck("queen-locks", "nobody", expect=7, required=True)
    with pytest.raises(PreconditionFailed):
        history.stats_step(guard=lost)
    assert kv_namespaces_kept() == (at, counts)


def test_a_slow_key_count_waits_ticks_before_the_next(monkeypatch):
    """The sampler spends at most ``KEYS_SHARE`` of its interval counting
    keys: after a count that took longer, the next ticks sample the queues
    and keep the last count."""
    monkeypatch.setattr(sampler, "KEYS_SHARE", 1e-12)  # any count is too slow
    loop = SamplerLoop(owner="leader")
    start = clock.align(clock.now(), 10) + timedelta(seconds=10)
    kv_put(namespace="app", key="a", value=1, ttl=None)
    with time_machine.travel(start, tick=False):
        counted = loop.step()
    assert counted is not None
    assert counted.keys_seconds is not None
    kv_put(namespace="app", key="b", value=2, ttl=None)
    with time_machine.travel(start + timedelta(seconds=10), tick=False):
        skipped = loop.step()
    assert skipped is not None
    assert skipped.keys_seconds is None
    assert ("app", 1) in kv_namespaces_kept()[1]


def test_the_wait_after_a_count_is_one_tick_per_share_of_the_interval():
    """With the 10% share at a 10 s interval: a count under 1 s waits no
    tick, 2.5 s waits two, 30 s thirty."""
    assert sampler.KEYS_SHARE == 0.1
    assert sampler.ticks_after_count(0.05, 10) == 0
    assert sampler.ticks_after_count(0.99, 10) == 0
    assert sampler.ticks_after_count(2.5, 10) == 2
    assert sampler.ticks_after_count(30.0, 10) == 30


@pytest.mark.django_db(transaction=True)
def test_two_counts_kept_at_once_both_commit_and_the_later_stays():
    """The sampler and an operator's refresh may keep a count at the same
    moment (each replica runs both): the second waits for the first and
    commits after it, and its count is what is kept (a delete-then-insert
    failed here on PostgreSQL with a duplicate namespace, a 500 on
    ``POST /api/v1/stats/refresh``)."""
    kv_put(namespace="app", key="a", value=1, ttl=None)
    first_in = threading.Event()
    errors: list[BaseException] = []

    def keep(counts: list[tuple[str, int]], at: datetime, hold: float) -> None:
        try:
            with transaction.atomic():
                kv_namespaces_keep_in_txn(counts=counts, now=at)
                first_in.set()
                time.sleep(hold)
        except BaseException as error:
            errors.append(error)
        finally:
            connection.close()

    t0 = clock.now()
    first = threading.Thread(target=keep, args=([("app", 1), ("old", 5)], t0, 0.5))
    first.start()
    assert first_in.wait(10)
    second = threading.Thread(target=keep, args=([("app", 2)], t0 + timedelta(seconds=1), 0.0))
    second.start()
    first.join(10)
    second.join(10)
    assert errors == []
    at, counts = kv_namespaces_kept()
    assert counts == [("app", 2)]
    assert at == t0 + timedelta(seconds=1)
