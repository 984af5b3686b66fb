"""Fingerprints for bearer credentials (lock owners, fencing tokens).

A fingerprint tells two values apart on a dashboard or in a log line and
cannot be used in their place: it is a keyed hash, not a piece of the value,
so neither a prefix nor a brute force over small integers (tokens are KV
versions) gives the value back without the project's ``SECRET_KEY``.
"""

from __future__ import annotations

import hashlib
import hmac

from django.conf import settings

#: Hex digits shown; enough to tell holders apart at a glance.
FINGERPRINT_DIGITS = 6


def mask_token(value: object) -> str | None:
    """Return a short fingerprint of ``value`` such as ``"a1b2c3…"``.

    ``None`` stays ``None`` (nothing to hide). Equal values give equal
    fingerprints, so a viewer can still see that a holder did not change.
    """
    if value is None:
        return None
    key = f"queenadmin.masking:{settings.SECRET_KEY}".encode()
    digest = hmac.new(key, str(value).encode(), hashlib.sha256).hexdigest()
    return digest[:FINGERPRINT_DIGITS] + "…"
