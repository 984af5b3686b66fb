"""Who logs in with a second factor, and the login between its two steps.

- ``required(user)``: with ``QUEENADMIN_REQUIRE_2FA`` on, superusers and
  members of the operators group must; ``asks_code(user)``: anyone who set
  one up is asked for it, required or not.
- A password that is right for such an account does not log in: the
  session keeps a pending login (``begin_pending``: the account, its
  authentication backend, where to go next) for ``PENDING_SECONDS``, and the
  login happens when the code is right (``views/login.py``), or, for an
  account that must set one up first, when its authenticator is confirmed.
  So no session is ever logged in on the password alone.
- ``SecondFactorMiddleware``: a session logged in without the second factor
  it now needs (logged in before the setting was turned on) is logged out
  at its next page, dashboard or admin; ``socket_unverified`` finds the same
  sessions for the dashboard's websocket, which refuses them.
- A session signed in through the OpenID provider (``SSO_BACKEND``,
  ``dashboard/sso.py``) owes no second factor here: the provider owns that.
  With ``LOCAL_LOGIN=0``, a session that logged in with a password (before
  it was turned off) is logged out the same way.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from django.conf import settings as django_settings
from django.contrib.auth import BACKEND_SESSION_KEY, get_user_model, logout
from django.contrib.auth.views import redirect_to_login
from django.contrib.sessions.backends.base import SessionBase
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django_otp import DEVICE_ID_SESSION_KEY
from django_otp.models import Device

from queenadmin.conf import settings
from queenadmin.dashboard.permissions import OPERATORS_GROUP, User
from queenadmin.domain.identity.sso import local_login_allowed
from queenadmin.domain.twofactor import twofactor_enrolled

#: The session key of a login waiting for its second factor.
PENDING = "queenadmin.login.pending"
#: How long a pending login waits for its code.
PENDING_SECONDS = 300
#: The authentication backend of a session signed in through the OpenID provider.
SSO_BACKEND = "queenadmin.dashboard.sso.SsoBackend"


def by_sso(session: SessionBase | None) -> bool:
    """Whether ``session`` signed in through the OpenID provider."""
    return session is not None and session.get(BACKEND_SESSION_KEY) == SSO_BACKEND


def open_paths() -> tuple[str, ...]:
    """Paths a session that still owes its second factor may reach (and
    what lies below them: ``login/code/``, the static files)."""
    paths = [reverse("dashboard:login"), reverse("dashboard:logout"), reverse("dashboard:two_factor")]
    if django_settings.STATIC_URL:
        paths.append(django_settings.STATIC_URL)
    return tuple(paths)


def required(user: User) -> bool:
    """Whether ``user`` must log in with a second factor."""
    if not settings.REQUIRE_2FA or not user.is_authenticated:
        return False
    return bool(user.is_superuser or user.groups.filter(name=OPERATORS_GROUP).exists())


def asks_code(user: User) -> bool:
    """Whether a login of ``user`` asks for a code (it has a second factor)."""
    return twofactor_enrolled(user)


def begin_pending(request: HttpRequest, user: User, next_url: str) -> None:
    """Keep ``user`` (whose password was right) waiting for its second factor."""
    request.session[PENDING] = {
        "user": user.pk,
        "backend": user.backend,
        "next": next_url,
        "at": time.time(),
    }


def pending(request: HttpRequest) -> tuple[Any, dict[str, Any]] | None:
    """The user whose login waits for its second factor, and the pending
    login's data; None when none waits or it waited too long."""
    data = request.session.get(PENDING)
    if not isinstance(data, dict) or time.time() - float(data.get("at", 0)) > PENDING_SECONDS:
        request.session.pop(PENDING, None)
        return None
    user = get_user_model().objects.filter(pk=data["user"], is_active=True).first()
    if user is None:
        request.session.pop(PENDING, None)
        return None
    user.backend = data["backend"]
    return user, data


def end_pending(request: HttpRequest) -> None:
    request.session.pop(PENDING, None)


def unverified(request: HttpRequest) -> bool:
    """A logged-in session that lacks the second factor its user needs, or
    that logged in with a password while password login is off."""
    if by_sso(request.session):
        return False
    user = request.user
    if not local_login_allowed() and user.is_authenticated:
        return True
    if not settings.REQUIRE_2FA:
        return False
    return bool(required(user) and not user.is_verified())  # type: ignore[union-attr]


def socket_unverified(user: User, session: SessionBase | None) -> bool:
    """``unverified`` for a websocket's session, which no ``OTPMiddleware``
    reads: verified means the session names a confirmed device of ``user``
    (the rule of django-otp's middleware)."""
    if by_sso(session):
        return False
    if not local_login_allowed():
        return True
    if not settings.REQUIRE_2FA or not required(user):
        return False
    device_id = session.get(DEVICE_ID_SESSION_KEY) if session is not None else None
    device = Device.from_persistent_id(device_id) if isinstance(device_id, str) else None
    return device is None or device.user_id != user.pk or not device.confirmed


class SecondFactorMiddleware:
    """Log out a session that owes its second factor (see the module).

    Sync only: browser pages run Django's WSGI chain (``server/app.py``);
    the API's chain leaves it out (``server/handlers.BROWSER_ONLY_MIDDLEWARE``).
    """

    sync_capable = True
    async_capable = False

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not request.path.startswith(open_paths()) and unverified(request):
            logout(request)
            return redirect_to_login(request.get_full_path())
        return self.get_response(request)
