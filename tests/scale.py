"""How large the race, scale and soak tests run: ``QA_SCALE``.

- ``ci`` (the default; ``make test`` and CI): each such test runs in a
  fraction of the time, at a size at which the bug it guards against, put
  back, still fails it; where a race meets its bug only by chance at any
  size, a deterministic test beside it holds the rule (the closing note of
  issue 24 lists, per test, the bug put back and what failed).
- ``full``: the sizes they were written with. ``make soak`` runs every test
  marked ``scaled`` at this size, on PostgreSQL.

A test reads its sizes with ``sized(ci=..., full=...)`` and carries the
``scaled`` marker (``pytestmark = scaled`` or ``@scaled``), so that ``-m
scaled`` selects exactly the tests whose size this setting changes.
"""

from __future__ import annotations

import os
from typing import TypeVar

import pytest

T = TypeVar("T")

#: The names ``QA_SCALE`` may take.
SCALES = ("ci", "full")

QA_SCALE = os.environ.get("QA_SCALE", "ci").strip().lower() or "ci"
if QA_SCALE not in SCALES:
    raise RuntimeError(f"QA_SCALE={QA_SCALE!r}: use one of {', '.join(SCALES)}")

#: Marks a test whose size ``QA_SCALE`` sets.
scaled = pytest.mark.scaled


def full_size() -> bool:
    return QA_SCALE == "full"


def sized(ci: T, full: T) -> T:
    """``full`` under ``QA_SCALE=full``, else ``ci``."""
    return full if full_size() else ci
