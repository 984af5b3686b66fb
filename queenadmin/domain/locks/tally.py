"""Lock operations as they happen, for whoever counts them.

``calls.py`` reports each acquire, renew and release here (with its wait
and hold time); the metrics package, a floor above the domain, registers
its counters when it loads (``metrics.count_locks``). The domain so never
imports it; a process that never loads metrics (a management command)
counts nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Counters:
    operation: Callable[[str, str], None]
    wait: Callable[[float], None]
    hold: Callable[[float], None]


_counters: list[Counters] = []


def count_with(counters: Counters) -> None:
    """Have ``counters`` told of every lock operation from now on (once)."""
    if counters not in _counters:
        _counters.append(counters)


def operation(op: str, outcome: str) -> None:
    for counters in _counters:
        counters.operation(op, outcome)


def wait(seconds: float) -> None:
    for counters in _counters:
        counters.wait(seconds)


def hold(seconds: float) -> None:
    for counters in _counters:
        counters.hold(seconds)
