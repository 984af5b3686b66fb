"""App settings, ``QUEENADMIN_<NAME>``, read once per process.

Each name is read from ``django.conf.settings`` at its first access (not at
import: no coupling to the settings module's import order) and kept; a
``setting_changed`` signal (``override_settings``, pytest-django's
``settings`` fixture) forgets them all. Reading Django's settings at every
access cost ~50 lookups per API call, most of them an ``AttributeError``
raised and caught for a name the deployment does not set (issue 15).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings as django_settings
from django.core.signals import setting_changed


class _Settings:
    #: Serve /api/v1 without a bearer token (local development only;
    #: ``api/openmode.py`` says what is refused in that mode).
    OPEN_API: bool = False
    #: ``serve`` refuses ``OPEN_API`` on a host that is not a loopback
    #: address unless this is on too.
    OPEN_API_ANY_HOST: bool = False
    #: Origins browsers reach the site at besides the address a request came
    #: to (a proxy's public one), comma-separated. Read once by
    #: ``settings.py`` into Django's ``CSRF_TRUSTED_ORIGINS``, which the live
    #: socket and open-API mode read (``server/origins.py``).
    ORIGINS: str = ""
    #: The websocket routes ``serve`` answers (``server/app.py``): the
    #: dotted path of a list of Channels URL patterns. ``settings.py`` names
    #: the dashboard's, as ``ROOT_URLCONF`` names the pages; empty, every
    #: websocket is closed at the handshake.
    WEBSOCKET_ROUTES: str = ""
    #: Seconds a validated API token is trusted without asking the database
    #: again; a revocation reaches every replica within this time.
    TOKEN_CACHE_SECONDS: float = 1.0
    #: PostgreSQL: a persistent connection that ran a statement less than
    #: this many seconds ago skips Django's ``SELECT 1`` health check
    #: (queenadmin/pgbackend/base.py); 0 checks before every request.
    DB_HEALTH_CHECK_IDLE_SECONDS: float = 1.0
    #: Seconds between reaper passes over expired KV rows.
    REAPER_INTERVAL_SECONDS: float = 5.0
    #: Rows the reaper deletes per statement.
    REAPER_BATCH_SIZE: int = 500
    #: KV protocol limits (protocol.md section 2.12).
    KV_MAX_OPS_PER_CALL: int = 256
    KV_MAX_KEYS_PER_CALL: int = 1024
    KV_MAX_KEY_BYTES: int = 512
    KV_MAX_VALUE_BYTES: int = 64 * 1024
    #: KV call rate per API token and server process (protocol 2.12), in
    #: calls per second; 0 turns the limit off (the default: a self-hosted
    #: broker has one tenant, and Queen's cloud default of 100 writes/s
    #: would cap it far below what it serves). A call with any write or
    #: check counts as a write. Bursts default to twice the rate.
    KV_WRITE_RATE: float = 0.0
    KV_WRITE_BURST: float = 0.0
    KV_READ_RATE: float = 0.0
    KV_READ_BURST: float = 0.0
    #: Request body limit, answered 413 in plain text (protocol 1.1). Only
    #: the API's write routes take that much; every other route (login,
    #: dashboard, static files) takes ``SMALL_BODY_BYTES``.
    MAX_BODY_BYTES: int = 64 * 1024 * 1024
    SMALL_BODY_BYTES: int = 1024 * 1024
    #: The most memory the objects parsed from one JSON body may take, by
    #: ``api.http.parse_cost``'s upper estimate: a 64 MiB body of ``[{},...]``
    #: parses into ~1.5 GiB of Python objects; such a body is answered 413
    #: before it is parsed. A long string costs about its size parsed, small
    #: objects 10-25 times theirs (about 10 MiB of small messages per call).
    MAX_PARSE_BYTES: int = 128 * 1024 * 1024
    #: Request bodies are read on the event loop before any thread runs:
    #: after ``BODY_GRACE_SECONDS`` one must arrive at an average of at least
    #: ``BODY_MIN_RATE`` bytes a second, or it is answered 408.
    BODY_GRACE_SECONDS: float = 10.0
    BODY_MIN_RATE: float = 64 * 1024
    #: A request's headers must be complete within this many seconds of the
    #: connection opening (or of the previous answer), else it is closed.
    HEADER_TIMEOUT_SECONDS: float = 10.0
    #: Message log: a waiting pop re-tries its claim at least this often, in
    #: case a wake-up was lost (a push wakes it at once).
    POP_RECHECK_SECONDS: float = 2.0
    #: Ephemeral queues: an implicit queue (made by a push or pop of an
    #: unknown name) is removed after this long empty and unpolled.
    EPHEMERAL_IMPLICIT_IDLE_SECONDS: float = 300.0
    #: How often each serving process removes such idle queues (also done
    #: whenever the queues are listed); 0: only when listed.
    EPHEMERAL_IDLE_CHECK_SECONDS: float = 30.0
    #: Ephemeral queues: the ceiling on the bytes of every ephemeral
    #: message together (the "cell"); a push past it answers 503.
    EPHEMERAL_CELL_BYTES: int = 256 * 1024 * 1024
    #: Threads per process that run the database work of async pops.
    POP_DB_THREADS: int = 8
    #: A pop with ``frames=true`` gets the framed answer (``QPF1``) rather
    #: than JSON, which the client reads as well. Off: bench/frames.py,
    #: 10,000 messages x 5 rounds of pop+ack with the official client,
    #: measured it no cheaper (2026-12-03, 2 shared cores): PostgreSQL 96%
    #: of JSON's msgs/s, server CPU 163 against 164 us/msg, client CPU 49
    #: against 41 (its decoder is Python); SQLite 112% (noisy), server
    #: 101 against 109, client 52 against 43. Rendering is cheaper (2.0
    #: against 4.3 us/msg) and the answer smaller (162 against 415 bytes a
    #: message), so turn it on where the network, not the CPU, is short.
    FRAMED_POP: bool = False
    #: Where a new consumer group starts when its first pop names no
    #: subscriptionMode: ``all`` (every retained message, Queen's server
    #: default) or ``new`` (only messages pushed after it).
    DEFAULT_SUBSCRIPTION_MODE: str = "all"
    #: What pop autopilot chooses when the client leaves batch/partitions unset.
    AUTOPILOT_BATCH: int = 100
    AUTOPILOT_PARTITIONS: int = 4

    #: Message retention (queue options retentionEnabled, retentionSeconds,
    #: completedRetentionSeconds): seconds between sweeps of the retention
    #: loop in ``serve`` (0 turns the loop off), and the most messages one
    #: sweep step deletes in one transaction.
    RETENTION_INTERVAL_SECONDS: float = 5.0
    RETENTION_BATCH_SIZE: int = 1000
    #: Queen's server applies ``retentionSeconds``/``completedRetentionSeconds``
    #: only with ``retentionEnabled: true``; the official client's
    #: ``.config(retention_seconds=...)`` never sends it, so by default a window
    #: above zero is enough. True restores Queen's opt-in.
    RETENTION_REQUIRES_ENABLED: bool = False

    #: Timers (protocol.md section 4): ops per call, payload size, horizon.
    TIMERS_MAX_OPS_PER_CALL: int = 256
    TIMERS_MAX_PAYLOAD_BYTES: int = 1024 * 1024
    TIMERS_HORIZON_SECONDS: int = 90 * 86400
    #: Streams (``/streams/v1``): the largest state key and state value
    #: (compact JSON) a cycle may store; a bigger one fails the whole cycle
    #: with a 413. PostgreSQL's btree entries top out near 2.7 kB, so keys
    #: stay well below that.
    STREAMS_MAX_STATE_KEY_BYTES: int = 1024
    STREAMS_MAX_STATE_VALUE_BYTES: int = 1024 * 1024
    #: The timer loop: seconds between steps while timers keep coming due
    #: (all loops together: they take turns; a loop also wakes at once
    #: when a sooner timer is scheduled), the
    #: longest it sleeps when none is due, timers fired per transaction,
    #: and how many loops may fire at once (permits of the lock
    #: ``queenadmin.timers``; each holds one for ``TIMER_LEASE_SECONDS``).
    TIMER_TICK_SECONDS: float = 0.025
    TIMER_IDLE_SECONDS: float = 1.0
    TIMER_FIRE_BATCH: int = 256
    TIMER_LOOPS: int = 4
    TIMER_LEASE_SECONDS: float = 10.0
    #: Serve runs the timer loop in every worker; 0 leaves it to
    #: ``manage.py run_timers``.
    TIMER_LOOP_IN_SERVE: bool = True

    #: The dashboard: the environment's name in the header badge (say
    #: ``production`` where it matters; ``prod``/``production`` shows red),
    #: rows per page, and the shortest gap in seconds between two live
    #: renders of one page (coalescing: at most 1/gap renders a second).
    ENVIRONMENT_NAME: str = "development"
    DASHBOARD_PAGE_SIZE: int = 50
    DASHBOARD_LIVE_GAP_SECONDS: float = 0.5

    #: The statistics sampler (domain/queues/history.py): seconds between
    #: samples (rows are aligned to multiples of it), the roll-up's row
    #: size, how long each kind of row is kept, rows deleted per pruning
    #: statement, coarse rows rolled up per step, and the lease of the lock
    #: ``queenadmin.sampler`` that makes one replica the sampler.
    SAMPLER_INTERVAL_SECONDS: int = 10
    SAMPLES_COARSE_SECONDS: int = 300
    SAMPLES_FINE_RETENTION_SECONDS: int = 86400
    SAMPLES_COARSE_RETENTION_SECONDS: int = 30 * 86400
    SAMPLES_PRUNE_BATCH: int = 1000
    SAMPLES_ROLLUP_BUCKETS: int = 48
    SAMPLER_LEASE_SECONDS: float = 30.0
    #: Serve runs the sampler loop in every worker (one samples at a time);
    #: 0 turns it off.
    SAMPLER_IN_SERVE: bool = True

    #: Count requests by route class and status for /metrics (``serve``
    #: wraps the application); off serves without the counters (the store
    #: gauges and loop health stay).
    METRICS_REQUESTS: bool = True
    #: /metrics: a process reads the store's figures (queue depths, KV rows
    #: per namespace, timers) at most once per this many seconds (Prometheus'
    #: usual scrape interval; a read is a few queries per queue).
    METRICS_STORE_SECONDS: float = 15.0
    #: /metrics: seconds between a worker's writes of its request counts to
    #: the shared files (a scrape sees other workers' counts as of then).
    METRICS_FLUSH_SECONDS: float = 1.0

    #: Logins (dashboard and admin, README "Security"): this many failed
    #: logins within ``LOGIN_LOCKOUT_MINUTES`` lock the account and, apart
    #: from it, the client address, for ``LOGIN_LOCKOUT_MINUTES`` after the
    #: last one. A wrong second-factor code counts as a failed login.
    LOGIN_FAILURE_LIMIT: int = 5
    LOGIN_LOCKOUT_MINUTES: float = 15.0
    #: Superusers and members of the operators group must log in with a
    #: second factor (TOTP or a recovery code); a member without one sets it
    #: up on the dashboard at the next login. Others may opt in.
    REQUIRE_2FA: bool = False

    def __getattribute__(self, name: str) -> Any:
        try:
            return _values[name]
        except KeyError:
            pass
        if name.isupper():
            default = object.__getattribute__(self, name)
            value = getattr(django_settings, f"QUEENADMIN_{name}", default)
            _values[name] = value
            return value
        return object.__getattribute__(self, name)


#: The values read so far (a dict read is atomic; a race reads twice).
_values: dict[str, Any] = {}


def _forget(**kwargs: Any) -> None:
    _values.clear()


setting_changed.connect(_forget, dispatch_uid="queenadmin.conf.forget")

settings = _Settings()
