"""The Django admin: reads freely, writes only through ``domain/``.

One module per concept; importing them registers their model admins.
"""

from __future__ import annotations

from queenadmin.admin import kv, logins, queues, timers, tokens

__all__ = ["kv", "logins", "queues", "timers", "tokens"]
