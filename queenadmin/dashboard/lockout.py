"""What django-axes asks of queenadmin (``settings.AXES_*`` name these).

- ``client_address``: the address failures are counted for. It is
  ``REMOTE_ADDR``, which the server set: uvicorn replaces the peer's
  address with the one in ``X-Forwarded-For`` only when the peer is a proxy
  listed in ``FORWARDED_ALLOW_IPS`` (docs/operations.md, "Behind a reverse proxy"),
  so a header a client sends itself never counts. No other header is read.
- ``failure_limit`` and ``cool_off``: ``QUEENADMIN_LOGIN_FAILURE_LIMIT`` and
  ``QUEENADMIN_LOGIN_LOCKOUT_MINUTES``, read at each use.
- ``not_counted``: single sign-on's callback, which axes neither refuses
  during a lockout nor counts (a refused sign-in is the provider's account
  refused by the allowlist, not a guessed password).
- ``lockout_response``: "too many failed logins, try again in N minutes",
  429 with ``Retry-After``, in the dashboard's frame, or the admin's for
  ``/admin/``.
- A lockout writes its audit entry (``domain.logins.login_lockout_record``)
  from axes' ``user_locked_out`` signal, once: axes sends it again for each
  attempt refused during the lockout, which this tells apart by the failure
  count axes computed (it computes none for a refused attempt).
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

from axes.signals import user_locked_out
from django.contrib import admin
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.response import TemplateResponse
from django.urls import reverse

from queenadmin.conf import settings
from queenadmin.domain import clock, logins


def client_address(request: HttpRequest) -> str | None:
    """The client's address as the server derived it (see the module)."""
    return request.META.get("REMOTE_ADDR") or None


def not_counted(request: HttpRequest | None, credentials: dict[str, Any] | None) -> bool:
    return request is not None and request.path == reverse("dashboard:sso_callback")


def failure_limit(request: HttpRequest, credentials: dict[str, Any] | None) -> int:
    return int(settings.LOGIN_FAILURE_LIMIT)


def cool_off(request: HttpRequest | None) -> timedelta:
    return logins.lockout_window()


def via_of(request: HttpRequest) -> str:
    """Which login a request is: ``admin`` or ``dashboard``."""
    return "admin" if request.path.startswith(reverse("admin:index")) else "dashboard"


def _username(request: HttpRequest, credentials: dict[str, Any] | None) -> str | None:
    name = (credentials or {}).get("username") or request.POST.get("username")
    return str(name) if name else None


def lockout_response(
    request: HttpRequest, original_response: HttpResponse | None, credentials: dict[str, Any] | None
) -> HttpResponse:
    """The page a locked-out login gets (429), with how long to wait."""
    now = clock.now()
    lockout = logins.lockout_of(
        username=_username(request, credentials), address=getattr(request, "axes_ip_address", None), now=now
    )
    until = lockout.until or now + logins.lockout_window()
    seconds = max(1, math.ceil((until - now).total_seconds()))
    context = {
        "title": "Too many failed logins",
        "minutes": max(1, math.ceil(seconds / 60)),
        "until": until,
        "account_locked": lockout.account_until is not None,
        "address_locked": lockout.address_until is not None,
    }
    response: HttpResponse
    if via_of(request) == "admin":
        response = TemplateResponse(
            request, "admin/queenadmin/locked_out.html", {**admin.site.each_context(request), **context}, status=429
        )
        response.render()
    else:
        response = render(request, "queenadmin/login_locked.html", context, status=429)
    response["Retry-After"] = str(seconds)
    response["Cache-Control"] = "no-store"
    return response


@receiver(user_locked_out, dispatch_uid="queenadmin.dashboard.lockout.audit")
def _audit_lockout(
    sender: Any, request: HttpRequest, username: str | None, ip_address: str | None, **kwargs: Any
) -> None:
    if getattr(request, "axes_failures_since_start", None) is None:
        return  # an attempt refused during the lockout, not a new lockout
    logins.login_lockout_record(username=username, address=ip_address, via=via_of(request))
