from __future__ import annotations

from queenadmin.models.auth import ApiToken, AuditEntry
from queenadmin.models.kv import KVEntry, VersionCounter

__all__ = ["ApiToken", "AuditEntry", "KVEntry", "VersionCounter"]
