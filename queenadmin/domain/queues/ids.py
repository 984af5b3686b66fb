"""Message and lease ids: UUIDv7 text, minted by the log itself."""

from __future__ import annotations

import os
import re
import threading
import time
from typing import Any

_UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$")


def uuid7() -> str:
    """A UUIDv7: 48 bits of Unix milliseconds, then random bits."""
    return uuid7s(1)[0]


#: The last id minted in this process, as (ms << 74) | random bits: the
#: next one is above it (``uuid7s``).
_last = 0
_lock = threading.Lock()
_RANDOM_BITS = 74


def uuid7s(count: int) -> list[str]:
    """``count`` UUIDv7 strings, each above the last one this process minted.

    Ids of one process sort in the order they were minted (RFC 9562's
    "monotonic random", method 3: within a millisecond each id adds a
    random step of up to 2**32 to the one before), so a batch pushed in
    one call sorts by id in offset order, as Queen's ids do: the Streams
    SDK orders a partition's messages by (createdAt, id).
    """
    global _last
    ms = time.time_ns() // 1_000_000 & 0xFFFFFFFFFFFF
    steps = os.urandom(4 * count)
    base = int.from_bytes(os.urandom(10)) >> (80 - _RANDOM_BITS)
    out = []
    with _lock:
        value = (ms << _RANDOM_BITS) | base
        for i in range(count):
            value = max(value, _last + 1 + int.from_bytes(steps[4 * i : 4 * i + 4]))
            out.append(_text(value))
            _last = value
    return out


def _text(value: int) -> str:
    ts = value >> _RANDOM_BITS
    rand_a = (value >> 62) & 0xFFF
    rand_b = value & ((1 << 62) - 1)
    n = ts << 80 | 0x7 << 76 | rand_a << 64 | 0b10 << 62 | rand_b
    h = f"{n:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def is_uuid(value: Any) -> bool:
    """Whether ``value`` is UUID text (any version, dashes optional)."""
    return isinstance(value, str) and bool(_UUID_RE.fullmatch(value))
