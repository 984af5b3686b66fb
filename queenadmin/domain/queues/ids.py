"""Message and lease ids: UUIDv7 text, minted by the log itself."""

from __future__ import annotations

import os
import re
import struct
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
_RAND_B = (1 << 62) - 1
_VERSION = 0x7 << 76
_VARIANT = 0b10 << 62


def uuid7s(count: int) -> list[str]:
    """``count`` UUIDv7 strings, each above the last one this process minted.

    Ids of one process sort in the order they were minted (RFC 9562's
    "monotonic random", method 3: within a millisecond each id adds a
    random step of up to 2**32 to the one before), so a batch pushed in
    one call sorts by id in offset order, as Queen's ids do: the Streams
    SDK orders a partition's messages by (createdAt, id).
    """
    global _last
    if count <= 0:
        return []
    ms = time.time_ns() // 1_000_000 & 0xFFFFFFFFFFFF
    steps = struct.unpack(f">{count}I", os.urandom(4 * count))
    base = int.from_bytes(os.urandom(10)) >> (80 - _RANDOM_BITS)
    out = []
    with _lock:
        value = max((ms << _RANDOM_BITS) | base, _last + 1 + steps[0])
        for step in steps:
            value += 1 + step
            # ms | ver 7 | rand_a (12) | variant 10 | rand_b (62)
            n = (value >> 74) << 80 | _VERSION | ((value >> 62) & 0xFFF) << 64 | _VARIANT | (value & _RAND_B)
            h = f"{n:032x}"
            out.append(f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}")
        _last = value
    return out


def is_uuid(value: Any) -> bool:
    """Whether ``value`` is UUID text (any version, dashes optional)."""
    return isinstance(value, str) and bool(_UUID_RE.fullmatch(value))
