"""Delivery runs: how many times each pending offset went out to a group.

A cursor stores them as sorted, disjoint ``[first, last, attempts]`` runs
(``ConsumerCursor.delivery_runs``). Every claim starts at the committed
offset plus one, so runs only grow by whole prefixes and shrink as the
cursor advances; these pure functions are the whole encoding.
"""

from __future__ import annotations

#: Per-offset delivery counts as ``[first, last, attempts]`` runs.
Runs = list[list[int]]


def runs_deliver(runs: Runs, first: int, last: int) -> Runs:
    """``runs`` after one more delivery of every offset in ``first..last``.

    Offsets in the range that no run covers count as delivered once.
    """
    out: Runs = []
    pos = first  # The lowest offset of first..last not yet written out.
    for a, b, n in runs:
        if b < first:
            out.append([a, b, n])
            continue
        if a > last:
            if pos <= last:
                out.append([pos, last, 1])
                pos = last + 1
            out.append([a, b, n])
            continue
        if a < first:
            out.append([a, first - 1, n])
        if pos < a:
            out.append([pos, a - 1, 1])
        high = min(b, last)
        out.append([max(a, first), high, n + 1])
        pos = high + 1
        if b > last:
            out.append([last + 1, b, n])
    if pos <= last:
        out.append([pos, last, 1])
    return _merge_runs(out)


def runs_trim(runs: Runs, committed: int) -> Runs:
    """``runs`` without the offsets at or below ``committed``."""
    return [[max(a, committed + 1), b, n] for a, b, n in runs if b > committed]


def runs_delivered_last(runs: Runs) -> int:
    """The highest offset ever delivered above the committed one (-1: none).

    Claims start at the committed offset plus one, so the delivered offsets
    are a prefix: every pending offset up to this one went out at least once.
    """
    return max((b for _, b, _ in runs), default=-1)


def runs_attempts(runs: Runs, first: int, last: int) -> list[int]:
    """The delivery count of each offset in ``first..last``, in order."""
    counts = [0] * (last - first + 1)
    for a, b, n in runs:
        for offset in range(max(a, first), min(b, last) + 1):
            counts[offset - first] = n
    return counts


def _merge_runs(runs: Runs) -> Runs:
    merged: Runs = []
    for a, b, n in runs:
        if merged and merged[-1][1] + 1 == a and merged[-1][2] == n:
            merged[-1][1] = b
        else:
            merged.append([a, b, n])
    return merged
