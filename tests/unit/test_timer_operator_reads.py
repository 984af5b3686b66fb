"""An operator's action on a timer locks and reads the timer's row once."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from queenadmin.domain import timers
from queenadmin.domain.audit import Who
from queenadmin.domain.timers.operator import SeenTimer, timer_operator_action

pytestmark = pytest.mark.django_db

#: A statement that reads the timers table, raw or through the ORM.
TIMER_READ = re.compile(r'^\s*SELECT\b.*\bFROM\s+"?queenadmin_timer"?(\s|$)', re.IGNORECASE | re.DOTALL)
TIMER_UPDATE = re.compile(r'^\s*UPDATE\s+"?queenadmin_timer"?\s', re.IGNORECASE)


def _schedule() -> SeenTimer:
    """A pending timer, as an operator sees it on the page."""
    shown = timers.timer_schedule(queue="q", timer_key="k", payload={"n": 1}, delay=timedelta(minutes=5))
    return SeenTimer("q", "k", shown.message_id, shown.txn, timers.DEFAULT_PARTITION)


def _statements(captured: CaptureQueriesContext, pattern: re.Pattern[str]) -> list[str]:
    return [q["sql"] for q in captured.captured_queries if pattern.match(q["sql"])]


def test_a_move_selects_the_timer_row_once_and_updates_it_once():
    """The move holds the row it read to check the operator's view and moves
    that row: it does not read it again."""
    seen = _schedule()
    with CaptureQueriesContext(connection) as captured:
        outcome = timer_operator_action(verb="move", who=Who("ann"), by=timedelta(minutes=1), seen=seen)
    assert outcome.done
    assert len(_statements(captured, TIMER_READ)) == 1, _statements(captured, TIMER_READ)
    assert len(_statements(captured, TIMER_UPDATE)) == 1, _statements(captured, TIMER_UPDATE)
    assert timers.timer_peek(queue="q", timer_key="k").deliver_at == outcome.deliver_at


@pytest.mark.parametrize("verb", ["cancel", "fire"])
def test_a_cancel_or_fire_selects_the_timer_row_once(verb):
    """Cancel and fire now read the row once as well."""
    seen = _schedule()
    with CaptureQueriesContext(connection) as captured:
        outcome = timer_operator_action(verb=verb, who=Who("ann"), seen=seen)
    assert outcome.done
    assert len(_statements(captured, TIMER_READ)) == 1, _statements(captured, TIMER_READ)
    assert timers.timer_peek(queue="q", timer_key="k") is None
