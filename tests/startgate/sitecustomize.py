"""Test hook: hold a live server's startup, app loaded, until a test says go.

``tests/api/test_serve.py`` puts this folder on a server's ``PYTHONPATH``
with ``QA_START_GATE`` naming a folder. Every server process (the one
``serve`` process, or each spawned worker of several) stops at the start of
``uvicorn.Server.startup``, once the app is imported and before its lifespan
runs, writes ``held-<pid>`` there holding the port it serves, and goes on
once ``open`` exists there.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import uvicorn

_gate = Path(os.environ["QA_START_GATE"])
_startup = uvicorn.Server.startup


async def _held_startup(self: Any, sockets: Any = None) -> None:
    # Written under another name, then renamed: a test polling for
    # ``held-*`` never reads the file before its port is in it.
    writing = _gate / f"writing-{os.getpid()}"
    writing.write_text(str(self.config.port))
    writing.rename(_gate / f"held-{os.getpid()}")
    while not (_gate / "open").exists() and not self.should_exit:
        await asyncio.sleep(0.02)
    await _startup(self, sockets=sockets)


uvicorn.Server.startup = _held_startup  # type: ignore[method-assign]
