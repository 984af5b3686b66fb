"""When a queue needs attention: the overview's list and its thresholds.

- ``ops``: the thresholds, their defaults (``DEFAULTS``, the one place
  they are written down) and limits, and the rules (``concerns``);
- ``store``: the SQL, one class per database: the facts of every queue's
  window from the statistics sampler's rows, and the thresholds' table;
- ``calls``: ``needs_attention`` and ``attention_thresholds`` (reads);
- ``operator``: ``attention_thresholds_set``, audited.
"""

from __future__ import annotations

from queenadmin.domain.attention.calls import (
    ATTENTION_LIMIT,
    DEFAULTS_KEY,
    AttentionList,
    QueueAttention,
    QueueThresholds,
    attention_defaults,
    attention_thresholds,
    needs_attention,
)
from queenadmin.domain.attention.operator import DEFAULTS_TARGET, ThresholdsSet, attention_thresholds_set
from queenadmin.domain.attention.ops import (
    DEFAULTS,
    FIELDS,
    KINDS,
    LIMITS,
    Concern,
    Kind,
    Override,
    QueueFacts,
    Thresholds,
    check_override,
    concern,
    concerns,
    kinds_of,
)

__all__ = [
    "ATTENTION_LIMIT",
    "DEFAULTS",
    "DEFAULTS_KEY",
    "DEFAULTS_TARGET",
    "FIELDS",
    "KINDS",
    "LIMITS",
    "AttentionList",
    "Concern",
    "Kind",
    "Override",
    "QueueAttention",
    "QueueFacts",
    "QueueThresholds",
    "Thresholds",
    "ThresholdsSet",
    "attention_defaults",
    "attention_thresholds",
    "attention_thresholds_set",
    "check_override",
    "concern",
    "concerns",
    "kinds_of",
    "needs_attention",
]
