"""Second factors: an authenticator app (TOTP, RFC 6238) and recovery codes.

Stored by django-otp: a ``TOTPDevice`` per account (unconfirmed until its
first code is entered) and a ``StaticDevice`` whose tokens are the recovery
codes, each deleted as it is used. Who must have one, and when it is asked
for, is the logins' business (``dashboard/twofactor.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django_otp import devices_for_user, user_has_device
from django_otp.models import Device
from django_otp.plugins.otp_static.models import StaticDevice, StaticToken
from django_otp.plugins.otp_totp.models import TOTPDevice

from queenadmin.domain import clock
from queenadmin.domain.audit import Who

#: Recovery codes made at each enrolment.
RECOVERY_CODES = 10
AUTHENTICATOR = "authenticator"
RECOVERY = "recovery codes"
ENROL = "login.2fa_enrol"
RECOVERY_USED = "login.recovery_code"

_SPACES = re.compile(r"[\s-]+")


def normalize_code(code: str) -> str:
    """A code as typed, without spaces or dashes, lower case (recovery
    codes are shown in groups; TOTP codes are digits)."""
    return _SPACES.sub("", code).lower()


def twofactor_enrolled(user: AbstractBaseUser) -> bool:
    """Whether ``user`` has a confirmed second factor."""
    return bool(user_has_device(user, confirmed=True))


@dataclass(frozen=True, slots=True)
class Enrolment:
    """An authenticator being set up: what the app needs to know."""

    #: The shared secret, base32 (what an app asks for when typed in).
    secret: str
    #: ``otpauth://totp/queenadmin:<user>?secret=...``: what the QR code holds.
    uri: str


def _enrolment(device: TOTPDevice) -> Enrolment:
    uri: str = device.config_url
    match = re.search(r"[?&]secret=([A-Z2-7]+)", uri)
    assert match is not None, uri
    return Enrolment(secret=match.group(1), uri=uri)


@transaction.atomic(durable=True)
def twofactor_enrol_begin(*, user: AbstractBaseUser) -> Enrolment:
    """Make a new authenticator secret for ``user``, unconfirmed (unused at
    login) until ``twofactor_enrol_confirm`` gets its code; an earlier
    unconfirmed one is dropped. A confirmed one keeps working meanwhile.
    The outermost call."""
    TOTPDevice.objects.filter(user=user, confirmed=False).delete()
    device = TOTPDevice.objects.create(user=user, name=AUTHENTICATOR, confirmed=False)
    return _enrolment(device)


def twofactor_enrolment(*, user: AbstractBaseUser) -> Enrolment | None:
    """The authenticator ``user`` is setting up, or None."""
    device = TOTPDevice.objects.filter(user=user, confirmed=False).order_by("-pk").first()
    return None if device is None else _enrolment(device)


@dataclass(frozen=True, slots=True)
class Enrolled:
    """What confirming an authenticator did: ``confirmed`` False when the
    code did not match (or nothing was being set up)."""

    confirmed: bool
    #: New recovery codes, shown once; every earlier one stops working.
    recovery_codes: tuple[str, ...] = ()
    #: The confirmed device, for ``django_otp.login`` (marks the session verified).
    device: Any = None


@transaction.atomic(durable=True)
def twofactor_enrol_confirm(*, user: AbstractBaseUser, code: str, who: Who) -> Enrolled:
    """Confirm the authenticator ``user`` is setting up with a ``code`` it
    shows: it becomes the account's one authenticator (an earlier one stops
    working), with ``RECOVERY_CODES`` new recovery codes, and
    ``login.2fa_enrol`` is recorded.

    Return ``Enrolled(confirmed=False)`` for a code that does not match.
    The outermost call.
    """
    device = TOTPDevice.objects.filter(user=user, confirmed=False).order_by("-pk").select_for_update().first()
    if device is None or not device.verify_token(normalize_code(code)):
        return Enrolled(confirmed=False)
    TOTPDevice.objects.filter(user=user).exclude(pk=device.pk).delete()
    # The row verify_token saved, with confirmed set.
    TOTPDevice.objects.filter(pk=device.pk).update(confirmed=True)
    device.confirmed = True
    StaticDevice.objects.filter(user=user).delete()
    recovery = StaticDevice.objects.create(user=user, name=RECOVERY, confirmed=True)
    codes = tuple(StaticToken.random_token() for _ in range(RECOVERY_CODES))
    StaticToken.objects.bulk_create(StaticToken(device=recovery, token=code) for code in codes)
    who.record_in_txn(
        now=clock.now(),
        action=ENROL,
        target=user.get_username(),
        after=f"authenticator and {RECOVERY_CODES} recovery codes",
    )
    return Enrolled(confirmed=True, recovery_codes=codes, device=device)


@dataclass(frozen=True, slots=True)
class Verified:
    """A code that matched one of an account's second factors."""

    #: For ``django_otp.login`` (marks the session verified).
    device: Device
    #: A recovery code (now used up), not the authenticator.
    recovery: bool
    #: Recovery codes left after this one.
    recovery_left: int


@transaction.atomic(durable=True)
def twofactor_verify(*, user: AbstractBaseUser, code: str, via: str) -> Verified | None:
    """Check ``code`` against ``user``'s confirmed second factors: the
    authenticator's current code (each accepted once) or one of the
    recovery codes, which is used up (``login.recovery_code`` recorded).

    Return None when nothing matched. The outermost call.
    """
    code = normalize_code(code)
    if not code:
        return None
    # Each device row locked for the check: two logins cannot both use one code.
    for device in devices_for_user(user, confirmed=True, for_verify=True):
        if device.verify_token(code):
            break
    else:
        return None
    recovery = isinstance(device, StaticDevice)
    left = StaticToken.objects.filter(device__user=user).count()
    if recovery:
        Who(user.get_username(), "", via).record_in_txn(
            now=clock.now(),
            action=RECOVERY_USED,
            target=user.get_username(),
            after=f"{left} recovery code{'s' if left != 1 else ''} left",
        )
    return Verified(device=device, recovery=recovery, recovery_left=left)
