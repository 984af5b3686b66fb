"""What one statistics sampler step costs, by the number of partitions.

Run on demand (not part of CI)::

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test .venv/bin/python bench/sampler.py

On a scratch PostgreSQL database it builds ``--queues`` queues of
``--partitions`` partitions, each with a few messages, a queue-mode cursor
and ``--groups`` named groups holding a lease, then times ``stats_step``
(sample every queue, roll up, prune): wall time, this process's CPU and the
PostgreSQL backend's CPU per step. The sampler runs one step every
``SAMPLER_INTERVAL_SECONDS`` (10 s), so a step's CPU divided by 10 s is
the share of one core it takes.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
_TICK = os.sysconf("SC_CLK_TCK")


def backend_cpu(pid: int) -> float:
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queues", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--groups", type=int, default=2)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()

    base = os.environ.setdefault("DATABASE_URL", DEFAULT_URL)
    if not base.startswith("postgres"):
        sys.exit("bench/sampler.py needs PostgreSQL (DATABASE_URL)")
    sys.path.insert(0, str(ROOT))
    from tests.conftest import _admin_psql

    db_name = f"qa_sampler_{secrets.token_hex(3)}"
    _admin_psql(f"CREATE DATABASE {db_name}")
    os.environ["DATABASE_URL"] = f"{base.rsplit('/', 1)[0]}/{db_name}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "queenadmin.settings"
    try:
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connection

        call_command("migrate", verbosity=0)
        from queenadmin.domain import queues
        from queenadmin.domain.queues import history
        from queenadmin.models import QueueSample
        from queenadmin.plumbing.db import json_text

        for q in range(args.queues):
            name = f"q{q}"
            items = [
                queues.PushItem(name, f"p{p}", json_text({"n": i}), None)
                for p in range(args.partitions)
                for i in range(3)
            ]
            queues.queue_push(items=items)
            queues.queue_claim(request=queues.PopRequest(queue=name, batch=1, max_partitions=args.partitions))
            for g in range(args.groups):
                queues.queue_claim(
                    request=queues.PopRequest(queue=name, group=f"g{g}", batch=2, max_partitions=args.partitions)
                )
        with connection.cursor() as cur:
            cur.execute("SELECT pg_backend_pid()")
            (backend,) = cur.fetchone()
        walls, own, pg = [], [], []
        for _ in range(args.steps):
            w0, c0, p0 = time.perf_counter(), time.process_time(), backend_cpu(backend)
            history.stats_step()
            walls.append(time.perf_counter() - w0)
            own.append(time.process_time() - c0)
            pg.append(backend_cpu(backend) - p0)
        rows = QueueSample.objects.count()
        cpu = statistics.median(own) + statistics.median(pg)
        print(
            f"{args.queues} queues x {args.partitions} partitions x {args.groups + 1} cursors each"
            f" ({args.queues * args.partitions} partitions), {rows} sample rows written"
        )
        print(f"step wall      median {statistics.median(walls) * 1000:8.1f} ms  max {max(walls) * 1000:8.1f} ms")
        print(
            f"step CPU       python {statistics.median(own) * 1000:8.1f} ms  postgres {statistics.median(pg) * 1000:8.1f} ms"
        )
        print(f"share of a core at a 10 s interval: {cpu / 10:.2%}  (load {os.getloadavg()[0]:.2f})")
    finally:
        from django.db import connections

        connections.close_all()
        os.environ["DATABASE_URL"] = base
        _admin_psql(f"DROP DATABASE IF EXISTS {db_name}")


if __name__ == "__main__":
    main()
