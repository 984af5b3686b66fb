"""Message and lease ids: UUIDv7 text, minted by the log itself."""

from __future__ import annotations

import os
import re
import time
from typing import Any

_UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$")
#: The top two bits of the clock-sequence byte are the RFC 4122 variant.
_VARIANT = {f"{n:x}": f"{8 | n & 3:x}" for n in range(16)}


def uuid7() -> str:
    """A UUIDv7: 48 bits of Unix milliseconds, then random bits."""
    return uuid7s(1)[0]


def uuid7s(count: int) -> list[str]:
    """``count`` UUIDv7 strings sharing one timestamp (one urandom call)."""
    ms = f"{time.time_ns() // 1_000_000 & 0xFFFFFFFFFFFF:012x}"
    head = f"{ms[:8]}-{ms[8:]}-7"
    rand = os.urandom(10 * count).hex()
    out = []
    for i in range(0, 20 * count, 20):
        r = rand[i : i + 20]
        out.append(f"{head}{r[1:4]}-{_VARIANT[r[4]]}{r[5:8]}-{r[8:20]}")
    return out


def is_uuid(value: Any) -> bool:
    """Whether ``value`` is UUID text (any version, dashes optional)."""
    return isinstance(value, str) and bool(_UUID_RE.fullmatch(value))
