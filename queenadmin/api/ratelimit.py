"""Per-token call rates for the KV-family routes (protocol 2.12).

A token bucket per (API token, read or write) in each server process,
like Queen's "per tenant per node". Off unless ``QUEENADMIN_KV_WRITE_RATE``
or ``QUEENADMIN_KV_READ_RATE`` is set.
"""

from __future__ import annotations

import threading
import time
from typing import Literal

from django.http import HttpRequest

from queenadmin.conf import settings
from queenadmin.errors import RateLimited

Kind = Literal["read", "write"]

_buckets: dict[tuple[str, Kind], tuple[float, float]] = {}
_lock = threading.Lock()


def admit(request: HttpRequest, kind: Kind) -> None:
    """Spend one call of ``kind`` for the caller's token, or raise ``RateLimited``."""
    rate = settings.KV_WRITE_RATE if kind == "write" else settings.KV_READ_RATE
    if rate <= 0:
        return
    burst = (settings.KV_WRITE_BURST if kind == "write" else settings.KV_READ_BURST) or 2 * rate
    key = (getattr(getattr(request, "auth", None), "name", ""), kind)
    now = time.monotonic()
    with _lock:
        tokens, stamp = _buckets.get(key, (burst, now))
        tokens = min(burst, tokens + (now - stamp) * rate)
        if tokens < 1:
            _buckets[key] = (tokens, now)
            raise RateLimited(retry_after=(1 - tokens) / rate)
        _buckets[key] = (tokens - 1, now)


def reset() -> None:
    """Forget every bucket (tests)."""
    with _lock:
        _buckets.clear()
