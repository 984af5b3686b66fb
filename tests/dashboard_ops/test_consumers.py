"""``/consumers/``, the queue page's rates, the overview's "needs attention"
list and the thresholds' form (clock frozen with time-machine, samples by
``stats_refresh``, heartbeats as the official client writes them)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from queenadmin.domain.attention import Override, attention_thresholds_set
from queenadmin.domain.audit import Who
from queenadmin.domain.queues import history
from queenadmin.models import AttentionThreshold, AuditEntry
from tests.dashboard_ops.conftest import ack, claim, push
from tests.supervised import write_beat

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 12, 6, 10, 0, 0, tzinfo=UTC)


@pytest.fixture
def watched(db: None):
    """``orders``: 60 pushed, then group ``billing`` acks 10 a tick; ``unread``:
    5 messages no one reads; ``stuck``: a group that takes 2 and never acks.
    Sampled every 10 s for a minute (the defaults' window is a minute here);
    a fresh heartbeat for ``orders``, a stale one and a malformed one."""
    attention_thresholds_set(queue="", override=Override(window_minutes=1), who=Who("otto"))
    with time_machine.travel(T0, tick=False) as traveller:
        push("orders", 60)
        push("unread", 5)
        push("stuck", 5)
        for i in range(7):
            if i:
                traveller.shift(10)
            if i >= 1:
                ack(claim("orders", group="billing", batch=10))
            if i == 1:
                claim("stuck", group="slow", batch=2)
            history.stats_refresh()
        traveller.shift(5)
        now = T0 + timedelta(seconds=65)
        write_beat(now=now - timedelta(seconds=2), application="billing-app", queue="orders", group="billing")
        write_beat(now=now - timedelta(seconds=45), application="old-app", queue="orders", group="billing")
        write_beat(now=now, application="broken-app", head={"format": "nope"})
        yield traveller


def test_the_consumers_page_lists_each_heartbeat_with_its_state(viewer, watched):
    page = viewer.get("/consumers/").content.decode()
    states = re.findall(r'<tr data-consumer="([a-z]+)">', page)
    assert sorted(states) == ["malformed", "running", "stale"]
    assert "billing-app" in page
    assert "old-app" in page
    assert "broken-app" in page
    assert "the head&#x27;s format is not queen.supervisor.remote-status/v1" in page
    assert "0 / 4 of 4" in page  # busy / running of the concurrency asked for
    assert '<span class="qa-count" title="running and beating">1 live</span>' in page


def test_the_consumers_page_rates_lag_and_drain_per_group(viewer, watched):
    """billing acked 60 over its six ticks (60 s covered by rows of 10 s):
    1/s out; the queue's 60 pushes in the 60 s from its creation to the last
    tick are 1/s in; it is done, so drained."""
    page = viewer.get("/consumers/?queue=orders").content.decode()
    (row,) = re.findall(r"<tr data-group-rate>(.*?)</tr>", page, re.S)
    cells = re.findall(r'<td class="num">([^<]*)</td>', row)
    assert cells == ["1.0 msg/s", "1.0 msg/s", "0", "drained"]
    # The filter keeps the consumers of that queue only.
    assert "broken-app" not in page


def test_the_consumers_partial_for_htmx_and_the_permissions(viewer, make_client, client, watched):
    partial = viewer.get("/consumers/", headers={"HX-Request": "true", "HX-Target": "consumers-body"})
    body = partial.content.decode().strip()
    assert body.startswith('<div id="consumers-body"')
    assert "<html" not in body
    assert make_client("staff").get("/consumers/").status_code == 403
    assert client.get("/consumers/").status_code == 302


def test_the_queue_page_shows_rates_and_time_to_drain(viewer, watched):
    page = viewer.get("/queues/stuck/").content.decode()
    assert "Rates, last 5 min" in page
    (row,) = re.findall(r"<tr data-group-rate>(.*?)</tr>", page, re.S)
    # 5 pushed in 60 s; slow took 2 and acked none: its 5 never drain.
    assert re.findall(r'<td class="num">([^<]*)</td>', row) == ["0.08 msg/s", "0 msg/s", "5", "never at this rate"]


def test_the_overview_says_no_reader_and_stalled_apart(viewer, watched):
    page = viewer.get("/").content.decode()
    flagged = dict(re.findall(r'<li data-attention="([^"]+)">.*?data-concern="([a-z-]+)"', page, re.S))
    assert flagged == {"unread": "no-reader", "stuck": "stalled"}
    assert '<span class="state state-no-reader">no reader</span>' in page
    assert '<span class="state state-stalled">stalled</span>' in page
    assert re.search(r"<span[^>]*data-consumers-live>1</span>", page)
    # The viewer may not change the thresholds: no link.
    assert "/attention/thresholds/" not in page


def test_an_operator_gets_the_thresholds_links(operator, watched):
    page = operator.get("/").content.decode()
    assert 'href="/attention/thresholds/?queue=unread"' in page
    assert 'href="/attention/thresholds/"' in page


def test_a_viewer_may_not_see_or_change_the_thresholds(viewer, watched):
    assert viewer.get("/attention/thresholds/").status_code == 403
    assert viewer.post("/attention/thresholds/", {"queue": "orders", "max_lag": "5"}).status_code == 403
    assert not AttentionThreshold.objects.filter(queue="orders").exists()


def test_an_operator_changes_a_queues_thresholds_with_a_reason(operator, watched):
    form = operator.get("/attention/thresholds/?queue=orders").content.decode()
    assert 'name="max_lag"' in form
    assert 'placeholder="10000 (default)"' in form
    answer = operator.post(
        "/attention/thresholds/", {"queue": "orders", "max_lag": "5", "max_age_seconds": "", "reason": "tight"}
    )
    assert (answer.status_code, answer["Location"]) == (303, "/#attention-title")
    entry = AuditEntry.objects.get(action="queue.attention", target="orders")
    assert entry.actor.startswith("operator")
    assert (entry.reason, entry.before, entry.after) == ("tight", "defaults", "max_lag=5")
    assert AttentionThreshold.objects.get(queue="orders").max_lag == 5


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ({"max_lag": "lots"}, "Lag over (messages): give a whole number"),
        ({"max_lag": "-5"}, "Lag over (messages): give a whole number"),
        ({"window_minutes": "0"}, "window_minutes must be a whole number from 1 to 1,440"),
        ({"max_age_seconds": "9" * 14}, "max_age_seconds must be a whole number"),
        ({"dlq_growth": "1.5"}, "Dead letters within the window: give a whole number"),
    ],
)
def test_bad_thresholds_answer_422_with_the_form_and_change_nothing(operator, watched, data, said):
    answer = operator.post("/attention/thresholds/", {"queue": "orders", **data})
    assert answer.status_code == 422
    assert said in answer.content.decode()
    assert 'name="max_lag"' in answer.content.decode()
    assert not AuditEntry.objects.filter(target="orders").exists()


def test_thresholds_of_an_unknown_queue_are_404_and_csrf_is_enforced(operator, make_client, watched):
    assert operator.get("/attention/thresholds/?queue=ghost").status_code == 404
    assert operator.post("/attention/thresholds/", {"queue": "ghost", "max_lag": "1"}).status_code == 404
    strict = make_client("operator", csrf=True)
    assert strict.post("/attention/thresholds/", {"queue": "orders", "max_lag": "1"}).status_code == 403


def test_the_defaults_form_changes_every_queue(operator, watched):
    answer = operator.post("/attention/thresholds/", {"queue": "", "max_lag": "2", "window_minutes": "1"})
    assert answer.status_code == 303
    page = operator.get("/").content.decode()
    flagged = set(re.findall(r'<li data-attention="([^"]+)">', page))
    # Every queue with more than 2 pending is now flagged.
    assert flagged == {"unread", "stuck"}
    assert "lag 5 (over 2)" in page


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "—"),
        (0.0, "0 msg/s"),
        (1234.5, "1,234 msg/s"),
        (3.42, "3.4 msg/s"),
        (0.25, "0.25 msg/s"),
        (0.02, "1.2 msg/min"),
    ],
)
def test_rates_as_the_pages_write_them(value, text):
    from queenadmin.dashboard.views.rates import per_second

    assert per_second(value) == text
