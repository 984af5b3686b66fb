"""The attention list: no reader, stalled, lag, age, rising backlog and a
growing DLQ, each judged from the sampler's rows (taken by ``stats_refresh``
every 10 s of a frozen clock) and the consumer heartbeats; the thresholds,
their defaults and their audit."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from queenadmin.domain import attention
from queenadmin.domain.attention import Override, attention_thresholds_set, needs_attention
from queenadmin.domain.audit import Who
from queenadmin.domain.queues import history
from queenadmin.domain.queues import operator as queue_operator
from queenadmin.errors import InvalidArgument, QueueNotFound
from queenadmin.models import AuditEntry
from tests.dashboard_ops.conftest import ack, claim, configure, dead_letter, push
from tests.supervised import write_beat

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 12, 6, 10, 0, 0, tzinfo=UTC)
WHO = Who("otto", "testing")


def window_of_a_minute() -> None:
    attention_thresholds_set(queue="", override=Override(window_minutes=1), who=WHO)


def sample_for(traveller, seconds: int, each: Callable[[int], object] | None = None) -> datetime:
    """A sample every 10 s from now for ``seconds`` (``each(i)`` before the
    i-th); the clock ends 5 s after the last one."""
    for i in range(seconds // 10 + 1):
        if i:
            traveller.shift(10)
        if each is not None:
            each(i)
        history.stats_refresh()
    traveller.shift(5)
    return T0 + timedelta(seconds=seconds + 5)


def kinds(now: datetime, queue: str) -> tuple[str, ...]:
    found = {a.queue: a for a in needs_attention(now=now).items}
    return found[queue].kinds if queue in found else ()


def test_a_queue_no_group_reads_is_no_reader_not_stalled():
    window_of_a_minute()
    with time_machine.travel(T0, tick=False) as traveller:
        push("unread", 5)
        now = sample_for(traveller, 60)
        (item,) = needs_attention(now=now).items
        assert (item.queue, item.kinds) == ("unread", ("no-reader",))
        assert "never read" in item.concerns[0].text
        assert needs_attention(now=now).reading == {"unread": "no-reader"}


def test_a_paused_queue_is_neither_no_reader_nor_stalled():
    """Its pops answer empty on an operator's word: the list says it is
    paused, and judges its lag and age as any queue's."""
    window_of_a_minute()
    attention_thresholds_set(queue="", override=Override(window_minutes=1, max_lag=3), who=WHO)
    with time_machine.travel(T0, tick=False) as traveller:
        push("held", 5)
        push("unheld", 5)
        queue_operator.queue_pause(queue="held", who=WHO)
        now = sample_for(traveller, 60)
        found = {a.queue: a for a in needs_attention(now=now).items}
        assert found["held"].kinds == ("lag",)
        assert found["held"].facts.paused
        assert found["unheld"].kinds == ("no-reader", "lag")


def test_a_live_heartbeat_is_a_reader_so_nothing_moving_is_stalled():
    window_of_a_minute()
    with time_machine.travel(T0, tick=False) as traveller:
        push("heard", 5)
        now = sample_for(traveller, 60)
        # A heartbeat 31 s old is stale: no one reads the queue.
        write_beat(now=now - timedelta(seconds=31), queue="heard")
        assert kinds(now, "heard") == ("no-reader",)
        write_beat(now=now - timedelta(seconds=3), queue="heard")
        assert kinds(now, "heard") == ("stalled",)
        assert needs_attention(now=now).reading["heard"] == "stalled"
        # A heartbeat of another queue reads nothing here.
        write_beat(now=now, queue="elsewhere")
        assert kinds(now, "heard") == ("stalled",)


def test_a_group_that_takes_and_never_acks_is_stalled():
    window_of_a_minute()
    with time_machine.travel(T0, tick=False) as traveller:
        push("stuck", 5)
        now = sample_for(traveller, 60, lambda i: i == 1 and claim("stuck", group="g", batch=2))
        (item,) = needs_attention(now=now).items
        assert item.kinds == ("stalled",)
        assert "nothing acked in 60 s" in item.concerns[0].text


def test_a_queue_that_moves_needs_nothing():
    window_of_a_minute()
    with time_machine.travel(T0, tick=False) as traveller:

        def work(i: int) -> None:
            push("busy", 2)
            ack(claim("busy", group="g", batch=2))

        now = sample_for(traveller, 60, work)
        result = needs_attention(now=now)
        assert result.items == ()
        assert (result.total, result.judged) == (0, 1)


def test_too_young_a_window_judges_only_lag_and_age():
    """Two samples cover 20 s of a minute's window: no "no reader" yet, but
    the lag and age thresholds apply at once."""
    window_of_a_minute()
    attention_thresholds_set(queue="", override=Override(window_minutes=1, max_lag=3, max_age_seconds=5), who=WHO)
    with time_machine.travel(T0, tick=False) as traveller:
        push("young", 5)
        now = sample_for(traveller, 10)
        assert kinds(now, "young") == ("lag", "age")


def test_lag_and_age_over_a_queues_own_thresholds():
    window_of_a_minute()
    with time_machine.travel(T0, tick=False) as traveller:
        push("deep", 5)
        push("other", 5)
        attention_thresholds_set(queue="deep", override=Override(max_lag=4, max_age_seconds=30), who=WHO)
        now = sample_for(traveller, 60)
        assert kinds(now, "deep") == ("no-reader", "lag", "age")
        assert kinds(now, "other") == ("no-reader",)
        (lag,) = (c for c in needs_attention(now=now).items[0].concerns if c.kind == "lag")
        assert lag.text == "lag 5 (over 4)"


def test_a_backlog_rising_over_the_window():
    window_of_a_minute()
    with time_machine.travel(T0, tick=False) as traveller:
        now = sample_for(traveller, 60, lambda i: push("rising", 1 + i))
        found = needs_attention(now=now).items[0]
        assert found.kinds == ("no-reader", "rising")
        (rising,) = (c for c in found.concerns if c.kind == "rising")
        # 1 at the window's first tick (T0), 10 at its middle, 28 at its last.
        assert rising.text == "backlog rising for 60 s: 1 → 28"


def test_a_backlog_that_fell_below_its_start_is_not_rising():
    window_of_a_minute()
    with time_machine.travel(T0, tick=False) as traveller:
        push("wobbly", 10)

        def wobble(i: int) -> None:
            if i == 3:
                ack(claim("wobbly", group="g", batch=8))
            if i >= 4:
                push("wobbly", 5)

        now = sample_for(traveller, 60, wobble)
        assert "rising" not in kinds(now, "wobbly")


def test_a_growing_dlq():
    window_of_a_minute()
    with time_machine.travel(T0, tick=False) as traveller:
        now = sample_for(traveller, 60, lambda i: i == 2 and dead_letter("failing", 2))
        found = {a.queue: a for a in needs_attention(now=now).items}["failing"]
        assert found.kinds == ("dlq",)
        assert found.concerns[0].text == "DLQ +2 in 60 s"
        attention_thresholds_set(queue="failing", override=Override(dlq_growth=3), who=WHO)
        assert kinds(now, "failing") == ()


def test_the_most_urgent_first_and_the_limit():
    window_of_a_minute()
    with time_machine.travel(T0, tick=False) as traveller:
        push("b-unread", 1)
        push("a-unread", 1)

        def each(i: int) -> None:
            if i == 2:
                dead_letter("c-failing", 1)

        now = sample_for(traveller, 60, each)
        result = needs_attention(now=now, limit=2)
        assert [a.queue for a in result.items] == ["a-unread", "b-unread"]
        assert result.total == 3


def test_no_samples_no_judgement():
    push("never-sampled", 3)
    result = needs_attention(now=T0)
    assert (result.items, result.judged) == ((), 0)


def test_thresholds_are_audited_with_who_and_why_and_fall_back_to_the_defaults():
    configure("audited")
    attention_thresholds_set(queue="", override=Override(max_lag=500), who=Who("otto", "quieter defaults"))
    done = attention_thresholds_set(queue="audited", override=Override(max_age_seconds=60), who=Who("ana", "slow"))
    assert (done.before, done.after) == (Override(), Override(max_age_seconds=60))
    applied = attention.attention_thresholds(queue="audited")
    assert (applied.applied.max_lag, applied.applied.max_age_seconds) == (500, 60)
    assert applied.applied.window_minutes == attention.DEFAULTS.window_minutes
    entries = list(
        AuditEntry.objects.order_by("id").values_list("actor", "action", "target", "before", "after", "reason")
    )
    assert entries == [
        ("otto", "queue.attention", "every queue (defaults)", "defaults", "max_lag=500", "quieter defaults"),
        ("ana", "queue.attention", "audited", "defaults", "max_age_seconds=60", "slow"),
    ]
    attention_thresholds_set(queue="audited", override=Override(), who=WHO)
    assert attention.attention_thresholds(queue="audited").stored == Override()


@pytest.mark.parametrize(
    "override",
    [Override(max_lag=-1), Override(window_minutes=0), Override(window_minutes=1441), Override(max_age_seconds=True)],
)
def test_thresholds_out_of_range_are_refused_and_nothing_is_written(override):
    with pytest.raises(InvalidArgument):
        attention_thresholds_set(queue="", override=override, who=WHO)
    assert not AuditEntry.objects.exists()


def test_thresholds_of_a_queue_that_does_not_exist_are_refused():
    with pytest.raises(QueueNotFound):
        attention_thresholds_set(queue="ghost", override=Override(max_lag=1), who=WHO)
    with pytest.raises(QueueNotFound):
        attention.attention_thresholds(queue="ghost")
