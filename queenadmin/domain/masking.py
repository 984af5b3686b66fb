"""Fingerprints for bearer credentials (lock owners, fencing tokens).

The dashboard and the admin show only these, and so does the API to a
caller that may read a lock but not write it (a read-scope token, or a
grant of ``read`` on the lock): its owner and token (the permit row's KV
version) are what a ``renew`` or ``release`` needs.

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


def mask_permit_value(value: object) -> dict[str, str | None]:
    """A lock permit's KV value as a reader who may not hold the lock sees it.

    The owner is a credential (an acquire or renew that names it answers
    the permit's token), so it becomes its fingerprint; ``since`` stays.
    Anything else a permit row holds is left out.
    """
    owner = value.get("owner") if isinstance(value, dict) else None
    out: dict[str, str | None] = {"owner": mask_token(owner) if isinstance(owner, str) else None}
    since = value.get("since") if isinstance(value, dict) else None
    if isinstance(since, str):
        out["since"] = since
    return out
