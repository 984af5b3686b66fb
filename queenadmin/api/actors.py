"""Who an API call acts as, in the audit trail: the bearer token's name.

An operator write through the API (a DLQ replay) records its entry as the
dashboard's do (``domain/audit.py``), with ``via="api"`` and the reason
the call gives, if any.
"""

from __future__ import annotations

from django.http import HttpRequest

from queenadmin.domain import tokens
from queenadmin.domain.audit import Who

#: ``AuditEntry.via`` of the API's entries.
VIA = "api"
#: ``AuditEntry.actor``'s length.
_ACTOR_CHARS = 150


def who_of(request: HttpRequest, reason: str = "") -> Who:
    """The caller as an audit entry names it: its token's name (``jwt:<sub>``
    for a JWT, ``open`` in open mode), and ``reason``."""
    auth: tokens.TokenAuth = request.auth  # type: ignore[attr-defined]
    return Who(auth.name[:_ACTOR_CHARS], reason, VIA)
