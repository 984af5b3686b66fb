"""This process's reading of itself, for Queen's ``system-metrics``.

Every ``serve`` worker reads itself once per tick of
``SAMPLER_INTERVAL_SECONDS`` (``server.loops``): CPU seconds
(``os.times``), memory and threads (``/proc/self/stat`` where there is
one), and the requests it answered (``tally``). The domain stores the
readings and buckets them per replica (``domain.procmetrics``).
"""

from __future__ import annotations

import os
import socket
import threading
from datetime import datetime

from queenadmin.domain.procmetrics import SampleRow
from queenadmin.metrics import tally

#: The environment variable ``serve`` sets to the port it listens on.
PORT_ENV = "QUEENADMIN_SERVE_PORT"


def _proc_stat() -> tuple[int, int, int] | None:
    """(threads, virtual bytes, resident bytes) from ``/proc/self/stat``."""
    try:
        with open("/proc/self/stat", "rb") as f:
            text = f.read().decode("ascii", "replace")
    except OSError:
        return None
    # The command name (field 2) may hold spaces: count after its ")".
    fields = text[text.rindex(")") + 2 :].split()
    # fields[0] is field 3 (state): field n is fields[n - 3].
    threads, vsize, rss_pages = int(fields[17]), int(fields[20]), int(fields[21])
    return threads, vsize, rss_pages * os.sysconf("SC_PAGE_SIZE")


def read_self(*, now: datetime) -> SampleRow:
    """This process's reading of itself at ``now``."""
    times = os.times()
    stat = _proc_stat()
    served = tally.served()
    try:
        port = int(os.environ.get(PORT_ENV, "0"))
    except ValueError:
        port = 0
    return SampleRow(
        host=socket.gethostname()[:255],
        port=port,
        pid=os.getpid(),
        at=now,
        cpu_user_seconds=times.user,
        cpu_system_seconds=times.system,
        rss_bytes=stat[2] if stat else None,
        virtual_bytes=stat[1] if stat else None,
        threads=stat[0] if stat else threading.active_count(),
        push_requests=served.get("push", 0),
        pop_requests=served.get("pop", 0),
        ack_requests=served.get("ack", 0),
        requests=sum(served.values()),
    )
