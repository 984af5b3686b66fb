"""``/timers/`` at scale: a total, a due range, a jump, a due chart, and bulk
cancel and move of what the filter selects (issue 26 item 4)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from queenadmin.domain import timers
from queenadmin.models import AuditEntry, Timer
from tests.dashboard.conftest import csrf_token_of

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 10, 8, 10, 0, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)


@pytest.fixture
def at_t0(time_machine):
    time_machine.move_to(T0, tick=False)


def spread(count: int, *, queue: str = "mail", key: str = "t", first: int = 1):
    """``count`` timers of ``queue`` due one a minute from ``first`` minutes on."""
    ops = [
        timers.TimerSchedule(queue, f"{key}{i:05d}", b"{}", (first + i) * MIN, f"txn-{queue}-{key}{i}")
        for i in range(count)
    ]
    for start in range(0, count, 1000):
        timers.timers_call(ops[start : start + 1000])


def keys_of(html: str) -> list[str]:
    return re.findall(r'data-timer="[^/"]+/([^"]+)"', html)


def test_the_page_counts_charts_and_ranges_what_the_filter_selects(client_for, operator, at_t0, settings):
    settings.QUEENADMIN_DASHBOARD_PAGE_SIZE = 25
    spread(300)
    spread(40, queue="sms")
    client = client_for(operator)
    html = client.get("/timers/").content.decode()
    assert "<strong>340</strong> pending timers in all" in html
    assert '<svg class="chart"' in html
    assert "Timers 1\u201325 of 340" in html
    ranged = client.get("/timers/?queue=mail&due_from=2026-10-08 12:00&due_to=2026-10-08T13:00Z").content.decode()
    assert "<strong>60</strong> pending timers match this filter" in ranged
    assert keys_of(ranged)[0] == "t00119"
    assert "Timers per minute" not in ranged  # the chart's title is its own
    assert "Timers due per 1m, 12:00:00 to 13:00:00 UTC" in ranged
    assert (
        'href="/timers/bulk/cancel/?queue=mail&amp;due_from=2026-10-08+12%3A00&amp;due_to=2026-10-08T13%3A00Z"'
        in ranged
    )


def test_each_bar_of_the_chart_is_a_row_that_jumps_there(client_for, operator, at_t0, settings):
    settings.QUEENADMIN_DASHBOARD_PAGE_SIZE = 25
    spread(120)  # one a minute for two hours: 5-minute bars
    client = client_for(operator)
    html = client.get("/timers/?queue=mail").content.decode()
    jump = re.search(r'<a href="(/timers/\?[^"]+)">2026-10-08 11:00:00</a></td><td class="num">5</td>', html)
    assert jump is not None
    assert "queue=mail" in jump.group(1)
    there = client.get(jump.group(1).replace("&amp;", "&")).content.decode()
    assert keys_of(there)[0] == "t00059"  # due 11:00


def test_a_jump_starts_the_list_at_a_due_time_and_keeps_the_filter(client_for, operator, at_t0, settings):
    settings.QUEENADMIN_DASHBOARD_PAGE_SIZE = 25
    spread(2000)
    client = client_for(operator)
    html = client.get("/timers/?queue=mail&jump=2026-10-09 10:00").content.decode()
    # Due one a minute from 10:01: a day later is the 1,440th timer.
    assert keys_of(html)[0] == "t01439"
    assert "Timers 1,440\u20131,464 of 2,000" in html
    following = re.search(r'href="(/timers/\?[^"]+)" rel="next"', html)
    assert following is not None
    assert "jump=" in following.group(1)
    second = client.get(following.group(1).replace("&amp;", "&")).content.decode()
    assert keys_of(second)[0] == "t01464"
    assert "Timers 1,465\u20131,489 of 2,000" in second
    first_page = re.search(r'href="(/timers/\?[^"]*)">First page', second)
    assert first_page is not None
    assert "jump" not in first_page.group(1)
    assert "after" not in first_page.group(1)
    relative = client.get("/timers/?jump=%2B1d").content.decode()
    assert keys_of(relative)[0] == "t01439"


@pytest.mark.parametrize(
    "query",
    [
        "due_from=yesterday",
        "due_to=2026-13-45",
        "jump=%2B99999999999d",
        "due_from=2026-10-09&due_to=2026-10-08",
        "after=not-a-cursor",
        "after=2026-10-08T10:00:00%2B00:00|99999999999999999999999",
        "queue=a%00b",
        "due_from=0001-01-01",
        "due_to=9999-12-31",
        "jump=9999-12-31T23:59:59.999999",
        "due_to=-99999d",
    ],
)
def test_a_filter_that_cannot_be_read_answers_400_with_the_error(client_for, operator, query):
    response = client_for(operator).get(f"/timers/?{query}")
    assert response.status_code in (200, 400)
    # NUL is refused before the page is drawn (the dashboard's 400 page).
    assert ('class="panel problem"' if "%00" in query else 'class="callout bad"') in response.content.decode()
    if "after=" not in query:
        assert response.status_code == 400


def test_the_widest_range_draws_its_chart(client_for, operator, at_t0):
    spread(3)
    response = client_for(operator).get("/timers/?due_from=1970-01-01&due_to=8999-12-31T23:59")
    assert response.status_code == 200
    assert "<strong>3</strong> pending timers match this filter" in response.content.decode()


def test_the_filtered_page_costs_the_same_queries_at_any_size(client_for, operator, at_t0, settings):
    settings.QUEENADMIN_DASHBOARD_PAGE_SIZE = 25
    client = client_for(operator)
    path = "/timers/?queue=mail&due_from=now&due_to=%2B7d&jump=%2B1h"
    spread(3)
    with CaptureQueriesContext(connection) as few:
        assert client.get(path).status_code == 200
    spread(3000)
    with CaptureQueriesContext(connection) as many:
        assert client.get(path).status_code == 200
    assert len(many.captured_queries) == len(few.captured_queries)


BULK = ["/timers/bulk/cancel/", "/timers/bulk/move/"]


@pytest.mark.parametrize("path", BULK)
@pytest.mark.parametrize("who", ["anonymous", "outsider", "viewer"])
def test_bulk_actions_are_refused_without_the_change_permission(client_for, request, at_t0, path, who):
    spread(5)
    user = None if who == "anonymous" else request.getfixturevalue(who)
    client = client_for(user)
    form = {"queue": "mail", "expected": "5", "upto": "999", "shift": "+1h", "reason": "no"}
    assert client.get(path, {"queue": "mail"}).status_code == 403
    assert client.post(path, form).status_code == 403
    assert Timer.objects.count() == 5
    assert min(Timer.objects.values_list("deliver_at", flat=True)) == T0 + MIN
    assert not AuditEntry.objects.exists()


def test_a_viewer_sees_no_bulk_buttons(client_for, viewer, at_t0):
    spread(5)
    html = client_for(viewer).get("/timers/").content.decode()
    assert "/timers/bulk/" not in html
    assert "<strong>5</strong> pending timers" in html


@pytest.mark.parametrize("path", BULK)
def test_a_bulk_action_needs_the_csrf_token(client_for, operator, at_t0, path):
    spread(5)
    client = client_for(operator, csrf=True)
    confirm = client.get(path, {"queue": "mail"})
    html = confirm.content.decode()
    upto = re.search(r'name="upto" value="(\d+)"', html).group(1)
    form = {"queue": "mail", "expected": "5", "upto": upto, "shift": "+1h"}
    assert client.post(path, form).status_code == 403
    assert not AuditEntry.objects.exists()
    done = client.post(path, form | {"csrfmiddlewaretoken": csrf_token_of(html)})
    assert done.status_code == 302
    assert AuditEntry.objects.count() == 1


def test_bulk_cancel_confirms_the_count_then_cancels_in_one_audited_action(client_for, operator, at_t0):
    spread(1200)
    spread(30, queue="sms")
    client = client_for(operator)
    confirm = client.get("/timers/bulk/cancel/", {"queue": "mail", "due_to": "2026-10-08 20:00"})
    html = confirm.content.decode()
    assert confirm.status_code == 200
    assert "Cancel 599 timers?" in html
    assert 'name="expected" value="599"' in html
    assert 'name="reason"' in html
    assert "queue mail, due before 2026-10-08T20:00:00+00:00" in html
    upto = re.search(r'name="upto" value="(\d+)"', html)
    assert upto is not None
    form = {"queue": "mail", "due_to": "2026-10-08 20:00", "expected": "599", "upto": upto.group(1)}
    done = client.post("/timers/bulk/cancel/", form | {"reason": "campaign withdrawn"}, follow=True)
    page = done.content.decode()
    assert "Cancelled 599 timers (queue mail, due before 2026-10-08T20:00:00+00:00)." in page
    assert Timer.objects.filter(queue="mail").count() == 601
    assert Timer.objects.filter(queue="sms").count() == 30
    (entry,) = AuditEntry.objects.all()
    assert (entry.action, entry.actor, entry.reason) == ("timer.bulk_cancel", "otto", "campaign withdrawn")
    assert "599 timers matched" in entry.before


def test_bulk_move_shifts_every_selected_timer(client_for, operator, at_t0):
    spread(50)
    client = client_for(operator)
    html = client.get("/timers/bulk/move/", {"prefix": "t0001"}).content.decode()
    assert "Move 10 timers?" in html
    upto = re.search(r'name="upto" value="(\d+)"', html).group(1)
    form = {"prefix": "t0001", "expected": "10", "upto": upto, "shift": "+1d2h"}
    page = client.post("/timers/bulk/move/", form, follow=True).content.decode()
    assert "Moved 10 timers by +1d2h" in page
    moved = Timer.objects.filter(timer_key__startswith="t0001").values_list("deliver_at", flat=True)
    assert sorted(moved) == [T0 + (11 + i) * MIN + timedelta(hours=26) for i in range(10)]
    assert AuditEntry.objects.get().action == "timer.bulk_move"


@pytest.mark.parametrize("shift", ["", "1h", "+0m", "tomorrow", "+99999999999999d"])
def test_a_bulk_move_without_a_readable_shift_is_refused_with_the_form(client_for, operator, at_t0, shift):
    spread(5)
    form = {"queue": "mail", "expected": "5", "upto": "999", "shift": shift}
    response = client_for(operator).post("/timers/bulk/move/", form)
    assert response.status_code == 422
    assert 'class="callout bad"' in response.content.decode()
    assert 'name="shift"' in response.content.decode()
    assert not AuditEntry.objects.exists()


def test_a_bulk_move_past_the_horizon_is_refused_and_moves_nothing(client_for, operator, at_t0, settings):
    settings.QUEENADMIN_TIMERS_HORIZON_SECONDS = 86400
    spread(5)
    form = {"queue": "mail", "expected": "5", "upto": "999", "shift": "+1d"}
    response = client_for(operator).post("/timers/bulk/move/", form)
    assert response.status_code == 422
    assert "horizon" in response.content.decode()
    assert min(Timer.objects.values_list("deliver_at", flat=True)) == T0 + MIN


def test_the_confirmation_sends_back_a_relative_range_as_resolved(client_for, operator, at_t0):
    spread(5)
    html = client_for(operator).get("/timers/bulk/move/", {"due_to": "+1h"}).content.decode()
    assert 'name="due_to" value="2026-10-08T11:00:00+00:00"' in html


def test_a_bulk_post_without_the_confirmed_count_is_refused(client_for, operator, at_t0):
    spread(5)
    response = client_for(operator).post("/timers/bulk/cancel/", {"queue": "mail"})
    assert response.status_code == 422
    assert Timer.objects.count() == 5


def test_a_timer_fired_since_confirmation_is_reported(client_for, operator, at_t0):
    spread(10, first=0)  # the first is due now
    client = client_for(operator)
    html = client.get("/timers/bulk/cancel/", {"queue": "mail"}).content.decode()
    upto = re.search(r'name="upto" value="(\d+)"', html).group(1)
    assert timers.timers_fire_due().fired == 1
    page = client.post(
        "/timers/bulk/cancel/", {"queue": "mail", "expected": "10", "upto": upto}, follow=True
    ).content.decode()
    assert "Cancelled 9 timers" in page
    assert "1 of the 10 you confirmed were no longer pending as filtered" in page


def test_nothing_to_act_on_offers_no_button(client_for, operator):
    html = client_for(operator).get("/timers/bulk/cancel/", {"queue": "nobody"}).content.decode()
    assert "No pending timer matches this filter now" in html
    assert 'class="btn btn-danger solid"' not in html
