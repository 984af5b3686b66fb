"""Dashboard pages at scale: render time and query count per page.

Run on demand (not part of CI), PostgreSQL only::

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test .venv/bin/python bench/dashboard.py

It makes a scratch database beside the one ``DATABASE_URL`` names
(``<name>_dashboard_bench``, dropped first; ``--keep`` reuses it as seeded),
migrates it, and seeds, in bulk SQL with ``generate_series``:

- 1,000,000 messages: 10 queues x 10 partitions x 10,000 (``--queues`` and
  ``--partitions`` spread the same million otherwise, in a database of
  their own: ``--queues 1000 --partitions 2`` is issue 39's overview
  check), pushed over the
  last two hours (one queue has ``delayedProcessing`` 600 s, so its newest
  ten minutes are parked); queue-mode cursors 60% through, a lease of 100
  messages for an hour on every third partition, two named consumer groups
  on half the queues; 10,000 dead letters;
- 100,000 KV keys in 10 namespaces and 10,000 lock permits (5,000 locks of
  2 permits, live for an hour) in ``queen-locks``;
- 100,000 pending timers due over the next 24 hours (~4,200 in the next
  hour, which the overview's chart reads);
- 10,000 audit entries;
- a day of statistics samples (10 s rows) per queue (two hours past 100
  queues), which the charts read.

This is a seeding tool, so it writes the tables directly (the domain is
the only writer everywhere else): going through the domain would take
hours for a million messages, and the pages only read. The rows are shaped
as the domain makes them (gapless offsets, ``next_offset``, cursors).

``--keep`` writes the samples again so that they end now (the attention
list and the rates read the last minutes). Then for each page of
``PAGES`` (or each ``--page``) it renders ``--renders`` times with Django's
test ``Client`` as a logged-in superuser (after one warm-up render) and
prints the median and worst server-side time, the median CPU time of this
process (Django's own work) and the mean CPU time of its PostgreSQL backend
per render (from ``/proc``, with bench/kv.py's reader; 10 ms ticks, so
averaged over the renders), and the query count. CPU times are what a
render costs on an idle machine; the wall time includes waiting for a CPU
on a busy one. A page
whose URL does not resolve in this checkout is reported and skipped.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import kv  # bench/kv.py, for its server CPU meter: bench/ is sys.path[0] when a script here runs

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"


#: The pages measured: one line per page (``{q0}`` is the first queue,
#: ``{mid}``/``{txn}`` a message id and transactionId near its tail).
PAGES = [
    "/",
    "/queues/",
    "/queues/{q0}/",
    "/queues/{q0}/?partition=p3&before=5000",
    "/queues/{q0}/?find={mid}",
    "/queues/{q0}/?dlq_group=__QUEUE_MODE__&dlq_before=999999999",
    "/queues/{qd}/",
    "/queues/{q0}/leases/",
    "/queues/{q0}/messages/{mid}/",
    # Issue 26 items 5 and 6: a consumer group's recovery and the queue
    # purge's confirmations, and the DLQ page across queues (the first
    # page, one queue, one group on an older page).
    "/queues/{q0}/groups/recover/?group=__QUEUE_MODE__",
    "/queues/{q0}/purge/",
    "/dlq/",
    "/dlq/?queue={q0}",
    "/consumers/",
    "/dlq/?group=__QUEUE_MODE__&before=5000",
    "/search/?q=lock-4242",
    "/search/?q={mid}",
    "/search/?q={txn}",
    "/search/?q=key-0099",
    "/search/?q=timer-12345",
    "/locks/",
    "/timers/",
    # Issue 26 item 4: a queue, a due range with a jump into it, a key
    # prefix, and the bulk cancel's confirmation (it counts the filter).
    "/timers/?queue={q0}",
    "/timers/?due_from=now&due_to=%2B6h&jump=%2B3h",
    "/timers/?queue={q0}&prefix=timer-1&due_from=now&due_to=%2B1d",
    "/timers/bulk/cancel/?queue={q0}&due_to=%2B12h",
    "/kv/",
    "/kv/ns-3/",
    "/audit/",
    # The Django admin's changelists (issue 12: each within 150 ms).
    "/admin/queenadmin/kventry/",
    "/admin/queenadmin/kventry/?namespace=ns-3",
    "/admin/queenadmin/kventry/?namespace=queen-locks",
    "/admin/queenadmin/kventry/?q=key-0099",
    "/admin/queenadmin/kventry/?expiry=hour",
    "/admin/queenadmin/kventry/?written=1000",
    "/admin/queenadmin/timer/",
    "/admin/queenadmin/timer/?queue={q0}",
    "/admin/queenadmin/timer/?q=timer-12345",
    "/admin/queenadmin/queue/",
    "/admin/queenadmin/partition/",
    "/admin/queenadmin/partition/?queue={q0}",
    "/admin/queenadmin/consumergroup/",
    "/admin/queenadmin/message/",
    "/admin/queenadmin/message/?queue={q0}",
    "/admin/queenadmin/message/?q={mid}",
    "/admin/queenadmin/message/?p=100",
    "/admin/queenadmin/deadletter/",
    "/admin/queenadmin/deadletter/?queue={q0}",
    "/admin/queenadmin/apitoken/",
    "/admin/queenadmin/auditentry/",
    "/admin/queenadmin/auditentry/?kind__exact=timer&via__exact=dashboard",
]

MESSAGES = 1_000_000
QUEUES = 10
PARTITIONS = 10
PER_PARTITION = MESSAGES // (QUEUES * PARTITIONS)
DEAD_LETTERS = 10_000
KV_KEYS = 100_000
NAMESPACES = 10
LOCKS = 5_000
PERMITS = 2
TIMERS = 100_000
AUDIT = 10_000
#: A day of the sampler's 10 s ticks per queue (``shape`` cuts it for
#: many queues).
SAMPLE_TICKS = 8_640


def shape(queues: int, partitions: int) -> None:
    """Seed ``queues`` x ``partitions``, the same 1,000,000 messages in all.

    Past 100 queues the samples cover two hours, not a day (a day at 1,000
    queues is 8.6 million rows); the overview reads the last hour.
    """
    global QUEUES, PARTITIONS, PER_PARTITION, SAMPLE_TICKS
    QUEUES, PARTITIONS = queues, partitions
    PER_PARTITION = MESSAGES // (queues * partitions)
    if PER_PARTITION < 100 or DEAD_LETTERS // (queues * partitions) < 1:
        sys.exit(f"{queues} x {partitions} partitions leaves too few messages a partition")
    if queues > 100:
        SAMPLE_TICKS = 720


def scratch_url(url: str) -> str:
    parts = urlsplit(url)
    name = parts.path.lstrip("/") or "postgres"
    # Another shape seeds a database of its own, so ``--keep`` finds it.
    suffix = "" if (QUEUES, PARTITIONS) == (10, 10) else f"_q{QUEUES}p{PARTITIONS}"
    return urlunsplit(parts._replace(path=f"/{name}_dashboard_bench{suffix}"))


def recreate(url: str, target: str) -> None:
    import psycopg

    name = urlsplit(target).path.lstrip("/")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def seed_sql() -> list[str]:
    """The seed statements for the current ``shape``."""
    return [
        # Queues: options as an auto-created queue has them; queue 9 delays 10 min.
        f"""
    INSERT INTO queenadmin_queue (name, namespace, task, options, created_at, paused, paused_groups)
    SELECT 'bench-q' || q, NULL, NULL,
           jsonb_build_object('leaseTime', 60, 'retryLimit', 3, 'delayedProcessing',
                              CASE WHEN q = {QUEUES - 1} THEN 600 ELSE 0 END,
                              'dedupWindowSeconds', 3600, 'deadLetterQueue', true),
           now() - interval '3 hours', false, '[]'::jsonb
    FROM generate_series(0, {QUEUES - 1}) q
    """,
        f"""
    INSERT INTO queenadmin_partition (queue_id, name, next_offset, log_start, retained_bytes, created_at, last_push_at)
    SELECT q.id, 'p' || p, {PER_PARTITION}, 0, {PER_PARTITION * 40}, now() - interval '3 hours', now()
    FROM queenadmin_queue q, generate_series(0, {PARTITIONS - 1}) p
    """,
        # Messages: pushed evenly over the last two hours, newest now.
        f"""
    INSERT INTO queenadmin_message (partition_id, msg_offset, transaction_id, message_id, payload, trace_id, created_at)
    SELECT p.id, o, 'txn-' || p.id || '-' || o, gen_random_uuid()::text,
           '{{"order":' || o || ',"pad":"xxxxxxxxxxxxxxxxxxxxxxxx"}}', NULL,
           now() - make_interval(secs => ({PER_PARTITION} - 1 - o) * 7200.0 / {PER_PARTITION})
    FROM queenadmin_partition p, generate_series(0, {PER_PARTITION - 1}) o
    """,
        # Queue mode 60% through; a live lease of 100 on every third partition.
        f"""
    INSERT INTO queenadmin_consumercursor (partition_id, group_name, committed_offset, start_offset, lease_id,
        leased_until, batch_last, delivery_runs, retry_count, dead_lettered, last_claim_at, delivered, acked, failed)
    SELECT p.id, '__QUEUE_MODE__', {PER_PARTITION * 6 // 10 - 1}, -1,
           CASE WHEN p.id % 3 = 0 THEN gen_random_uuid()::text END,
           CASE WHEN p.id % 3 = 0 THEN now() + interval '1 hour' END,
           {PER_PARTITION * 6 // 10 - 1} + CASE WHEN p.id % 3 = 0 THEN 100 ELSE 0 END,
           '[]'::jsonb, 0, 0, now() - interval '10 seconds',
           {PER_PARTITION * 6 // 10}, {PER_PARTITION * 6 // 10}, 0
    FROM queenadmin_partition p
    """,
        """
    INSERT INTO queenadmin_consumergroup (queue_id, name, subscription_mode, created_at, conflation)
    SELECT q.id, g, 'all', now() - interval '3 hours', false
    FROM queenadmin_queue q, unnest(ARRAY['billing', 'audit-log']) g
    WHERE q.id % 2 = 0
    """,
        f"""
    INSERT INTO queenadmin_consumercursor (partition_id, group_name, committed_offset, start_offset, lease_id,
        leased_until, batch_last, delivery_runs, retry_count, dead_lettered, last_claim_at, delivered, acked, failed)
    SELECT p.id, g.name, CASE WHEN g.name = 'billing' THEN {PER_PARTITION} - 51 ELSE {PER_PARTITION} / 4 - 1 END, -1,
           NULL, NULL, -1, '[]'::jsonb, 0, 0, now() - interval '1 minute',
           0, 0, 0
    FROM queenadmin_partition p JOIN queenadmin_consumergroup g ON g.queue_id = p.queue_id
    """,
        f"""
    INSERT INTO queenadmin_deadletter (queue_id, partition_id, group_name, msg_offset, transaction_id, message_id,
        payload, error, retry_count, created_at, failed_at)
    SELECT p.queue_id, m.partition_id, '__QUEUE_MODE__', m.msg_offset, m.transaction_id, m.message_id,
           m.payload, 'handler raised ValueError', 3, m.created_at, m.created_at + interval '1 minute'
    FROM queenadmin_message m JOIN queenadmin_partition p ON p.id = m.partition_id
    WHERE m.msg_offset < {DEAD_LETTERS // (QUEUES * PARTITIONS)}
    """,
        # KV keys and lock permits, versions from the store's own sequence.
        f"""
    INSERT INTO queenadmin_kventry (namespace, key, value_json, version, expires_at, created_at, updated_at)
    SELECT 'ns-' || (i % {NAMESPACES}), 'key-' || lpad(i::text, 6, '0'), '{{"n":' || i || '}}',
           nextval('queenadmin_kv_version'), CASE WHEN i % 5 = 0 THEN now() + interval '1 day' END, now(), now()
    FROM generate_series(1, {KV_KEYS}) i
    """,
        f"""
    INSERT INTO queenadmin_kventry (namespace, key, value_json, version, expires_at, created_at, updated_at)
    SELECT 'queen-locks', 'lock-' || l || '#' || s, '{{"owner":"worker-' || l || '-' || s || '"}}',
           nextval('queenadmin_kv_version'), now() + interval '1 hour', now(), now()
    FROM generate_series(0, {LOCKS - 1}) l, generate_series(0, {PERMITS - 1}) s
    """,
        f"""
    INSERT INTO queenadmin_timer (queue, timer_key, partition, deliver_at, fire_at, txn, message_id, payload,
        payload_json, encrypted, producer_sub, attempts, last_error, created_at, updated_at)
    SELECT 'bench-q' || (i % {QUEUES}), 'timer-' || i, 'Default', t, t, 'timer-txn-' || i, gen_random_uuid()::text,
           convert_to('{{"t":' || i || '}}', 'UTF8'), '{{"t":' || i || '}}', false, NULL, 0, NULL, now(), now()
    FROM generate_series(1, {TIMERS}) i, LATERAL (SELECT now() + make_interval(secs => i * 86400.0 / {TIMERS})) d(t)
    """,
        f"""
    INSERT INTO queenadmin_auditentry (at, actor, action, target, before, after, reason, kind, via)
    SELECT now() - make_interval(secs => i), 'operator', 'timer.cancel', 'bench-q1/timer-' || i, 'pending', 'cancelled',
           'bench', 'timer', 'dashboard'
    FROM generate_series(1, {AUDIT}) i
    """,
    ]


def samples_sql() -> list[str]:
    """The sampler's rows up to the current tick (``--keep`` writes them again)."""
    return [
        # The sampler's last day of 10 s rows (what the charts read): every
        # queue steady at ~40 pushed and ~38 acked a tick.
        f"""
    INSERT INTO queenadmin_queuesample (queue_id, queue, resolution, at, pushed_total, popped_total, acked_total,
        failed_total, dlq_total, pushed, popped, acked, failed, dlq, depth, oldest_claimable_age)
    SELECT q.id, q.name, 10, to_timestamp(floor(extract(epoch FROM now()) / 10) * 10 - t * 10),
           ({SAMPLE_TICKS} - t) * 40, ({SAMPLE_TICKS} - t) * 38, ({SAMPLE_TICKS} - t) * 38, 0, 0,
           40 + t % 7, 38 + t % 5, 38 + t % 5, 0, 0, 4000 + (t * 37) % 900, 5.0
    FROM queenadmin_queue q, generate_series(0, {SAMPLE_TICKS - 1}) t
    """,
        # Their sums per tick, as the sampler writes them beside the rows.
        """
    INSERT INTO queenadmin_queuesampletotal (resolution, at, pushed, popped, acked, failed, dlq, depth,
        oldest_claimable_age)
    SELECT resolution, at, SUM(pushed), SUM(popped), SUM(acked), SUM(failed), SUM(dlq), SUM(depth),
           MAX(oldest_claimable_age)
    FROM queenadmin_queuesample GROUP BY resolution, at
    """,
    ]


def seed(statements: list[str]) -> None:
    from django.db import connection

    with connection.cursor() as cur:
        for sql in statements:
            started = time.perf_counter()
            cur.execute(sql)
            print(f"  {cur.rowcount:>9,} rows  {time.perf_counter() - started:6.1f} s  {sql.split()[2]}", flush=True)
        # A steady-state database has been vacuumed: index-only scans need
        # the visibility map.
        cur.execute("VACUUM ANALYZE")


def keep_key_counts() -> None:
    """Count the KV store's keys as the statistics sampler does each tick
    (the overview shows that count)."""
    from django.db import transaction

    from queenadmin.domain import clock, kv

    counts = kv.kv_namespaces()
    with transaction.atomic():
        kv.kv_namespaces_keep_in_txn(counts=counts, now=clock.now())


def measure(renders: int, only: list[str]) -> None:
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.urls import Resolver404, resolve

    from queenadmin.models import Message, Queue

    proc_ticks = kv._proc_ticks
    with connection.cursor() as cur:
        cur.execute("SELECT pg_backend_pid()")
        backend = str(cur.fetchone()[0])
    user, _ = User.objects.get_or_create(username="bench", defaults={"is_staff": True, "is_superuser": True})
    client = Client()
    client.force_login(user)
    q0 = "bench-q0"
    qd = Queue.objects.filter(options__delayedProcessing__gt=0).values_list("name", flat=True).first() or q0
    mid, txn = (
        Message.objects.filter(
            partition__queue__name=q0, partition__name=f"p{min(5, PARTITIONS - 1)}", offset=PER_PARTITION * 9 // 10 - 1
        )
        .values_list("message_id", "transaction_id")
        .get()
    )
    print(f"\n{'page':<58} {'median ms':>9} {'worst ms':>9} {'cpu ms':>7} {'db cpu':>7} {'queries':>7} {'KiB':>6}")
    for template in only or PAGES:
        url = template.format(q0=q0, qd=qd, mid=mid, txn=txn)
        try:
            resolve(url.split("?")[0])
        except Resolver404:
            print(f"{url:<58} {'not in this checkout':>34}")
            continue
        client.get(url)  # warm-up: session, permissions, template loading
        times = []
        cpu = []
        db_cpu = proc_ticks(backend)[1]
        queries = 0
        size = 0
        for _ in range(renders):
            with CaptureQueriesContext(connection) as captured:
                started, started_cpu = time.perf_counter(), time.process_time()
                response = client.get(url)
                times.append((time.perf_counter() - started) * 1000)
                cpu.append((time.process_time() - started_cpu) * 1000)
            assert response.status_code == 200, (url, response.status_code)
            queries = len(captured.captured_queries)
            size = len(response.content)
        db_cpu = (proc_ticks(backend)[1] - db_cpu) * 1000 / renders
        print(
            f"{url[:58]:<58} {statistics.median(times):9.1f} {max(times):9.1f} {statistics.median(cpu):7.1f}"
            f" {db_cpu:7.1f} {queries:7d} {size / 1024:6.1f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--renders", type=int, default=7)
    parser.add_argument("--keep", action="store_true", help="reuse the seeded scratch database")
    parser.add_argument("--queues", type=int, default=QUEUES, help="queues seeded (1,000,000 messages in all)")
    parser.add_argument("--partitions", type=int, default=PARTITIONS, help="partitions a queue")
    parser.add_argument("--page", action="append", default=[], help="measure only this page (repeatable)")
    parser.add_argument("--profile", metavar="FILE", help="cProfile the renders of the pages into FILE")
    args = parser.parse_args()
    shape(args.queues, args.partitions)
    url = os.environ.get("DATABASE_URL", DEFAULT_URL)
    if not url.startswith("postgres"):
        sys.exit("bench/dashboard.py seeds with PostgreSQL's generate_series: set DATABASE_URL to PostgreSQL")
    target = scratch_url(url)
    if not args.keep:
        recreate(url, target)
    os.environ["DATABASE_URL"] = target
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "queenadmin.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    if not args.keep:
        print(f"migrating and seeding {urlsplit(target).path.lstrip('/')}", flush=True)
        started = time.perf_counter()
        seed(seed_sql() + samples_sql())
        print(f"seeded in {time.perf_counter() - started:.0f} s", flush=True)
    else:
        # The attention list and the rates read the last minutes of samples:
        # write them again to end now.
        print("writing the samples again", flush=True)
        seed(["DELETE FROM queenadmin_queuesample", "DELETE FROM queenadmin_queuesampletotal", *samples_sql()])
    keep_key_counts()
    load = os.getloadavg()
    print(
        f"{QUEUES:,} queues x {PARTITIONS} partitions x {PER_PARTITION:,} messages;"
        f" load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {args.renders} renders per page"
    )
    if args.profile:
        import cProfile

        with cProfile.Profile() as profile:
            measure(args.renders, args.page)
        profile.dump_stats(args.profile)
    else:
        measure(args.renders, args.page)


if __name__ == "__main__":
    main()
