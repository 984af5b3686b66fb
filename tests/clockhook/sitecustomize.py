"""Test hook for a live server whose wall clock a test moves forward.

``run_server(clock=True)`` puts this folder on the server's ``PYTHONPATH``,
so Python imports it at start. The server's wall clock (``time.time()``,
``datetime.now()``, so ``clock.now()``) then ticks from the real time plus a
shift: on ``SIGUSR1`` it moves forward by the seconds written in
``$QA_SERVER_CLOCK``, and the total shift is written beside it (``.done``)
once it has moved. Monotonic clocks do not move, as when a worker is paused.
"""

from __future__ import annotations

import datetime
import os
import signal

import time_machine

_file = os.environ["QA_SERVER_CLOCK"]
_now = time_machine.travel(datetime.datetime.now(datetime.UTC), tick=True).start()
_total = 0.0


def _shift(signum, frame):
    global _total
    with open(_file) as f:
        seconds = float(f.read())
    _now.shift(datetime.timedelta(seconds=seconds))
    _total += seconds
    with open(_file + ".done", "w") as f:
        f.write(repr(_total))


signal.signal(signal.SIGUSR1, _shift)
