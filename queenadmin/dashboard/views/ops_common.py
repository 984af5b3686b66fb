"""What the overview, queues and search pages share: access and small helpers.

``staff_page`` is this half of the dashboard's access rule (staff login,
then the page's view permission or the action's change permission); the
lead folds it into ``views/common.py`` at merge.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from functools import wraps
from typing import Any, TypeVar

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse

View = TypeVar("View", bound=Callable[..., HttpResponse])


def staff_page(permission: str) -> Callable[[View], View]:
    """Let staff with ``permission`` in; send others to log in, or 403.

    An anonymous visitor goes to the login page with ``next`` set to where
    they were going; a signed-in user who is not staff, or lacks the
    permission, gets 403 (never a hidden button as the only guard).
    """

    def decorate(view: View) -> View:
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            user = request.user
            if not user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not user.is_staff or not user.has_perm(permission):
                raise PermissionDenied
            return view(request, *args, **kwargs)

        return wrapped  # type: ignore[return-value]

    return decorate


def may(request: HttpRequest, permission: str) -> bool:
    """Whether the signed-in user may do what ``permission`` guards."""
    return bool(request.user.is_staff and request.user.has_perm(permission))


def age_seconds(moment: datetime | None, now: datetime) -> float | None:
    return None if moment is None else max(0.0, (now - moment).total_seconds())


def int_param(params: Mapping[str, str], name: str) -> int | None:
    """A non-negative integer parameter, or None when absent or bad."""
    raw = params.get(name, "")
    return int(raw) if raw.isdigit() and len(raw) < 19 else None


def short_duration(seconds: float | None) -> str:
    """``seconds`` as a short span: "42 s", "4 min", "3 h 5 min", "2 d 4 h"."""
    if seconds is None:
        return "—"
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"
