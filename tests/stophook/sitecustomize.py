"""Test hook: ``serve`` gets SIGTERM just before uvicorn takes the signals.

``tests/api/test_operations.py`` puts this folder on a server's
``PYTHONPATH``. In the ``manage.py serve`` process (not its spawned
workers) SIGTERM is sent once, deterministically inside the window between
serve's own signal handlers and uvicorn's, where a stop signal was once
dropped and the server served on: with one worker as ``uvicorn.Server.run``
is called (it installs uvicorn's handlers), with several as the supervisor's
socket starts listening (just before uvicorn's ``Multiprocess`` installs
its handlers).
"""

from __future__ import annotations

import os
import signal
import socket
import sys
from typing import Any

if sys.argv[1:2] == ["serve"]:
    import uvicorn

    _run = uvicorn.Server.run
    _listen = socket.socket.listen

    def _stop_once() -> None:
        uvicorn.Server.run = _run  # type: ignore[method-assign]
        socket.socket.listen = _listen  # type: ignore[method-assign]
        os.kill(os.getpid(), signal.SIGTERM)

    def _run_after_a_stop(self: Any, *args: Any, **kwargs: Any) -> Any:
        _stop_once()
        return _run(self, *args, **kwargs)

    def _listen_then_stop(self: socket.socket, *args: int) -> None:
        _listen(self, *args)
        _stop_once()

    uvicorn.Server.run = _run_after_a_stop  # type: ignore[method-assign]
    socket.socket.listen = _listen_then_stop  # type: ignore[method-assign]
