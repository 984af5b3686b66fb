"""The audit trail: every operator action, written in the action's transaction.

Dashboard and admin actions call ``audit_in_txn`` (or ``Who.record_in_txn``)
inside the same ``transaction.atomic()`` as the write they record, so an
entry exists if and only if the change committed. Entries never hold raw
credentials: callers pass masked values (``domain.masking.mask_token``) for
owners and tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import connection

from queenadmin.domain.events import AUDIT_GROUP, broadcast_on_commit
from queenadmin.models import AuditEntry

KINDS = frozenset({"lock", "timer", "kv", "queue", "dlq", "token"})


def audit_in_txn(
    *,
    actor: str,
    action: str,
    kind: str,
    target: str,
    now: datetime,
    before: str = "",
    after: str = "",
    reason: str = "",
    via: str = "dashboard",
) -> AuditEntry:
    """Record one operator action inside the caller's transaction."""
    assert connection.in_atomic_block, "audit_in_txn needs the action's transaction"
    assert kind in KINDS, kind
    entry = AuditEntry.objects.create(
        at=now,
        actor=actor,
        action=action,
        kind=kind,
        target=target,
        before=before,
        after=after,
        reason=reason.strip()[:2000],
        via=via,
    )
    broadcast_on_commit(AUDIT_GROUP, {"type": "audit.changed", "kinds": [kind]})
    return entry


@dataclass(frozen=True, slots=True)
class Who:
    """Who acted, why, through what, and when: what an audit entry records
    besides the action itself."""

    actor: str
    reason: str
    via: str
    now: datetime

    def record_in_txn(self, *, action: str, kind: str, target: str, before: str = "", after: str = "") -> AuditEntry:
        """``audit_in_txn`` of this operator's ``action`` on ``target``."""
        return audit_in_txn(
            actor=self.actor,
            action=action,
            kind=kind,
            target=target,
            now=self.now,
            before=before,
            after=after,
            reason=self.reason,
            via=self.via,
        )
