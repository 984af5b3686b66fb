"""Rates over the last minutes from the sampler's rows: in and out per
second per queue and group, lag, and the time to drain (clock frozen with
time-machine, samples taken by ``stats_refresh`` at chosen ticks)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from queenadmin.domain.queues import history, rates
from queenadmin.models import GroupSample, QueueSample
from queenadmin.models.queues import QUEUE_MODE
from tests.dashboard_ops.conftest import ack, claim, configure, push

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 12, 6, 10, 0, 0, tzinfo=UTC)


@pytest.fixture
def workload():
    """Queue ``r``: 60 pushed in the second tick; group ``g1`` takes and
    acks 30 in the third; 20 more pushed and 10 acked in the fourth."""
    with time_machine.travel(T0, tick=False) as traveller:
        configure("r")
        history.stats_refresh()
        traveller.shift(10)
        push("r", 60)
        history.stats_refresh()
        traveller.shift(10)
        ack(claim("r", group="g1", batch=30))
        history.stats_refresh()
        traveller.shift(10)
        ack(claim("r", group="g1", batch=10))
        push("r", 20)
        history.stats_refresh()
        traveller.shift(5)
        yield traveller


def test_a_queue_younger_than_the_window_counts_from_its_creation(workload):
    """Made at T0, sampled last at T0+30: 80 pushed in 30 s, 40 acked."""
    rate = rates.queue_rates(now=T0 + timedelta(seconds=35))["r"]
    assert (rate.pushed, rate.completed, rate.popped, rate.seconds) == (80, 40, 40, 30.0)
    assert rate.in_per_second == pytest.approx(80 / 30)
    assert rate.last_at == T0 + timedelta(seconds=30)


def test_a_queue_rate_is_the_difference_between_the_windows_ticks(workload):
    """A window of 20 s before the last tick (T0+30) starts at T0+10, when 60
    were pushed and none acked: 20 pushed and 40 acked since, 1/s in, 2/s out."""
    rate = rates.queue_rates(now=T0 + timedelta(seconds=35), window=timedelta(seconds=20))["r"]
    assert (rate.pushed, rate.completed, rate.seconds) == (20, 40, 20.0)
    assert (rate.in_per_second, rate.out_per_second) == (1.0, 2.0)


def test_a_groups_rate_lag_and_time_to_drain(workload):
    """g1 registered in the third tick: its two rows cover 20 s, 40 acked
    is 2/s, and its lag of 40 drains in 20 s. Queue mode, counted only
    before g1 came, is left out."""
    (g1,) = rates.group_rates(now=T0 + timedelta(seconds=35))
    assert (g1.queue, g1.group, g1.popped, g1.completed, g1.lag) == ("r", "g1", 40, 40, 40)
    assert (g1.seconds, g1.out_per_second) == (20.0, 2.0)
    assert g1.in_per_second == pytest.approx(80 / 30)
    assert rates.drain_seconds(lag=g1.lag, out_per_second=g1.out_per_second) == 20.0
    assert GroupSample.objects.filter(queue="r", group=QUEUE_MODE).count() == 1


def test_nothing_sampled_within_the_window_has_no_rate(workload):
    """Five minutes after the last tick, no queue or group has a rate."""
    later = T0 + timedelta(seconds=30 + 300)
    assert rates.queue_rates(now=later) == {}
    assert rates.group_rates(now=later) == []
    assert set(rates.queue_rates(now=later - timedelta(seconds=1))) == {"r"}


def test_a_missed_first_tick_leaves_an_old_queue_out(workload):
    """Had the window's first tick not been sampled, what happened in it is unknown."""
    QueueSample.objects.filter(at=T0 + timedelta(seconds=10)).delete()
    assert rates.queue_rates(now=T0 + timedelta(seconds=35), window=timedelta(seconds=20)) == {}


def test_one_queues_rates_and_a_refresh_counts_nothing_twice(workload):
    """A refresh within a tick rewrites its rows: the rates stay the same."""
    history.stats_refresh()
    assert rates.queue_rates(now=T0 + timedelta(seconds=35), queue="r")["r"].pushed == 80
    (g1,) = rates.group_rates(now=T0 + timedelta(seconds=35), queue="r")
    assert (g1.completed, g1.lag) == (40, 40)
    assert rates.group_rates(now=T0 + timedelta(seconds=35), queue="other") == []


def test_drain_time_when_nothing_goes_out_or_nothing_is_left():
    assert rates.drain_seconds(lag=0, out_per_second=0.0) == 0.0
    assert rates.drain_seconds(lag=10, out_per_second=0.0) is None
    assert rates.drain_seconds(lag=10, out_per_second=4.0) == 2.5


def test_group_rows_go_after_their_retention(workload):
    """Rows older than ``GROUP_SAMPLES_RETENTION_SECONDS`` go with the sampler's next step."""
    history.stats_step(now=T0 + timedelta(seconds=30 + 900))
    kept = set(GroupSample.objects.values_list("at", flat=True))
    assert T0 + timedelta(seconds=20) not in kept
    assert T0 + timedelta(seconds=30) in kept
