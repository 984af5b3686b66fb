"""Retention sweep speed: how fast the sweep deletes, and what an idle pass costs.

Run on demand (not part of CI)::

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test .venv/bin/python bench/retention.py

On a scratch database (PostgreSQL, or SQLite without ``DATABASE_URL``), in
process through the domain functions:

- ``delete``: ``--messages`` messages (~80-byte payloads) over
  ``--partitions`` partitions of a queue with ``completedRetentionSeconds``,
  all consumed; then one ``queue_retention_sweep`` an hour later at each
  ``--batch`` size: messages deleted per second (each batch is one
  transaction that also moves the log start);
- ``idle``: the same sweep again over those partitions when nothing is due
  (what every ``RETENTION_INTERVAL_SECONDS`` costs a quiet deployment).
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--batch", type=int, nargs="+", default=[250, 1000, 5000])
    args = parser.parse_args()

    base = os.environ.get("DATABASE_URL", "")
    db_name = f"qa_bench_retention_{secrets.token_hex(3)}"
    if base.startswith("postgres"):
        import psycopg

        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {db_name}")
        os.environ["DATABASE_URL"] = f"{base.rsplit('/', 1)[0]}/{db_name}"
    else:
        os.environ["QUEENADMIN_DATA_DIR"] = tempfile.mkdtemp(prefix="qa-bench-")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "queenadmin.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    try:
        run(args)
    finally:
        connection.close()
        if base.startswith("postgres"):
            import psycopg

            with psycopg.connect(base, autocommit=True) as conn:
                conn.execute(f"DROP DATABASE {db_name} WITH (FORCE)")


def run(args: argparse.Namespace) -> None:
    from queenadmin.domain import clock, queues

    pad = "x" * 60
    print(f"vendor={'postgresql' if os.environ.get('DATABASE_URL') else 'sqlite'}")
    for batch in args.batch:
        name = f"bench-{batch}"
        options = (("retentionEnabled", True), ("completedRetentionSeconds", 60))
        queues.queue_configure(request=queues.ConfigureRequest(name, options=queues.QueueOptions(options)))
        for start in range(0, args.messages, 1000):
            items = [
                queues.PushItem(name, f"p{i % args.partitions}", f'{{"n":{i},"pad":"{pad}"}}', f"{name}-{i}")
                for i in range(start, min(args.messages, start + 1000))
            ]
            queues.queue_push(items=items)
        consumed = 0
        while consumed < args.messages:
            request = queues.PopRequest(queue=name, batch=5000, max_partitions=args.partitions, auto_ack=True)
            consumed += len(queues.queue_claim(request=request).messages)
        later = clock.now() + timedelta(hours=1)
        began = time.perf_counter()
        sweep = queues.queue_retention_sweep(now=later, batch=batch)
        took = time.perf_counter() - began
        assert sweep.deleted == args.messages, sweep
        print(
            f"delete batch={batch}: {sweep.deleted} messages over {args.partitions} partitions in {took:.2f} s"
            f" = {sweep.deleted / took:,.0f} msgs/s"
        )
        began = time.perf_counter()
        runs = 20
        for _ in range(runs):
            assert queues.queue_retention_sweep(now=later, batch=batch).deleted == 0
        print(f"idle pass ({args.partitions} partitions): {(time.perf_counter() - began) / runs * 1000:.2f} ms")


if __name__ == "__main__":
    main()
