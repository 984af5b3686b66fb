"""The audit trail: every operator action, written in the action's transaction.

Dashboard, admin, command and API actions call ``Who.record_in_txn``
inside the same ``transaction.atomic()`` as the write they record, so an
entry exists if and only if the change committed. Entries never hold raw
credentials: callers pass masked values (``domain.masking.mask_token``)
for owners and tokens.

``via`` says where an action came from (``VIAS``). Through the API
(``via="api"``) the actor is the calling token's name, or ``jwt:<sub>``
for a Queen JWT (``tokens.TokenAuth.name``), and only the operator-type
routes record one (docs/security.md, "Audit trail"): deletes, seeks,
configures, dead-letter moves and the like, not the data plane's pushes,
pops, acks and KV or lock calls. A refused call (401, 403, 404, 409) and
a call that changed nothing (a delete of what is not there, a configure
that sets what is set) record nothing, since an entry is its change's.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final

from django.db import connection

from queenadmin.domain.events import AUDIT_GROUP, broadcast_on_commit
from queenadmin.models import AuditEntry

KINDS = frozenset({"lock", "timer", "kv", "queue", "dlq", "ephemeral", "token", "login"})
#: Where an action comes from: the dashboard, the Django admin, a
#: management command on the host, an API call (a token or a JWT).
VIAS = ("dashboard", "admin", "command", "api")
API: Final = "api"


@dataclass(frozen=True, slots=True)
class Who:
    """Who acts, why, and through what: what an audit entry records besides
    the action itself and its time."""

    actor: str
    reason: str = ""
    via: str = "dashboard"

    def record_in_txn(
        self, *, now: datetime, action: str, target: str, before: str = "", after: str = ""
    ) -> AuditEntry:
        """Record this operator's ``action`` on ``target`` at ``now`` inside
        the caller's transaction (asserted).

        An action is named ``<kind>.<verb>`` (``kv.edit``): its kind, one
        of ``KINDS``, is what comes before the dot.
        """
        assert connection.in_atomic_block, "an audit entry needs the action's transaction"
        kind, _, _ = action.partition(".")
        assert kind in KINDS, action
        entry = AuditEntry.objects.create(
            at=now,
            actor=self.actor,
            action=action,
            kind=kind,
            target=target,
            before=before,
            after=after,
            reason=self.reason.strip()[:2000],
            via=self.via,
        )
        broadcast_on_commit(AUDIT_GROUP, {"type": "audit.changed", "kinds": [kind]})
        return entry
