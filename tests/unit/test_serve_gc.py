"""A serving worker's start-up settles the garbage collector (``loops.settle_gc``)."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from queenadmin.server import loops


def test_the_lifespan_startup_freezes_the_heap_and_raises_the_young_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("start", "stop", "_close_pops_on_stop_signals"):
        monkeypatch.setattr(loops, name, lambda: None)
    monkeypatch.setattr(loops.metrics, "worker_started", lambda: None)
    monkeypatch.setattr(loops.metrics, "worker_exited", lambda pid: None)
    thresholds = gc.get_threshold()
    assert gc.get_freeze_count() == 0
    messages = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent: list[str] = []
    seen: dict[str, Any] = {}

    async def receive() -> dict[str, str]:
        return messages.pop(0)

    async def send(message: dict[str, str]) -> None:
        sent.append(message["type"])
        if message["type"] == "lifespan.startup.complete":
            seen.update(frozen=gc.get_freeze_count(), thresholds=gc.get_threshold())

    # A loop of its own, closed here: asyncio.run would also unset the
    # current loop, which pytest-asyncio's later tests then find orphaned.
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(loops.lifespan({"type": "lifespan"}, receive, send))
    finally:
        loop.close()
        gc.unfreeze()
        gc.set_threshold(*thresholds)
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert seen["frozen"] > 1000
    assert seen["thresholds"][0] >= 10_000
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == thresholds
