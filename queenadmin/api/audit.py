"""Who an API call acts as, for the audit trail (``domain/audit.py``).

The operator-type routes (deletes, seeks, configures, dead-letter moves:
docs/security.md, "Audit trail") pass ``who_of(request)`` to their domain
call, which records the entry in the transaction of its change: one entry
per change, none for a refusal or for a call that changed nothing.
"""

from __future__ import annotations

from typing import Final

from django.http import HttpRequest

from queenadmin.domain import names
from queenadmin.domain.audit import API, Who
from queenadmin.models import AuditEntry

#: What ``AuditEntry.actor`` holds: a JWT's ``sub`` is cut to fit.
ACTOR_CHARS: Final = AuditEntry._meta.get_field("actor").max_length or 150


def who_of(request: HttpRequest, reason: str = "") -> Who:
    """The caller as the audit trail names it (``via="api"``): the token's
    name, ``jwt:<sub>`` for a Queen JWT, ``open`` in open mode; with the
    ``reason`` the call gives, if any (pause, resume, DLQ replay)."""
    name: str = request.auth.name  # type: ignore[attr-defined]
    return Who(names.label_of(name, ACTOR_CHARS), reason, via=API)
