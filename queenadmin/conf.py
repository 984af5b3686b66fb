"""The settings list: every environment variable an operator sets, in one place.

Each setting below is declared once, in ``_Settings``, with its type, its
default, its area and a one-line description; ``docs/settings.md`` is made
from this list (``python -m queenadmin.conf --markdown``, and a test fails
when the committed file differs). An empty variable counts as unset.

Three kinds, by who reads the value:

- ``app`` (most of them): ``queenadmin.conf.settings.<NAME>``, which reads
  Django's ``QUEENADMIN_<NAME>`` at its first access (not at import: no
  coupling to the settings module's import order) and keeps it; a
  ``setting_changed`` signal (``override_settings``, pytest-django's
  ``settings`` fixture) forgets them all. ``settings.py`` sets
  ``QUEENADMIN_<NAME>`` from the environment. Reading Django's settings at
  every access cost ~50 lookups per API call (issue 15).
- ``start``: ``settings.py`` builds Django's own settings from it (the
  database, the secret key, HTTPS...); changing it needs a restart, and
  ``conf.settings`` does not answer it.
- ``uvicorn``, ``prometheus_client``: read from the process environment by
  that library; listed so that the list is complete.

``settings.py`` reads the environment once, through ``read_environ`` below.
Internal constants (batch sizes, leases, safety-net re-checks) are not
settings: they live beside their use (``docs/settings.md``, "Internal
constants"); the few a test starts a child process with other values of are
``TEST_HOOKS``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, Generic, TypeVar, cast

from django.conf import settings as django_settings
from django.core.signals import setting_changed

T = TypeVar("T")

#: The areas, in the order docs/settings.md lists them.
GROUPS: dict[str, str] = {
    "database": "Database",
    "server": "HTTP server and processes",
    "api": "API",
    "jwt": "Queen's JWTs on the API",
    "queues": "Queues",
    "retention": "Retention",
    "kv": "KV and locks",
    "timers": "Timers",
    "streams": "Streams",
    "dashboard": "Dashboard",
    "statistics": "Statistics sampler",
    "metrics": "Metrics",
    "logging": "Logging",
    "security": "Security",
    "sso": "Single sign-on (OpenID Connect)",
}

#: Who reads a setting (see the module's docstring).
READERS = ("app", "start", "uvicorn", "prometheus_client")

#: Every declared setting, in declaration order (filled by ``Setting.__set_name__``).
SETTINGS: list[Setting[Any]] = []


def parse_flag(raw: str) -> bool:
    return raw.strip().lower() in ("1", "true", "yes", "on")


class Setting(Generic[T]):
    """One setting: a descriptor on ``_Settings`` and an entry of ``SETTINGS``."""

    def __init__(
        self, default: T, group: str, doc: str, *, env: str = "", read_by: str = "app", shown: str = ""
    ) -> None:
        if group not in GROUPS or read_by not in READERS:
            raise ValueError(f"unknown group {group!r} or reader {read_by!r}")
        self.default = default
        self.type: type = type(default)
        self.group = group
        self.doc = doc
        self.env = env
        self.read_by = read_by
        #: The default as docs/settings.md shows it, where its value does not say it.
        self.shown = shown
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name
        self.env = self.env or f"QUEENADMIN_{name}"
        SETTINGS.append(self)

    def __get__(self, obj: object, owner: type | None = None) -> T:
        if obj is None:
            # On the class, the default (the published schema's limits); the
            # declaration itself is SETTINGS_BY_NAME[name].
            return self.default
        if self.read_by != "app":
            raise AttributeError(f"{self.env} is {_NOTES[self.read_by]}, not through queenadmin.conf")
        value = getattr(django_settings, f"QUEENADMIN_{self.name}", self.default)
        # Kept in the instance: the next read is a plain attribute lookup.
        obj.__dict__[self.name] = value
        return cast(T, value)

    def parse(self, raw: str) -> Any:
        """The value of the environment's text ``raw`` (not empty)."""
        if self.type is bool:
            return parse_flag(raw)
        if self.type in (int, float):
            return self.type(raw)
        return raw


def setting(default: T, group: str, doc: str, *, env: str = "", read_by: str = "app", shown: str = "") -> T:
    """Declare a setting in ``_Settings``'s body (typed as its default for mypy)."""
    return cast(T, Setting(default, group, doc, env=env, read_by=read_by, shown=shown))


class _Settings:
    # -- database -------------------------------------------------------------
    DATABASE_URL: str = setting(
        "",
        "database",
        "`postgresql://...` or `sqlite:///path`; unset: SQLite in `QUEENADMIN_DATA_DIR`.",
        env="DATABASE_URL",
        read_by="start",
    )
    DATA_DIR: str = setting(
        "",
        "database",
        "Where the SQLite file, the secret key and the first-run notes go (kept 0700, each file 0600).",
        read_by="start",
        shown="`./data`",
    )
    #: FULL: a write acknowledged is on disk, even through a power loss
    #: (NORMAL may lose the last ones in WAL mode). bench/README.md measures the cost.
    SQLITE_SYNCHRONOUS: str = setting(
        "FULL",
        "database",
        "SQLite's `synchronous`: `FULL` (an acknowledged write survives a power loss), `NORMAL` or `EXTRA`.",
        read_by="start",
    )
    SQLITE_NO_PERSIST: str = setting(
        "", "database", "Any value: a new SQLite connection per request (none kept for 600 s).", read_by="start"
    )
    #: Off by default for now: with it on, the timer test of a loop frozen
    #: mid-step (tests/unit/test_timers_concurrency.py) fails; see issue 13.
    DB_POOL_SIZE: int = setting(
        0,
        "database",
        "PostgreSQL: the connection pool of each serving process; 0: no pool, a connection per thread.",
        read_by="start",
    )
    CONN_MAX_AGE: int = setting(
        60, "database", "PostgreSQL without a pool: seconds a thread keeps its connection.", read_by="start"
    )
    DB_HEALTH_CHECK_IDLE_SECONDS: float = setting(
        1.0,
        "database",
        "PostgreSQL: a connection that ran a statement less than this ago skips the `SELECT 1` check"
        " (`queenadmin/pgbackend/base.py`); 0 checks before every request.",
    )
    DB_POOLER: str = setting(
        "",
        "database",
        "`transaction` when `DATABASE_URL` reaches PostgreSQL through a pooler in transaction pooling"
        " (PgBouncer's `pool_mode = transaction`); `session`, `none` or unset: directly.",
    )
    DB_POOLER_PREPARED: bool = setting(
        False,
        "database",
        "The transaction pooler keeps prepared statements per client (PgBouncer 1.21+ with"
        " `max_prepared_statements`): the hot statements stay prepared.",
    )
    DB_LISTEN_URL: str = setting(
        "",
        "database",
        "A direct PostgreSQL connection (past the pooler) used only to `LISTEN` for wake-ups.",
        env="DATABASE_LISTEN_URL",
    )
    DB_POOLER_POLL_SECONDS: float = setting(
        0.5,
        "database",
        "Transaction pooling without `DATABASE_LISTEN_URL`: seconds between looks for other replicas' writes.",
    )

    # -- HTTP server and processes --------------------------------------------
    WORKERS: int = setting(
        0,
        "server",
        "`serve --workers` when not given (PostgreSQL only); 0: one per core, at most 2 without a pooler.",
        shown="0 (one per core)",
    )
    #: Every thread that runs Python wants the GIL: 4 served the most KV puts
    #: per process (server/wsgi_bridge.py, bench/README.md).
    HTTP_THREADS: int = setting(
        4, "server", "WSGI threads per process; raise it when PostgreSQL is a slow round trip away."
    )
    REDIS_URL: str = setting(
        "",
        "server",
        "The channel layer on Redis (dashboards see every worker's and replica's events); unset: in-memory.",
        env="REDIS_URL",
    )
    FORWARDED_ALLOW_IPS: str = setting(
        "",
        "server",
        "uvicorn's own: the proxies whose `X-Forwarded-*` headers are trusted.",
        env="FORWARDED_ALLOW_IPS",
        read_by="uvicorn",
        shown="`127.0.0.1`",
    )
    #: Request body limit, answered 413 in plain text (protocol 1.1). Every
    #: other route (login, dashboard, static files) takes 1 MiB
    #: (``server/wsgi_bridge.SMALL_BODY_BYTES``).
    MAX_BODY_BYTES: int = setting(
        64 * 1024 * 1024, "server", "The largest request body the API's write routes read (413 past it)."
    )
    #: ``api.http.parse_cost``'s upper estimate: a 64 MiB body of ``[{},...]``
    #: parses into ~1.5 GiB of Python objects; such a body is answered 413
    #: before it is parsed. A long string costs about its size parsed, small
    #: objects 10-25 times theirs (about 10 MiB of small messages per call).
    MAX_PARSE_BYTES: int = setting(
        128 * 1024 * 1024, "server", "The most memory one request's parsed JSON may take, estimated (413 past it)."
    )
    #: Request bodies are read on the event loop before any thread runs.
    BODY_GRACE_SECONDS: float = setting(
        10.0, "server", "A request body has this long before `QUEENADMIN_BODY_MIN_RATE` applies (408)."
    )
    BODY_MIN_RATE: float = setting(
        64.0 * 1024, "server", "After the grace, the slowest average a body may arrive at, in bytes a second."
    )
    HEADER_TIMEOUT_SECONDS: float = setting(
        10.0, "server", "Seconds a request's headers have from the connection opening (or the last answer)."
    )
    WEBSOCKET_ROUTES: str = setting(
        "queenadmin.dashboard.routing.websocket_urlpatterns",
        "server",
        "The websocket routes `serve` answers: the dotted path of a list of Channels URL patterns"
        " (the dashboard's); empty, every websocket is closed at the handshake.",
    )

    # -- API ------------------------------------------------------------------
    OPEN_API: bool = setting(
        False,
        "api",
        "Serve `/api/v1` without a bearer token (local development only; `api/openmode.py`).",
    )
    OPEN_API_ANY_HOST: bool = setting(
        False, "api", "Let `serve` take `QUEENADMIN_OPEN_API` on a host that is not a loopback address."
    )
    TOKEN_CACHE_SECONDS: float = setting(
        1.0,
        "api",
        "Seconds a validated API token is trusted without asking the database (a revocation's delay).",
    )

    # -- queues ---------------------------------------------------------------
    POP_DB_THREADS: int = setting(8, "queues", "Threads per process that run the database work of async pops.")
    #: Off: bench/frames.py, 10,000 messages x 5 rounds of pop+ack with the
    #: official client, measured it no cheaper (2026-12-03, 2 shared cores):
    #: PostgreSQL 96% of JSON's msgs/s, server CPU 163 against 164 us/msg,
    #: client CPU 49 against 41 (its decoder is Python); SQLite 112% (noisy),
    #: server 101 against 109, client 52 against 43. Rendering is cheaper
    #: (2.0 against 4.3 us/msg) and the answer smaller (162 against 415 bytes
    #: a message), so turn it on where the network, not the CPU, is short.
    FRAMED_POP: bool = setting(
        False, "queues", "A pop with `frames=true` gets the framed answer (`QPF1`) rather than JSON."
    )
    DEFAULT_SUBSCRIPTION_MODE: str = setting(
        "all",
        "queues",
        "Where a new consumer group starts without a subscriptionMode: `all` (every retained message) or `new`.",
    )
    EPHEMERAL_IMPLICIT_IDLE_SECONDS: float = setting(
        300.0,
        "queues",
        "An implicit ephemeral queue (made by a push or pop of an unknown name) is removed after this long idle.",
    )
    EPHEMERAL_IDLE_CHECK_SECONDS: float = setting(
        30.0,
        "queues",
        "How often each serving process removes idle ephemeral queues (also when listed); 0: only when listed.",
    )
    EPHEMERAL_CELL_BYTES: int = setting(
        256 * 1024 * 1024, "queues", "The bytes of every ephemeral message together; a push past it answers 503."
    )

    # -- retention ------------------------------------------------------------
    RETENTION_INTERVAL_SECONDS: float = setting(
        5.0, "retention", "Seconds between sweeps of the message retention loop in `serve`; 0 turns it off."
    )
    RETENTION_BATCH_SIZE: int = setting(
        1000, "retention", "The most messages one sweep step deletes in one transaction."
    )
    #: Queen's server applies ``retentionSeconds``/``completedRetentionSeconds``
    #: only with ``retentionEnabled: true``; the official client's
    #: ``.config(retention_seconds=...)`` never sends it.
    RETENTION_REQUIRES_ENABLED: bool = setting(
        False,
        "retention",
        "Apply a queue's retention windows only with `retentionEnabled: true` (Queen's opt-in).",
    )
    #: A second replay of a dead letter within this answers ``duplicate``
    #: with the first one's copy; after it, 404 ``gone`` (issue 39).
    DLQ_REPLAY_KEEP_SECONDS: int = setting(
        7 * 86400,
        "retention",
        "How long a replayed dead letter's record (where its copy went) is kept: a second replay answers"
        " `duplicate` within it, 404 `gone` after; 0: none kept.",
    )

    # -- KV and locks ---------------------------------------------------------
    REAPER_INTERVAL_SECONDS: float = setting(5.0, "kv", "Seconds between reaper passes over expired KV rows.")
    #: KV protocol limits (protocol.md section 2.12).
    KV_MAX_OPS_PER_CALL: int = setting(256, "kv", "Operations one KV call may carry.")
    KV_MAX_KEYS_PER_CALL: int = setting(1024, "kv", "Keys one KV call may name.")
    KV_MAX_KEY_BYTES: int = setting(512, "kv", "The largest KV key, in bytes.")
    KV_MAX_VALUE_BYTES: int = setting(64 * 1024, "kv", "The largest KV value, in bytes.")
    #: Per API token and server process (protocol 2.12); 0 turns the limit
    #: off (the default: a self-hosted broker has one tenant, and Queen's
    #: cloud default of 100 writes/s would cap it far below what it serves).
    KV_WRITE_RATE: float = setting(
        0.0, "kv", "KV calls with a write or check a second, per token and process; 0: no limit."
    )
    KV_WRITE_BURST: float = setting(0.0, "kv", "The burst of `QUEENADMIN_KV_WRITE_RATE`; 0: twice the rate.")
    KV_READ_RATE: float = setting(0.0, "kv", "Read-only KV calls a second, per token and process; 0: no limit.")
    KV_READ_BURST: float = setting(0.0, "kv", "The burst of `QUEENADMIN_KV_READ_RATE`; 0: twice the rate.")
    #: History (issue 41): every write of a key, every event of a lock.
    KV_HISTORY_VALUE_BYTES: int = setting(
        4096,
        "kv",
        "A key's history keeps a value up to this many bytes of JSON; a larger one only as its sha256.",
    )
    KV_HISTORY_EXCLUDE: str = setting(
        "",
        "kv",
        "Comma-separated KV namespaces whose writes keep no history (hot counters).",
    )
    HISTORY_MAX_AGE_SECONDS: int = setting(
        30 * 86400, "kv", "History of keys and locks older than this is trimmed; 0: no age limit."
    )
    HISTORY_MAX_ENTRIES: int = setting(
        1000,
        "kv",
        "The newest versions kept per key (and events per lock slot); a key is cut back to it "
        "once it holds a tenth more; 0: no count limit.",
    )

    # -- timers ---------------------------------------------------------------
    #: Timers (protocol.md section 4).
    TIMERS_MAX_OPS_PER_CALL: int = setting(256, "timers", "Operations one timers call may carry.")
    TIMERS_MAX_PAYLOAD_BYTES: int = setting(1024 * 1024, "timers", "The largest timer payload, in bytes.")
    TIMERS_HORIZON_SECONDS: int = setting(90 * 86400, "timers", "How far ahead a timer may be scheduled, in seconds.")
    #: All loops together take turns on one grid of this step; a loop also
    #: wakes at once when a sooner timer is scheduled.
    TIMER_TICK_SECONDS: float = setting(
        0.025, "timers", "Seconds between timer loop steps while timers keep coming due (CPU rises as it falls)."
    )
    TIMER_FIRE_BATCH: int = setting(1000, "timers", "Timers fired per transaction.")
    TIMER_LOOPS: int = setting(
        4, "timers", "How many timer loops may fire at once (permits of the lock `queenadmin.timers`)."
    )
    TIMER_LOOP_IN_SERVE: bool = setting(
        True, "timers", "`serve` runs the timer loop in every worker; 0 leaves it to `manage.py run_timers`."
    )

    # -- streams --------------------------------------------------------------
    #: A bigger one fails the whole cycle with a 413. PostgreSQL's btree
    #: entries top out near 2.7 kB, so keys stay well below that.
    STREAMS_MAX_STATE_KEY_BYTES: int = setting(
        1024, "streams", "The largest state key a `/streams/v1` cycle may store, in bytes."
    )
    STREAMS_MAX_STATE_VALUE_BYTES: int = setting(
        1024 * 1024, "streams", "The largest state value (compact JSON) a cycle may store, in bytes."
    )

    # -- dashboard ------------------------------------------------------------
    ENVIRONMENT_NAME: str = setting(
        "development",
        "dashboard",
        "The environment's name in the header badge (`prod`/`production` shows red).",
    )
    DASHBOARD_PAGE_SIZE: int = setting(50, "dashboard", "Rows per page.")
    DASHBOARD_LIVE_GAP_SECONDS: float = setting(
        0.5, "dashboard", "The shortest gap between two live renders of one page (at most 1/gap a second)."
    )

    # -- statistics sampler (domain/queues/history.py) -------------------------
    SAMPLER_INTERVAL_SECONDS: int = setting(
        10, "statistics", "Seconds between samples of the queues and of each process (rows align to it)."
    )
    SAMPLES_FINE_RETENTION_SECONDS: int = setting(
        86400, "statistics", "How long the samples taken every interval are kept."
    )
    SAMPLES_COARSE_RETENTION_SECONDS: int = setting(
        30 * 86400, "statistics", "How long the rolled-up (5-minute) samples are kept."
    )
    SAMPLER_IN_SERVE: bool = setting(
        True, "statistics", "`serve` runs the sampler in every worker (one samples at a time); 0 turns it off."
    )

    # -- Queen's JWTs on the API (domain/identity/jwt.py) --------------------
    # Queen's own variable names (no QUEENADMIN_ prefix), so an operator
    # moving from Queen keeps their configuration; the meanings are Queen's.
    JWT_ENABLED: bool = setting(
        False, "jwt", "Verify a bearer JWT beside our own tokens (`qa_...`).", env="JWT_ENABLED"
    )
    JWT_ALGORITHM: str = setting(
        "HS256",
        "jwt",
        "`HS256`, `HS384`, `HS512`, `RS256` (RS256/384/512), `RS384`, `RS512`, `EdDSA` or `auto` (all of them).",
        env="JWT_ALGORITHM",
    )
    JWT_SECRET: str = setting("", "jwt", "The HMAC key (its bytes as given) for HS*.", env="JWT_SECRET")
    JWT_PUBLIC_KEY: str = setting(
        "", "jwt", "A PEM public key (RSA or Ed25519); wins over the JWKS when set.", env="JWT_PUBLIC_KEY"
    )
    JWT_JWKS_URL: str = setting("", "jwt", "A JWKS document, fetched at start and cached by `kid`.", env="JWT_JWKS_URL")
    JWT_JWKS_REFRESH_INTERVAL: int = setting(
        3600, "jwt", "Seconds between refreshes of the JWKS.", env="JWT_JWKS_REFRESH_INTERVAL"
    )
    JWT_JWKS_TIMEOUT_MS: int = setting(5000, "jwt", "Milliseconds a JWKS fetch may take.", env="JWT_JWKS_TIMEOUT_MS")
    JWT_CLOCK_SKEW: int = setting(30, "jwt", "Seconds of leeway for `exp`, `nbf` and `iat`.", env="JWT_CLOCK_SKEW")
    JWT_ISSUER: str = setting("", "jwt", "The `iss` a token must carry; checked only when set.", env="JWT_ISSUER")
    JWT_AUDIENCE: str = setting(
        "",
        "jwt",
        "An `aud` a token must carry (a string or one of an array); checked only when set.",
        env="JWT_AUDIENCE",
    )
    JWT_ROLES_CLAIM: str = setting("role", "jwt", "The claim with one role.", env="JWT_ROLES_CLAIM")
    JWT_ROLES_ARRAY_CLAIM: str = setting(
        "roles", "jwt", "The claim with an array of roles.", env="JWT_ROLES_ARRAY_CLAIM"
    )
    JWT_ROLE_ADMIN: str = setting("admin", "jwt", "The role value of the admin level.", env="JWT_ROLE_ADMIN")
    JWT_ROLE_READ_WRITE: str = setting(
        "read-write", "jwt", "The role value of the read-write level.", env="JWT_ROLE_READ_WRITE"
    )
    JWT_ROLE_READ_ONLY: str = setting(
        "read-only", "jwt", "The role value of the read-only level.", env="JWT_ROLE_READ_ONLY"
    )
    JWT_ROLE_WRITE_ONLY: str = setting(
        "write-only", "jwt", "The role value of the write-only level.", env="JWT_ROLE_WRITE_ONLY"
    )
    JWT_SKIP_PATHS: str = setting(
        "/health,/metrics/prometheus,/metrics,/",
        "jwt",
        "Paths served without a token when JWTs are on, comma-separated: exact, or a prefix for an entry"
        " ending in `/` (longer than one character).",
        env="JWT_SKIP_PATHS",
    )

    # -- metrics --------------------------------------------------------------
    METRICS_REQUESTS: bool = setting(
        True,
        "metrics",
        "Count requests by route class and status for /metrics; off: no counters (store gauges stay).",
    )
    METRICS_STORE_SECONDS: float = setting(
        15.0, "metrics", "/metrics reads the store's figures (queue depths, KV rows, timers) at most this often."
    )
    METRICS_FLUSH_SECONDS: float = setting(
        1.0, "metrics", "Seconds between a worker's writes of its request counts to the shared files."
    )
    PROMETHEUS_MULTIPROC_DIR: str = setting(
        "",
        "metrics",
        "Where workers keep their metrics files; unset: a fresh temporary directory per `serve`.",
        env="PROMETHEUS_MULTIPROC_DIR",
        read_by="prometheus_client",
    )

    # -- logging (server/logs.py) ---------------------------------------------
    LOG_FORMAT: str = setting("text", "logging", "`text` or `json` (one JSON object a line).")
    LOG_LEVEL: str = setting("INFO", "logging", "The level of queenadmin's loggers.")
    UVICORN_LOG_LEVEL: str = setting("WARNING", "logging", "The level of uvicorn's error logger.")

    # -- security -------------------------------------------------------------
    DJANGO_SECRET_KEY: str = setting(
        "",
        "security",
        "Django's secret key (the same on every replica; required on PostgreSQL).",
        env="DJANGO_SECRET_KEY",
        read_by="start",
        shown="one made per install, in `QUEENADMIN_DATA_DIR`",
    )
    DJANGO_DEBUG: str = setting("", "security", "`1`: Django's debug mode.", env="DJANGO_DEBUG", read_by="start")
    DJANGO_ALLOWED_HOSTS: str = setting(
        "127.0.0.1,localhost,[::1],testserver",
        "security",
        "Host names the server answers, comma-separated.",
        env="DJANGO_ALLOWED_HOSTS",
        read_by="start",
    )
    #: Django's CSRF_TRUSTED_ORIGINS, which the live socket and open-API
    #: mode read too (server/origins.py).
    ORIGINS: str = setting(
        "",
        "security",
        "The site's public origins (`https://queen.example.com`), comma-separated: forms and the live socket"
        " accept these besides the address a request came to.",
        read_by="start",
    )
    DJANGO_CSRF_TRUSTED_ORIGINS: str = setting(
        "",
        "security",
        "The older name of `QUEENADMIN_ORIGINS`, added to it.",
        env="DJANGO_CSRF_TRUSTED_ORIGINS",
        read_by="start",
    )
    HTTPS: bool = setting(
        False,
        "security",
        "Browsers reach the server over HTTPS only: Secure cookies on every answer, HSTS on HTTPS answers.",
        read_by="start",
    )
    DJANGO_SECURE_HSTS_SECONDS: int = setting(
        0,
        "security",
        "HSTS lifetime on HTTPS answers.",
        env="DJANGO_SECURE_HSTS_SECONDS",
        read_by="start",
        shown="0, or one year with `QUEENADMIN_HTTPS=1`",
    )
    DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS: bool = setting(
        False, "security", "HSTS's `includeSubDomains`.", env="DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", read_by="start"
    )
    DJANGO_SECURE_HSTS_PRELOAD: bool = setting(
        False, "security", "HSTS's `preload`.", env="DJANGO_SECURE_HSTS_PRELOAD", read_by="start"
    )
    CSP_REPORT_ONLY: bool = setting(
        False,
        "security",
        "Send the pages' Content-Security-Policy as `...-Report-Only` (reported, not enforced; `server/csp.py`).",
        read_by="start",
    )
    LOGIN_FAILURE_LIMIT: int = setting(
        5, "security", "Failed logins (or second-factor codes) that lock an account, and apart an address, out."
    )
    LOGIN_LOCKOUT_MINUTES: float = setting(
        15.0, "security", "The window failures count in, and how long a lockout lasts after the last one."
    )
    REQUIRE_2FA: bool = setting(
        False,
        "security",
        "Superusers and the operators group must log in with a second factor (TOTP or a recovery code).",
    )

    # -- single sign-on (domain/identity/sso.py, dashboard/sso.py) ------------
    OIDC_ISSUER: str = setting(
        "",
        "sso",
        "The OpenID provider's issuer URL (`https://accounts.google.com`); set, the login pages offer single"
        " sign-on. Its `/.well-known/openid-configuration` is read at the first sign-in and kept.",
    )
    OIDC_PROVIDER_NAME: str = setting(
        "", "sso", 'The provider\'s name on the login pages ("Sign in with ...").', shown="the issuer's host name"
    )
    OIDC_CLIENT_ID: str = setting("", "sso", "The client id the provider gave queenadmin.")
    OIDC_CLIENT_SECRET: str = setting("", "sso", "The client secret the provider gave queenadmin.")
    OIDC_SCOPES: str = setting(
        "openid email profile",
        "sso",
        "The scopes asked for, space-separated (`openid` and `email` at least; add the one that brings the role claim).",
    )
    OIDC_SIGNING_ALGORITHM: str = setting(
        "RS256",
        "sso",
        "The `alg` of the provider's ID tokens: `RS256`/`384`/`512`, `ES256`/`384`/`512` or `HS256`/`384`/`512`.",
    )
    OIDC_ALLOWED_DOMAINS: str = setting(
        "",
        "sso",
        "E-mail domains whose users may sign in, comma-separated, each exact (`example.com`); `*`: anyone the"
        " provider signs in. This or `QUEENADMIN_OIDC_ALLOWED_EMAILS` is required.",
    )
    OIDC_ALLOWED_EMAILS: str = setting(
        "", "sso", "E-mail addresses that may sign in besides those domains, comma-separated."
    )
    OIDC_ROLE_CLAIM: str = setting(
        "groups",
        "sso",
        "The claim with the user's groups or roles, a string or an array (a dotted path reads a nested one:"
        " `realm_access.roles`), from the ID token or the userinfo answer.",
    )
    OIDC_SUPERUSER_VALUES: str = setting(
        "", "sso", "Values of the role claim that make a superuser, comma-separated (unset: none does)."
    )
    OIDC_OPERATOR_VALUES: str = setting(
        "queenadmin-operators", "sso", "Values of the role claim that make an operator, comma-separated."
    )
    OIDC_VIEWER_VALUES: str = setting(
        "queenadmin-viewers", "sso", "Values of the role claim that make a viewer, comma-separated."
    )
    OIDC_DEFAULT_ROLE: str = setting(
        "none",
        "sso",
        "The role of an allowed user whose claim has none of those values: `none` (refused), `viewers` or `operators`.",
    )
    OIDC_LOGOUT_AT_PROVIDER: bool = setting(
        True,
        "sso",
        "Logging out of a single sign-on session ends it at the provider too, when the provider advertises"
        " an `end_session_endpoint`.",
    )
    LOCAL_LOGIN: bool = setting(
        True,
        "sso",
        "Accounts may log in with their password (dashboard and admin); 0 leaves single sign-on alone"
        " (needs `QUEENADMIN_OIDC_ISSUER`).",
    )


#: Internal constants a test starts a child process (``serve``,
#: ``run_timers``) with other values of, as ``QUEENADMIN_<NAME>`` in its
#: environment; an in-process test sets Django's ``QUEENADMIN_<NAME>``. Not
#: settings (not in docs/settings.md): each default is a module constant
#: beside its use, read through ``internal()``. The pooler tests make the
#: safety-net re-checks slow so that only a ``LISTEN`` or the poll can wake a
#: waiter in time; the frozen-loop test makes a loop's lease short.
TEST_HOOKS: dict[str, type] = {
    "POP_RECHECK_SECONDS": float,
    "TIMER_IDLE_SECONDS": float,
    "TIMER_LEASE_SECONDS": float,
}
#: Test-only variables ``settings.py`` reads besides: a second PostgreSQL
#: test database name (``QUEENADMIN_TEST_DB_NAME``) and the answer recorder
#: (``QUEENADMIN_RECORD_ANSWERS``, ``api/recording.py``).
TEST_ENV = ("QUEENADMIN_TEST_DB_NAME", "QUEENADMIN_RECORD_ANSWERS")

#: The internal constants read through ``internal()`` so far.
_internal: dict[str, float] = {}


def internal(name: str, constant: float) -> float:
    """``constant`` (a module constant beside its use) unless a test set
    Django's ``QUEENADMIN_<name>``; ``name`` is one of ``TEST_HOOKS``."""
    try:
        return _internal[name]
    except KeyError:
        pass
    value = float(getattr(django_settings, f"QUEENADMIN_{name}", constant))
    _internal[name] = value
    return value


def read_environ(environ: Mapping[str, str]) -> dict[str, Any]:
    """The declared variables set (not empty) in ``environ``, typed, by
    setting name; the test hooks by their ``QUEENADMIN_`` name's tail, and
    ``TEST_ENV`` by variable name. ``settings.py`` calls it once."""
    found: dict[str, Any] = {}
    for declared in SETTINGS:
        raw = environ.get(declared.env, "")
        if raw:
            found[declared.name] = declared.parse(raw)
    for name, kind in TEST_HOOKS.items():
        raw = environ.get(f"QUEENADMIN_{name}", "")
        if raw:
            found[name] = kind(raw)
    for variable in TEST_ENV:
        if environ.get(variable):
            found[variable] = environ[variable]
    return found


def default(name: str) -> Any:
    """A declared setting's default."""
    return SETTINGS_BY_NAME[name].default


def app_or_hook(name: str) -> bool:
    """Whether Django's ``QUEENADMIN_<name>`` is read: an app setting or a test hook."""
    declared = SETTINGS_BY_NAME.get(name)
    return name in TEST_HOOKS or (declared is not None and declared.read_by == "app")


def _forget(**kwargs: Any) -> None:
    settings.__dict__.clear()
    _internal.clear()


setting_changed.connect(_forget, dispatch_uid="queenadmin.conf.forget")

settings = _Settings()
SETTINGS_BY_NAME = {declared.name: declared for declared in SETTINGS}


# -- docs/settings.md ---------------------------------------------------------


def _shown_default(declared: Setting[Any]) -> str:
    return declared.shown or _shown_value(declared.default)


def _shown_value(value: Any) -> str:
    if value == "":
        return "unset"
    if isinstance(value, bool):
        return "`1`" if value else "`0`"
    if isinstance(value, int) and value >= 1024 and value % 1024 == 0:
        mib, kib = divmod(value, 1024 * 1024)
        return f"{value} ({mib} MiB)" if kib == 0 else f"{value} ({value // 1024} KiB)"
    return f"`{value}`"


_TYPES = {bool: "flag", int: "integer", float: "number", str: "text"}

_NOTES = {
    "start": "read at start by `settings.py`",
    "uvicorn": "read by uvicorn",
    "prometheus_client": "read by prometheus_client",
}


def markdown() -> str:
    """docs/settings.md: every setting, by area."""
    lines = [
        "# Settings",
        "",
        "<!-- Made by `python -m queenadmin.conf --markdown > docs/settings.md` from the list in",
        "queenadmin/conf.py; tests/unit/test_settings_list.py fails when this file differs. -->",
        "",
        "Every setting is an environment variable, read once when a process starts. An empty",
        "variable counts as unset. Flags take `1`, `true`, `yes` or `on` (anything else is off).",
        "The `QUEENADMIN_*` settings that the code reads through `queenadmin/conf.py` can also be",
        "set as Django settings of the same name (`override_settings` in tests).",
        "",
    ]
    for group, title in GROUPS.items():
        members = [declared for declared in SETTINGS if declared.group == group]
        lines += [f"## {title}", "", "| Variable | Type | Default | Meaning |", "|---|---|---|---|"]
        for declared in members:
            meaning = declared.doc
            if declared.read_by in _NOTES:
                meaning = f"{meaning.rstrip('.')} ({_NOTES[declared.read_by]})."
            kind = _TYPES[declared.type]
            meaning = meaning.replace("|", "\\|")
            lines.append(f"| `{declared.env}` | {kind} | {_shown_default(declared)} | {meaning} |")
        lines.append("")
    lines += [
        "## Internal constants",
        "",
        "Not settings: batch sizes per statement, lock leases, safety-net re-checks, the layout",
        "of the statistics rows and autopilot's starting point follow from the code around them,",
        "and an operator has no reason to change them. Issue 38 moved them out of the settings",
        "list into module constants beside their use: `QUEENADMIN_<NAME>` no longer sets them,",
        "except the ones marked *test hook*, which a test gives a child process (`serve`,",
        "`run_timers`) in its environment (`TEST_HOOKS` in `queenadmin/conf.py`).",
        "",
        "| Constant | Where | Value | What it is |",
        "|---|---|---|---|",
    ]
    for name, where, value, what in INTERNAL_CONSTANTS:
        hook = " (*test hook*)" if name in TEST_HOOKS else ""
        lines.append(f"| `{name}`{hook} | `queenadmin/{where}` | {_shown_value(value)} | {what} |")
    lines.append("")
    return "\n".join(lines)


#: The constants issue 38 moved out of the settings list, for docs/settings.md:
#: (name, module under queenadmin/, value, what it is). tests/unit/test_settings_list.py
#: checks each module holds that value.
INTERNAL_CONSTANTS: tuple[tuple[str, str, float, str], ...] = (
    ("REAPER_BATCH_SIZE", "domain/kv/ops.py", 500, "expired KV rows (lock permits too) deleted per statement"),
    ("SMALL_BODY_BYTES", "server/wsgi_bridge.py", 1024 * 1024, "the body limit of every route but the API's writes"),
    ("POP_RECHECK_SECONDS", "domain/queues/wakeups.py", 2.0, "a waiting pop re-tries its claim this often"),
    ("AUTOPILOT_BATCH", "api/wire/queues.py", 100, "pop autopilot's batch when the client sets none"),
    ("AUTOPILOT_PARTITIONS", "api/wire/queues.py", 4, "pop autopilot's partitions when the client sets none"),
    ("TIMER_IDLE_SECONDS", "domain/timers/wake.py", 1.0, "the longest a timer loop sleeps with nothing due"),
    ("TIMER_LEASE_SECONDS", "domain/timers/fire.py", 10.0, "the lease of a timer loop's permit"),
    ("SAMPLES_COARSE_SECONDS", "domain/queues/history.py", 300, "the statistics roll-up's row size, in seconds"),
    ("SAMPLES_ROLLUP_BUCKETS", "domain/queues/history.py", 48, "coarse intervals one roll-up step writes"),
    ("SAMPLES_PRUNE_BATCH", "domain/queues/history.py", 1000, "statistics rows deleted per pruning statement"),
    ("PRUNE_BATCH", "domain/procmetrics/ops.py", 1000, "process sample rows deleted per pruning statement"),
    ("SAMPLER_LEASE_SECONDS", "domain/queues/sampler.py", 30.0, "the lease that makes one replica the sampler"),
    ("KEYS_SHARE", "domain/queues/sampler.py", 0.1, "the most of the sampler's interval its KV key count may take"),
    (
        "GROUP_SAMPLES_RETENTION_SECONDS",
        "domain/queues/groupsamples.py",
        900,
        "how long each consumer group's sampled counters are kept (its rates read the last minutes)",
    ),
)


if __name__ == "__main__":
    from queenadmin import conf as _conf  # the module the code imports, not __main__'s copy

    if sys.argv[1:] != ["--markdown"]:
        sys.exit("usage: python -m queenadmin.conf --markdown > docs/settings.md")
    sys.stdout.write(_conf.markdown())
