"""Many replicas through one PgBouncer in transaction pooling (issue 25).

The soak test: replicas x ``serve --workers 2`` behind one PgBouncer
(``default_pool_size`` 20) on a PostgreSQL of its own with
``max_connections = 100``, under a mixed load of KV, lock, semaphore, push,
pop, timer and transaction calls (``tests/pooler/load.py``). At CI size 2
replicas for 5 s; ``make soak`` (``QA_SCALE=full``) 6 replicas for 60 s.
It prints its throughput and PostgreSQL's peak connection count (``-s``);
``bench/replicas.py`` runs the same load on one replica beside it.
"""

from __future__ import annotations

import json

import pytest

from tests.pooler.cluster import (
    migrated_database,
    pooled_env,
    private_bouncer,
    private_postgres,
    private_redis,
    replicas,
)
from tests.pooler.load import FULL_SHAPE, ConnectionSampler, Load, Shape
from tests.scale import scaled, sized

pytestmark = [scaled, pytest.mark.live]

REPLICAS = sized(ci=2, full=6)
WORKERS = 2
SECONDS = sized(ci=5.0, full=60.0)
SHAPE = sized(ci=Shape(), full=FULL_SHAPE)
MAX_CONNECTIONS = 100
#: PgBouncer's default_pool_size (.ci/pgbouncer).
POOL_SIZE = 20


@pytest.fixture
def cluster():
    """A private PostgreSQL (max_connections 100), PgBouncer in front of it,
    a private Redis, and a migrated database with an admin token."""
    with (
        private_postgres(max_connections=MAX_CONNECTIONS) as pg,
        private_bouncer(pg) as bouncer,
        private_redis() as redis,
    ):
        yield pg, bouncer, redis, migrated_database(pg)


async def test_replicas_through_one_pgbouncer_keep_every_promise_under_mixed_load(cluster):
    """No 5xx and no 503; every acknowledged KV write, push, transaction
    and timer is there (each timer delivered once, as the message it
    promised); no two leases of a lock slot at once, fencing tokens rising,
    the semaphore never above its limit; PostgreSQL sees the pooler's
    connections and the LISTENs, not one per worker thread."""
    pg, bouncer, redis, token = cluster
    env = {**pooled_env(pg, bouncer), "REDIS_URL": redis.url}
    with replicas(REPLICAS, env, workers=WORKERS) as servers:
        load = Load([s.url for s in servers], token, SHAPE)
        with ConnectionSampler(pg.url(), bouncer.url("pgbouncer")) as sampler:
            out = await load.run(SECONDS)
        logs = {s.url: s.log() for s in servers}

    summary = out.summary() | {
        "replicas": f"{REPLICAS}x{WORKERS}",
        "pg_peak_client_connections": sampler.peak_clients,
        "pg_peak_all_backends": sampler.peak_all,
        "pgbouncer_peak_waiting_clients": sampler.peak_waiting,
    }
    print("soak:", json.dumps(summary))

    server_errors = {kind: dict(s) for kind, s in out.by_kind().items() if any(code >= 500 for code in s)}
    assert not server_errors, (server_errors, logs)
    assert out.statuses()[503] == 0
    unanswered = {kind: s[0] for kind, s in out.by_kind().items() if s[0]}
    assert not unanswered, unanswered
    assert set(out.statuses()) <= {200, 201, 204}, out.by_kind()

    # Every acknowledged write is there.
    assert out.kv_acked
    assert not out.kv_missing, out.kv_missing[:20]
    assert not out.kv_wrong, out.kv_wrong[:20]
    assert out.incr_unknown == 0
    assert out.counter_value == out.incr_acked > 0
    assert out.txn_acked
    assert not out.txn_kv_missing, out.txn_kv_missing[:20]
    undelivered = out.undelivered()
    assert out.pushed
    assert not undelivered["soak-push"], undelivered["soak-push"][:20]
    assert not undelivered["soak-txn"], undelivered["soak-txn"][:20]
    assert out.ack_refused == 0
    assert not out.redelivered(), out.redelivered()[:20]

    # Timers: each fired once, as the message it promised.
    assert out.timers
    assert not out.timers_not_once(), out.timers_not_once()[:20]

    # Locks: one holder at a time, tokens rising, every guarded write in.
    lock_leases = [lease for lease in out.leases if lease.name != load.semaphore]
    assert lock_leases
    assert not out.overlapping_leases(), out.overlapping_leases()[:5]
    assert not out.tokens_not_rising(), out.tokens_not_rising()[:5]
    assert all(lease.released for lease in out.leases), [lease for lease in out.leases if not lease.released][:5]
    assert all(lease.committed for lease in lock_leases), [lease for lease in lock_leases if not lease.committed][:5]
    for name in load.locks:
        assert out.lock_counters[name] == out.guarded_committed[name] > 0

    # The semaphore: held by several at once, never by more than its limit.
    assert 2 <= out.most_held_at_once(load.semaphore) <= SHAPE.semaphore_limit

    # PostgreSQL: the pooler's server connections plus the direct LISTENs
    # (the pops' and the timer loop's, per worker), not a connection per
    # worker thread (up to 16 a worker without the pooler); the sampler's
    # own is one more, and 2 more for backends still listed a moment after
    # their client left (measured at full size: 45 = 20 + 24 + 1).
    listens = 2 * REPLICAS * WORKERS
    assert sampler.samples > 0
    assert sampler.peak_clients <= POOL_SIZE + listens + 1 + 2, summary
