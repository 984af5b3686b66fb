"""The context processor every dashboard page gets (settings.TEMPLATES)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from queenadmin.conf import settings as app_settings
from queenadmin.dashboard.permissions import can
from queenadmin.dashboard.twofactor import by_sso
from queenadmin.domain import clock


def dashboard(request: HttpRequest) -> dict[str, Any]:
    user = request.user if hasattr(request, "user") else None
    return {
        "environment": app_settings.ENVIRONMENT_NAME,
        "now": clock.now(),
        # Lazy: only pages that draw buttons ask for permissions.
        "can": SimpleLazyObject(lambda: can(user) if user is not None else {}),
        # Signed in through the OpenID provider: no second factor here.
        "signed_in_by_sso": by_sso(getattr(request, "session", None)),
    }
