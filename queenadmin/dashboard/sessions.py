"""Sockets end with their login: a logout closes the dashboard's websockets.

Each socket joins a group named after its session (a digest, not the key);
Django's ``user_logged_out`` publishes ``session.ended`` to it, and the
consumer closes with 4401 at once instead of at its next render.
"""

from __future__ import annotations

import hashlib
from typing import Any

from django.contrib.auth.signals import user_logged_out
from django.dispatch import receiver
from django.http import HttpRequest

from queenadmin.domain import events


def session_group(session_key: str) -> str:
    """The group of one login's sockets (the key itself stays secret)."""
    return "session-" + hashlib.sha256(f"queenadmin.session:{session_key}".encode()).hexdigest()[:32]


@receiver(user_logged_out, dispatch_uid="queenadmin.dashboard.sessions.ended")
def _ended(sender: Any, request: HttpRequest | None, **kwargs: Any) -> None:
    key = request.session.session_key if request is not None and hasattr(request, "session") else None
    if key:
        events.broadcast_on_commit(session_group(key), {"type": "session.ended"})
