"""Ephemeral queues in the domain: the serving loop's sweep of idle implicit queues."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from queenadmin.domain import ephemeral
from queenadmin.server.loops import ephemeral_idle_once

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def test_the_loop_removes_implicit_queues_idle_past_the_setting_and_keeps_the_rest(settings):
    settings.QUEENADMIN_EPHEMERAL_IMPLICIT_IDLE_SECONDS = 300
    with time_machine.travel(T0, tick=False) as traveller:
        ephemeral.eph_push(queue="idle", partition="p", payloads=["1"])
        ephemeral.eph_take(queue="idle", partition=None, group=None, batch=1, auto_ack=True)
        ephemeral.eph_push(queue="busy", partition="p", payloads=["1"])
        ephemeral.eph_configure(queue="declared", options={})
        ephemeral.eph_take(queue="declared", partition=None, group=None, batch=1, auto_ack=True)
        traveller.shift(timedelta(seconds=299))
        assert ephemeral_idle_once() == 0
        traveller.shift(timedelta(seconds=2))
        assert ephemeral_idle_once() == 1
        views, _ = ephemeral.eph_queues()
        # "busy" still holds a message; "declared" is declared.
        assert [(v.queue, v.declared, v.depth) for v in views] == [("busy", False, 1), ("declared", True, 0)]
