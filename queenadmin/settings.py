"""Django settings for queenadmin.

The environment is read once, here (``ENV`` below), for the variables
``queenadmin/conf.py`` declares: its list is every setting, and
docs/settings.md, made from it, says what each means. The app settings
become Django's ``QUEENADMIN_<NAME>``, which ``conf.settings`` reads; the
others (``DATABASE_URL``, ``REDIS_URL``, the ``DJANGO_*`` variables,
origins, HTTPS and HSTS, the pooler, CSP) make Django's own settings.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import dj_database_url

from queenadmin import conf
from queenadmin.plumbing.files import create_private_file, private_data_dir
from queenadmin.server.csp import csp_settings
from queenadmin.server.origins import parse_origins

#: Every variable conf.py declares that the environment sets (not empty),
#: typed, by setting name: the one read of the environment.
ENV = conf.read_environ(os.environ)


def _env(name: str) -> Any:
    """A declared setting: the environment's value, else its default."""
    return ENV[name] if name in ENV else conf.default(name)


# The app settings the environment gives (conf.settings reads them as
# QUEENADMIN_<NAME>; the few this module works out itself are set again
# below), and the internal constants a test changes (conf.TEST_HOOKS).
globals().update({f"QUEENADMIN_{name}": value for name, value in ENV.items() if conf.app_or_hook(name)})

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(_env("DATA_DIR") or BASE_DIR / "data")


if DATA_DIR.exists():
    # A folder an older version left 0755 is tightened on every start.
    private_data_dir(DATA_DIR)

SECRET_KEY = _env("DJANGO_SECRET_KEY")
#: True when no DJANGO_SECRET_KEY was given and the key below is this
#: install's own (serve refuses that on PostgreSQL).
SECRET_KEY_GENERATED = not SECRET_KEY
if not SECRET_KEY:
    # A stable per-install key, kept beside the SQLite file, so sessions survive
    # restarts without anyone having to invent a secret for local use. (On
    # PostgreSQL, serve refuses to start without DJANGO_SECRET_KEY: every
    # replica would invent its own.)
    import secrets

    _key_file = private_data_dir(DATA_DIR) / "secret_key"
    create_private_file(_key_file, secrets.token_urlsafe(50))
    SECRET_KEY = _key_file.read_text().strip()

DEBUG = _env("DJANGO_DEBUG") == "1"
ALLOWED_HOSTS = _env("DJANGO_ALLOWED_HOSTS").split(",")
#: Origins the dashboard's and the admin's forms, and the live socket, may
#: come from when they are not the address the server sees, e.g.
#: "https://queen.example.com" behind a proxy that rewrites Host or the port
#: (QUEENADMIN_ORIGINS, then the older DJANGO_CSRF_TRUSTED_ORIGINS).
CSRF_TRUSTED_ORIGINS = [
    *parse_origins(_env("ORIGINS"), name="QUEENADMIN_ORIGINS"),
    *parse_origins(_env("DJANGO_CSRF_TRUSTED_ORIGINS"), name="DJANGO_CSRF_TRUSTED_ORIGINS"),
]

#: Browsers reach this server over HTTPS only (docs/security.md, "HTTPS behind a proxy").
QUEENADMIN_HTTPS = _env("HTTPS")
# No SECURE_PROXY_SSL_HEADER: uvicorn already turned a trusted proxy's
# X-Forwarded-Proto into the request's scheme, and the setting would trust
# the header from any client.
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = QUEENADMIN_HTTPS
SECURE_HSTS_SECONDS = ENV.get("DJANGO_SECURE_HSTS_SECONDS", 31536000 if QUEENADMIN_HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = _env("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS")
SECURE_HSTS_PRELOAD = _env("DJANGO_SECURE_HSTS_PRELOAD")
#: The browser pages' Content-Security-Policy is only reported, not enforced.
QUEENADMIN_CSP_REPORT_ONLY = _env("CSP_REPORT_ONLY")
# CONTENT_SECURITY_POLICY and its _REPORT_ONLY twin (server/csp.py). Read
# here, not through conf.py: django-csp reads these two settings itself.
globals().update(csp_settings(report_only=QUEENADMIN_CSP_REPORT_ONLY))

INSTALLED_APPS = [
    # django.contrib.admin with queenadmin's site (second factor at login).
    "queenadmin.apps.AdminSiteConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    # Serves Swagger UI's files from our static files: /api/v1/docs works
    # offline (without it ninja loads them from a CDN).
    "ninja",
    "django_htmx",
    "template_partials",
    # Failed-login counting and lockout (queenadmin/dashboard/lockout.py).
    "axes",
    # Second factors: TOTP devices and recovery codes (domain/twofactor.py).
    "django_otp",
    "django_otp.plugins.otp_totp",
    "django_otp.plugins.otp_static",
    "queenadmin.apps.QueenAdminConfig",
]

#: Long-poll pops (``server.handlers.PopHandler``) run only the body limit, the API
#: error envelope and the security, common and X-Frame-Options entries of
#: this list.
MIDDLEWARE = [
    "queenadmin.server.middleware.BodyLimitMiddleware",
    "queenadmin.api.envelope.ApiErrorMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Outside the entries that set cookies: it marks them Secure on the way out.
    "queenadmin.server.secure_cookies.SecureCookiesMiddleware",
    # Outside every entry that answers a page (login, 2FA, lockout, errors):
    # all of them get the policy. The API's chain leaves it out.
    "queenadmin.server.csp.CSPMiddleware",
    # Before anything reads the request: NUL in a page's path or fields is 400.
    "queenadmin.dashboard.middleware.RefuseUnstorable",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django_otp.middleware.OTPMiddleware",
    "queenadmin.dashboard.twofactor.SecondFactorMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as axes asks: turns a locked-out login into the lockout page.
    "axes.middleware.AxesMiddleware",
]
if "QUEENADMIN_RECORD_ANSWERS" in ENV:  # a test hook: see queenadmin/api/recording.py
    MIDDLEWARE.append("queenadmin.api.recording.RecordAnswersMiddleware")

ROOT_URLCONF = "queenadmin.urls"
#: The websocket routes, named as ROOT_URLCONF is: the server (server/app.py)
#: serves them without importing the dashboard, which stands above it.
QUEENADMIN_WEBSOCKET_ROUTES = _env("WEBSOCKET_ROUTES")
WSGI_APPLICATION = "queenadmin.wsgi.application"
ASGI_APPLICATION = "queenadmin.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "queenadmin.dashboard.context.dashboard",
            ],
        },
    },
]

_database_url = _env("DATABASE_URL")
#: "transaction": PostgreSQL is reached through a transaction pooler, so
#: nothing may rely on a session outliving a transaction (docs/reference.md);
#: "" (or "session", where nothing differs): directly.
QUEENADMIN_DB_POOLER = _env("DB_POOLER").strip().lower()
if QUEENADMIN_DB_POOLER in ("none", "session"):
    QUEENADMIN_DB_POOLER = ""
if QUEENADMIN_DB_POOLER not in ("", "transaction"):
    raise ValueError("QUEENADMIN_DB_POOLER must be transaction, session or none")
#: The pooler keeps prepared statements per client (PgBouncer >= 1.21 with
#: max_prepared_statements > 0): the hot statements may stay prepared.
QUEENADMIN_DB_POOLER_PREPARED = _env("DB_POOLER_PREPARED")
#: A direct connection's URL, only for LISTEN (plumbing/db.listen_params).
QUEENADMIN_DB_LISTEN_URL = _env("DB_LISTEN_URL").strip()
#: Transaction pooling without DATABASE_LISTEN_URL: waiting pops and the
#: timer loops look for other replicas' writes this often, in seconds.
QUEENADMIN_DB_POOLER_POLL_SECONDS = _env("DB_POOLER_POLL_SECONDS")
if _database_url:
    _db = dj_database_url.parse(_database_url)
else:
    _db = dj_database_url.parse(f"sqlite:///{private_data_dir(DATA_DIR) / 'queenadmin.sqlite3'}")

if _db["ENGINE"] == "django.db.backends.sqlite3":
    if _db["NAME"] and _db["NAME"] != ":memory:" and not _db["NAME"].startswith("file:"):
        # Created 0600 before SQLite opens it; SQLite gives its -wal and
        # -shm files the database file's mode.
        create_private_file(Path(_db["NAME"]))
    # FULL: a write acknowledged is on disk, even through a power loss
    # (NORMAL may lose the last ones in WAL mode). bench/README.md measures the cost;
    # QUEENADMIN_SQLITE_SYNCHRONOUS=NORMAL relaxes it.
    _synchronous = _env("SQLITE_SYNCHRONOUS").upper()
    if _synchronous not in ("FULL", "NORMAL", "EXTRA"):
        raise ValueError("QUEENADMIN_SQLITE_SYNCHRONOUS must be FULL, NORMAL or EXTRA")
    # Writers queue at BEGIN instead of failing halfway with "database is
    # locked"; WAL lets readers run beside the one writer.
    from queenadmin.plumbing.db import sqlite_init_command

    _db["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": sqlite_init_command(_synchronous),
    }
    _db["CONN_MAX_AGE"] = 0 if _env("SQLITE_NO_PERSIST") else 600
elif _db["ENGINE"].startswith("django.db.backends.postgresql"):
    # Django's backend with the health check only after idle (pgbackend/base.py).
    _db["ENGINE"] = "queenadmin.pgbackend"
    _db.setdefault("OPTIONS", {})
    #: Connections a serving process opens at most, shared by its HTTP
    #: threads, pop threads and loops (docs/operations.md: the connection budget).
    #: A thread holds one only while it works, so 8 serve 16+ threads.
    #: Off by default for now: with it on, the timer test of a loop frozen
    #: mid-step (tests/unit/test_timers_concurrency.py) fails; see issue 13.
    _pool_size = _env("DB_POOL_SIZE")
    if _pool_size > 0:
        # Pooled connections are reused, never re-opened per request
        # (framework-ceilings.md: opening one costs 5-6 ms of PostgreSQL
        # CPU); Django requires CONN_MAX_AGE=0 with a pool. A thread that
        # waits over 30 s for one gets an error.
        _db["OPTIONS"]["pool"] = {"min_size": 1, "max_size": _pool_size, "timeout": 30, "max_idle": 300}
        _db["CONN_MAX_AGE"] = 0
        # The pool checks a connection as it hands it out (bench/README.md:
        # without a check every connection fails one request after a
        # PostgreSQL restart).
        _db["CONN_HEALTH_CHECKS"] = True
    else:
        # Persistent connections, one per thread (framework-ceilings.md:
        # never CONN_MAX_AGE=0 unpooled).
        _db["CONN_MAX_AGE"] = _env("CONN_MAX_AGE")
        _db["CONN_HEALTH_CHECKS"] = True
    if QUEENADMIN_DB_POOLER == "transaction":
        # A transaction pooler hands each transaction whichever server
        # session is free: a statement prepared on one is missing on the
        # next ("prepared statement _pg3_0 does not exist"). None turns off
        # psycopg's automatic preparing and its explicit prepare=True alike,
        # unless the pooler tracks them per client.
        _db["OPTIONS"].setdefault("prepare_threshold", 2**62 if QUEENADMIN_DB_POOLER_PREPARED else None)
        # Django's .iterator() outside a transaction declares a WITH HOLD
        # cursor, which lives in the server session.
        _db["DISABLE_SERVER_SIDE_CURSORS"] = True
    else:
        # Django passes None (no automatic preparing), which makes psycopg
        # ignore an explicit prepare=True too. A threshold nothing reaches
        # keeps the automatic kind off and lets plumbing/db.pg_run prepare its
        # hot statements.
        _db["OPTIONS"].setdefault("prepare_threshold", 2**62)
if _db["ENGINE"] == "queenadmin.pgbackend" and "QUEENADMIN_TEST_DB_NAME" in ENV:
    # Lets several test runs share one PostgreSQL server without sharing a
    # test database.
    _db["TEST"] = {"NAME": ENV["QUEENADMIN_TEST_DB_NAME"]}
DATABASES = {"default": _db}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

_redis_url = _env("REDIS_URL")
if _redis_url:
    from queenadmin.server.channel_layer import redis_layer_config

    CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": redis_layer_config(_redis_url)}
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

AUTH_PASSWORD_VALIDATORS: list[dict[str, str]] = []
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True
# Times in the admin say their zone ("8:14 a.m. UTC"): queenadmin/formats.
FORMAT_MODULE_PATH = ["queenadmin.formats"]

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "static"

# Axes refuses a locked-out login before any password is checked; then
# Django's own; then single sign-on's callback (queenadmin/dashboard/sso.py),
# which answers nothing else.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
    "queenadmin.dashboard.sso.SsoBackend",
]
# Login throttling (queenadmin/dashboard/lockout.py has the callables; the
# numbers are QUEENADMIN_LOGIN_FAILURE_LIMIT and _LOCKOUT_MINUTES).
#: Failures are counted per account and, apart, per client address.
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_FAILURE_LIMIT = "queenadmin.dashboard.lockout.failure_limit"
AXES_COOLOFF_TIME = "queenadmin.dashboard.lockout.cool_off"
AXES_LOCKOUT_CALLABLE = "queenadmin.dashboard.lockout.lockout_response"
AXES_CLIENT_IP_CALLABLE = "queenadmin.dashboard.lockout.client_address"
#: Single sign-on's callback: neither refused by a lockout nor counted
#: (the provider has its own; lockout guards the passwords kept here).
AXES_WHITELIST_CALLABLE = "queenadmin.dashboard.lockout.not_counted"
#: A login that succeeds forgets the failures of its account and address.
AXES_RESET_ON_SUCCESS = True
#: Attempts refused during a lockout are not counted: it ends when the page
#: said it would, however often someone tries meanwhile.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
#: queenadmin/admin/logins.py registers the attempts, with an unlock action.
AXES_ENABLE_ADMIN = False
#: Masked in the POST data axes keeps with an attempt (password always is).
AXES_SENSITIVE_PARAMETERS = ["username", "ip_address", "code", "csrfmiddlewaretoken"]
#: No "AXES: BEGIN" line at every start; failures and lockouts are still
#: logged (WARNING, logger ``axes``).
AXES_VERBOSE = False
# Second factors: the name authenticator apps show, and no throttling of
# their own (a wrong code counts as a failed login for axes instead).
OTP_TOTP_ISSUER = "queenadmin"
OTP_TOTP_THROTTLE_FACTOR = 0
OTP_STATIC_THROTTLE_FACTOR = 0

LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/login/"

# 64 MiB, the protocol's request-body limit.
DATA_UPLOAD_MAX_MEMORY_SIZE = 64 * 1024 * 1024 + 1


def _logging() -> dict[str, Any]:
    # QUEENADMIN_LOG_FORMAT (text or json) and QUEENADMIN_LOG_LEVEL: see server/logs.py.
    from queenadmin.server.logs import logging_config

    return logging_config(log_format=_env("LOG_FORMAT"), level=_env("LOG_LEVEL"))


LOGGING = _logging()
