"""Login throttling: how long a lockout lasts, its audit entry, unlocking.

django-axes counts failed logins of the dashboard and the admin (its
``AccessAttempt`` rows, one per user name, client address and user agent,
each with its number of failures and the time of the last) and refuses a
login while the failures of its account, or apart of its address, within
``LOGIN_LOCKOUT_MINUTES`` reach ``LOGIN_FAILURE_LIMIT``, before any password
is checked. This module reads those rows for what the lockout page and the
audit say, and is the one place that removes them (``login_unlock``).

A login (of the dashboard or the admin: Django's ``user_logged_in``) of the
account that ``serve --bootstrap`` made removes the first-run notes that
hold its password (``domain.firstrun``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from axes.handlers.proxy import AxesProxyHandler
from axes.models import AccessAttempt
from django.contrib.auth.signals import user_logged_in
from django.db import transaction
from django.db.models import Q
from django.dispatch import receiver

from queenadmin.conf import settings
from queenadmin.domain import clock, firstrun
from queenadmin.domain.audit import Who
from queenadmin.errors import InvalidArgument

LOCKOUT = "login.lockout"
UNLOCK = "login.unlock"


def lockout_window() -> timedelta:
    """How long failures count, and how long a lockout lasts after the last."""
    return timedelta(minutes=settings.LOGIN_LOCKOUT_MINUTES)


@dataclass(frozen=True, slots=True)
class Lockout:
    """Until when an account and a client address are locked out (None:
    not locked)."""

    account_until: datetime | None
    address_until: datetime | None

    @property
    def until(self) -> datetime | None:
        """When a login from that address to that account is allowed again."""
        times = [t for t in (self.account_until, self.address_until) if t is not None]
        return max(times) if times else None


def _locked_until(rows: Iterable[tuple[datetime, int]], *, limit: int, window: timedelta) -> datetime | None:
    # Rows leave the count oldest first, as their last failure ages out of
    # the window: the lockout ends when the row that brings the newest
    # failures up to the limit leaves it.
    failures = 0
    for last_failure, count in sorted(rows, reverse=True):
        failures += count
        if failures >= limit:
            return last_failure + window
    return None


def lockout_of(*, username: str | None, address: str | None, now: datetime) -> Lockout:
    """Until when ``username`` and ``address`` are locked out at ``now``,
    counted as axes counts (failures within the window, per account and per
    address)."""
    window, limit = lockout_window(), settings.LOGIN_FAILURE_LIMIT
    recent = AccessAttempt.objects.filter(attempt_time__gte=now - window)

    def until(**match: str) -> datetime | None:
        rows = recent.filter(**match).values_list("attempt_time", "failures_since_start")
        return _locked_until(rows, limit=limit, window=window)

    return Lockout(
        account_until=until(username=username) if username else None,
        address_until=until(ip_address=address) if address else None,
    )


@transaction.atomic(durable=True)
def login_lockout_record(*, username: str | None, address: str | None, via: str) -> Lockout | None:
    """Record the lockout that the last failed login of ``username`` from
    ``address`` caused (action ``login.lockout``): the client address as the
    actor, the account (or the address, when only it is locked) as the
    target, until when in ``after``.

    Return the lockout, or None when neither is locked (nothing recorded).
    The outermost call.
    """
    now = clock.now()
    lockout = lockout_of(username=username, address=address, now=now)
    if lockout.until is None:
        return None
    window = lockout_window()
    locked = []
    if lockout.account_until is not None:
        locked.append(f"account until {lockout.account_until:%Y-%m-%d %H:%M:%S} UTC")
    if lockout.address_until is not None:
        locked.append(f"address until {lockout.address_until:%Y-%m-%d %H:%M:%S} UTC")
    limit = settings.LOGIN_FAILURE_LIMIT
    minutes = f"{window.total_seconds() / 60:g}"
    Who(address or "unknown address", f"{limit} failed logins within {minutes} minutes", via).record_in_txn(
        now=now,
        action=LOCKOUT,
        target=(username if lockout.account_until is not None and username else address) or "",
        after="locked: " + "; ".join(locked),
    )
    return lockout


@dataclass(frozen=True, slots=True)
class Unlocked:
    """What ``login_unlock`` forgot: failed-login records (0: none were kept)."""

    records: int


@transaction.atomic(durable=True)
def login_unlock(*, who: Who, username: str | None = None, address: str | None = None) -> Unlocked:
    """Forget the failed logins of the account ``username`` (from every
    address) and of the client ``address`` (to every account), so either may
    log in again at once; record ``login.unlock`` when any were kept.

    Raise ``InvalidArgument`` when neither is given. The outermost call.
    """
    username, address = (username or "").strip() or None, (address or "").strip() or None
    if username is None and address is None:
        raise InvalidArgument("name an account or a client address to unlock")
    if username is not None and address is not None:
        records = AxesProxyHandler.reset_attempts(username=username, ip_address=address, ip_or_username=True)
    else:
        records = AxesProxyHandler.reset_attempts(username=username, ip_address=address)
    if records:
        targets = [f"account {username}" if username else "", f"address {address}" if address else ""]
        who.record_in_txn(
            now=clock.now(),
            action=UNLOCK,
            target=username or address or "",
            before=f"{records} failed-login record{'s' if records != 1 else ''}",
            after="unlocked: " + ", ".join(t for t in targets if t),
        )
    return Unlocked(records)


def locked_out(*, now: datetime) -> list[tuple[str, str]]:
    """Every account (``("account", name)``) and client address
    (``("address", ip)``) locked out at ``now``, for ``unlock_login --list``."""
    window, limit = lockout_window(), settings.LOGIN_FAILURE_LIMIT
    rows = AccessAttempt.objects.filter(attempt_time__gte=now - window).filter(
        Q(username__isnull=False) | Q(ip_address__isnull=False)
    )
    by: dict[tuple[str, str], list[tuple[datetime, int]]] = {}
    for username, ip, at, failures in rows.values_list(
        "username", "ip_address", "attempt_time", "failures_since_start"
    ):
        if username:
            by.setdefault(("account", username), []).append((at, failures))
        if ip:
            by.setdefault(("address", ip), []).append((at, failures))
    return sorted(key for key, found in by.items() if _locked_until(found, limit=limit, window=window))


@receiver(user_logged_in, dispatch_uid="queenadmin.domain.logins.first_run")
def _first_run_logged_in(sender: Any, user: Any, **kwargs: Any) -> None:
    firstrun.first_run_logged_in(username=user.get_username())
