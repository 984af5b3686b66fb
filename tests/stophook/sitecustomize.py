"""Test hook: ``serve`` gets SIGTERM just before uvicorn takes the signals.

``tests/api/test_operations.py`` puts this folder on a server's
``PYTHONPATH``. In the ``manage.py serve`` process (not its spawned
workers) SIGTERM is sent once, deterministically inside the window between
serve's own signal handlers and uvicorn's, where a stop signal was once
dropped and the server served on: with one worker as ``uvicorn.Server.run``
is called (it installs uvicorn's handlers), with several as uvicorn's
``Multiprocess`` supervisor is made (it installs its handlers).
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

if sys.argv[1:2] == ["serve"]:
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    _run = uvicorn.Server.run
    _supervise = Multiprocess.__init__

    def _stop_once() -> None:
        uvicorn.Server.run = _run  # type: ignore[method-assign]
        Multiprocess.__init__ = _supervise  # type: ignore[method-assign]
        os.kill(os.getpid(), signal.SIGTERM)

    def _run_after_a_stop(self: Any, *args: Any, **kwargs: Any) -> Any:
        _stop_once()
        return _run(self, *args, **kwargs)

    def _supervise_after_a_stop(self: Any, *args: Any, **kwargs: Any) -> None:
        _stop_once()
        _supervise(self, *args, **kwargs)

    uvicorn.Server.run = _run_after_a_stop  # type: ignore[method-assign]
    Multiprocess.__init__ = _supervise_after_a_stop  # type: ignore[method-assign]
