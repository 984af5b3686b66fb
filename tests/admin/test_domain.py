"""The domain functions the admin added: audit only on an operator's word,
refusals that write nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest

from queenadmin.domain import clock, tokens
from queenadmin.domain.audit import Who
from queenadmin.domain.queues import QueueOptions, queue_operator_configure
from queenadmin.domain.timers import operator as timer_operator
from queenadmin.domain.timers.calls import timers_call
from queenadmin.domain.timers.ops import TimerSchedule
from queenadmin.errors import QueueNotFound, TimersBadRequest
from queenadmin.models import AuditEntry, Queue, Timer

pytestmark = pytest.mark.django_db


def test_tokens_audit_only_an_operators_action():
    """Commands and tests make tokens without an actor: no entry. An
    operator's create and revoke each write one, without the secret."""
    tokens.token_create(by=tokens.HOST, name="quiet")
    tokens.token_revoke(name="quiet")
    assert not AuditEntry.objects.exists()
    secret = tokens.token_create(by=tokens.HOST, name="svc", who=Who("otto", "new", "admin"))
    tokens.token_revoke(name="svc", who=Who("otto", "old", "admin"))
    entries = list(AuditEntry.objects.order_by("id").values_list("action", "kind", "target", "reason", "after"))
    assert [e[:4] for e in entries] == [
        ("token.create", "token", "svc", "new"),
        ("token.revoke", "token", "svc", "old"),
    ]
    assert all(secret not in e[4] for e in entries)


def test_configure_by_an_operator_needs_an_existing_queue():
    with pytest.raises(QueueNotFound):
        queue_operator_configure(name="nope", options=QueueOptions((("leaseTime", 5),)), who=Who("otto", via="admin"))
    assert not Queue.objects.exists()
    assert not AuditEntry.objects.exists()


def test_an_encrypted_timers_payload_is_not_edited_but_its_time_is():
    op = TimerSchedule("q", "sealed", b"opaque-bytes", timedelta(minutes=5), "tx-1", encrypted=True)
    timers_call([op])
    row = Timer.objects.get(timer_key="sealed")
    seen = timer_operator.SeenTimer("q", "sealed", row.message_id, row.txn, row.partition)
    who = Who("otto", via="admin")
    later = clock.now() + timedelta(hours=1)
    with pytest.raises(TimersBadRequest):
        timer_operator.timer_operator_reschedule(seen=seen, who=who, to=later, payload=b'{"x":1}')
    assert not AuditEntry.objects.exists()
    done = timer_operator.timer_operator_reschedule(seen=seen, who=who, to=later)
    assert done.done
    moved = Timer.objects.get(timer_key="sealed")
    assert bytes(moved.payload) == b"opaque-bytes"
    assert moved.encrypted
    assert moved.deliver_at == later
    assert AuditEntry.objects.get().action == "timer.reschedule"
