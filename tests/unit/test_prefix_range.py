"""Every ORM prefix read (``kv.store.base.prefix_range``) selects exactly the
keys that start with the prefix: ``%`` and ``_`` are plain characters, case
counts, and a prefix ending in U+10FFFF (no upper bound) still works."""

from __future__ import annotations

from datetime import timedelta

import pytest

from queenadmin.domain import clock, queues, streams, timers
from queenadmin.domain.search import search
from queenadmin.domain.streams.store.base import StateFilter
from queenadmin.domain.timers.store import selected

pytestmark = pytest.mark.django_db

MAX = "\U0010ffff"
KEYS = ["a", "a%b", "a_b", "aXb", "Ab", "ab", f"a{MAX}", f"a{MAX}z", MAX, f"{MAX}q", "b"]
PREFIXES = ["a%", "a_", "a", "A", f"a{MAX}", MAX, "b", "c"]


def _starting(prefix: str) -> list[str]:
    return sorted(k for k in KEYS if k.startswith(prefix))


def test_timer_reads_select_exactly_the_keys_under_a_prefix():
    for key in KEYS:
        timers.timer_schedule(queue="q", timer_key=key, payload={}, delay=timedelta(minutes=1))
    timers.timer_schedule(queue="other", timer_key="a_b", payload={}, delay=timedelta(minutes=1))
    for prefix in PREFIXES:
        want = _starting(prefix)
        assert timers.timers_count(queue="q", prefix=prefix) == len(want), prefix
        chosen = selected(timers.TimerFilter(queue="q", key_prefix=prefix))
        assert sorted(chosen.values_list("timer_key", flat=True)) == want, prefix


def test_stream_state_reads_select_exactly_the_keys_under_a_prefix():
    query = streams.stream_register(name="s", source_queue="src", sink_queue=None, config_hash="h", reset=False)
    queues.queue_push(items=[queues.PushItem("src", "p", "{}")])
    claim = queues.queue_claim(request=queues.PopRequest(queue="src", group="g", batch=1))
    assert claim.partition_id is not None
    ops = tuple(streams.StateUpsert(key, "1") for key in KEYS)
    assert streams.stream_cycle(cycle=streams.Cycle(query.query_id, claim.partition_id, "g", ops)).success
    for prefix in PREFIXES:
        rows = streams.stream_state_get(
            query_id=query.query_id, partition_id=claim.partition_id, which=StateFilter(key_prefix=prefix)
        )
        assert [r.key for r in rows] == _starting(prefix), prefix


def test_search_finds_exactly_the_timer_keys_under_a_prefix():
    for key in KEYS:
        timers.timer_schedule(queue="q", timer_key=key, payload={}, delay=timedelta(minutes=1))
    for prefix in PREFIXES:
        hits = search(text=prefix, now=clock.now(), kinds=frozenset({"timer"}))
        assert sorted(h.ref[1] for h in hits) == _starting(prefix), prefix
