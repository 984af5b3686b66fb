"""A JWKS document's keys, cached by ``kid`` and refreshed lazily.

Queen's broker fetches the document at start and every
``JWT_JWKS_REFRESH_INTERVAL`` seconds, and once more (at most every 5 s)
when a token names a ``kid`` it does not hold, so a key rotated in at the
identity provider is picked up by the first token signed with it. Here the
refreshes happen on the request that finds the keys stale, under a lock
(one fetch, the other requests wait for it); a fetch that fails keeps the
keys held. Entries read: ``RSA`` and ``OKP`` with ``crv: Ed25519``; the
rest are skipped, as Queen does.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.request
from collections.abc import Callable
from typing import Any

from jwt import PyJWK
from jwt.exceptions import PyJWKError

log = logging.getLogger(__name__)

#: The fewest seconds between two fetches caused by unknown ``kid`` values.
UNKNOWN_KID_REFETCH_SECONDS = 5.0


def fetch_document(url: str, timeout_ms: int) -> dict[str, Any]:
    """The JSON document at ``url``; raise ``OSError`` or ``ValueError``."""
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=max(timeout_ms, 1) / 1000) as answer:
        document = json.loads(answer.read())
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise ValueError("not a JWKS document (no keys array)")
    return document


def keys_of(document: dict[str, Any]) -> dict[str, Any]:
    """``kid`` -> verifying key of every usable entry (``""`` for one without a ``kid``)."""
    found: dict[str, Any] = {}
    for entry in document.get("keys", []):
        if not isinstance(entry, dict):
            continue
        kty, crv = entry.get("kty"), entry.get("crv")
        if kty != "RSA" and not (kty == "OKP" and crv == "Ed25519"):
            continue
        try:
            key = PyJWK(entry).key
        except (PyJWKError, ValueError, TypeError, KeyError):
            continue
        found[str(entry.get("kid", ""))] = key
    return found


class Jwks:
    """The keys of one JWKS URL (``key``), fetched lazily and throttled."""

    def __init__(
        self,
        url: str,
        *,
        refresh_seconds: float,
        timeout_ms: int,
        fetch: Callable[[str, int], dict[str, Any]] = fetch_document,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = url
        self.refresh_seconds = refresh_seconds
        self.timeout_ms = timeout_ms
        self._fetch = fetch
        self._clock = clock
        self._keys: dict[str, Any] = {}
        #: When the keys held were fetched (None: never).
        self._fetched_at: float | None = None
        #: When the last fetch was tried, whatever came of it.
        self._tried_at = float("-inf")
        self._lock = threading.Lock()
        #: Fetches made (tests read it).
        self.fetches = 0

    def prefetch(self) -> str | None:
        """Fetch now; the reason it failed, or None. A failure is not fatal."""
        with self._lock:
            return self._refresh_locked(self._clock())

    def key(self, kid: str | None) -> Any | None:
        """The key of ``kid``; None when the document has none, even after a re-fetch.

        Keys older than ``refresh_seconds`` are fetched again first. An
        unknown ``kid`` fetches again unless a fetch was tried in the last
        ``UNKNOWN_KID_REFETCH_SECONDS``.
        """
        now = self._clock()
        fetched = self._fetched_at
        if fetched is None or now - fetched >= self.refresh_seconds:
            with self._lock:
                if self._stale(now) and now - self._tried_at >= UNKNOWN_KID_REFETCH_SECONDS:
                    self._refresh_locked(now)
        found = self._lookup(kid)
        if found is None and now - self._tried_at >= UNKNOWN_KID_REFETCH_SECONDS:
            with self._lock:
                found = self._lookup(kid)
                if found is None and now - self._tried_at >= UNKNOWN_KID_REFETCH_SECONDS:
                    self._refresh_locked(now)
                    found = self._lookup(kid)
        return found

    def _stale(self, now: float) -> bool:
        return self._fetched_at is None or now - self._fetched_at >= self.refresh_seconds

    def _lookup(self, kid: str | None) -> Any | None:
        keys = self._keys
        if kid is None:
            # A token without a kid: the document's one key, if it has one.
            return next(iter(keys.values())) if len(keys) == 1 else None
        return keys.get(kid)

    def _refresh_locked(self, now: float) -> str | None:
        self._tried_at = now
        self.fetches += 1
        try:
            keys = keys_of(self._fetch(self.url, self.timeout_ms))
        except (OSError, ValueError) as exc:
            log.warning("JWT_JWKS_URL %s: the fetch failed (%s); keeping %d keys", self.url, exc, len(self._keys))
            return str(exc) or type(exc).__name__
        self._keys = keys
        self._fetched_at = now
        return None
