from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.db import transaction

from queenadmin.dashboard.permissions import CHANGE, OPERATOR_ONLY_PAGES, OPERATORS_GROUP, VIEW, VIEWERS_GROUP
from queenadmin.domain.audit import Who
from queenadmin.domain.clock import now
from queenadmin.models import AuditEntry

pytestmark = pytest.mark.django_db


def _perms(group: str) -> set[str]:
    return {f"queenadmin.{p.codename}" for p in Group.objects.get(name=group).permissions.all()}


def test_viewers_may_see_every_page_but_the_operators_and_do_nothing() -> None:
    viewers = _perms(VIEWERS_GROUP)
    assert {perm for page, perm in VIEW.items() if page not in OPERATOR_ONLY_PAGES} <= viewers
    assert not {VIEW[page] for page in OPERATOR_ONLY_PAGES} & viewers
    assert not set(CHANGE.values()) & viewers


def test_operators_may_see_every_page_and_do_every_action() -> None:
    operators = _perms(OPERATORS_GROUP)
    assert set(VIEW.values()) | set(CHANGE.values()) <= operators


@pytest.mark.django_db(transaction=True)
def test_an_audit_entry_needs_the_actions_transaction() -> None:
    with pytest.raises(AssertionError):
        Who("ann").record_in_txn(now=now(), action="timer.cancel", target="q/k")


@pytest.mark.django_db(transaction=True)
def test_an_audit_entry_rolls_back_with_its_action() -> None:
    def failing_action() -> None:
        with transaction.atomic():
            Who("ann", " r ").record_in_txn(now=now(), action="timer.cancel", target="q/k")
            raise RuntimeError("the action failed")

    with pytest.raises(RuntimeError):
        failing_action()
    assert not AuditEntry.objects.exists()
    with transaction.atomic():
        Who("ann", " r ").record_in_txn(now=now(), action="timer.cancel", target="q/k")
    entry = AuditEntry.objects.get()
    assert (entry.actor, entry.kind, entry.reason, entry.via) == ("ann", "timer", "r", "dashboard")
