"""Queen's JWTs: the configuration, the start-up refusals, the check.

Queen's broker verifies a bearer JWT on every route that is not public
(``JWT_*`` variables, ``conf.py``'s JWT block). Here a JWT is one kind of
bearer token beside our own: **a bearer token with exactly two dots that
does not start with ``qa_`` is a JWT** (``looks_like_jwt``). Our tokens
are ``qa_`` and URL-safe base64, which has no dot; a JWT is three base64url
segments joined by dots. So both kinds work at once and neither is ever
tried as the other.

The signature is PyJWT's; the claims are checked here, with Queen's clock
skew on each of ``exp``, ``nbf`` and ``iat`` and Queen's messages
(``TokenRefused``). A token that passes becomes a ``TokenAuth``: its name
``jwt:<sub>``, its ``sub`` as the identity a push stamps
(``producer_sub``), and its roles as a **set of levels**. Queen's levels
are not a ladder: ``write-only`` passes push, timers and ephemeral push
and nothing that reads; ``read-only`` passes reads and no push:

======== ============================================
role     levels passed
======== ============================================
admin    admin, read-write, read-only, write-only
read-write  read-write, read-only, write-only
read-only   read-only
write-only  write-only
======== ============================================

``api/bearer.py`` names the level each route needs (from our scope table
and the write-only routes) and checks it against the set; the token's
``scope`` (the highest rung it fully holds) serves the checks made inside a
route (a KV call that turns out to write). Verified tokens are cached
until ``exp`` (at most a minute) so a call pays one dict read, as our own
tokens do.
"""

from __future__ import annotations

import threading
import time
import warnings
from dataclasses import dataclass
from typing import Any, Literal, get_args

import jwt as pyjwt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from django.core.signals import setting_changed
from jwt.warnings import InsecureKeyLengthWarning

from queenadmin.conf import settings
from queenadmin.domain import names
from queenadmin.domain.identity.jwks import Jwks
from queenadmin.domain.tokens import TOKEN_PREFIX, WRITE_ONLY_LEVELS, TokenAuth
from queenadmin.errors import Forbidden, Unauthorized
from queenadmin.models import TokenScope

# Queen takes an HMAC key of any length; PyJWT warns below 32 bytes on
# every decode (start-up logs it once instead: ``jwt_start_warnings``).
warnings.filterwarnings("ignore", category=InsecureKeyLengthWarning, module=r"jwt\.")

#: Queen's levels (``identity.md``); ``public`` needs no token.
Level = Literal["read-only", "write-only", "read-write", "admin"]
LEVELS: tuple[Level, ...] = get_args(Level)
READ_ONLY, WRITE_ONLY, READ_WRITE, ADMIN = LEVELS

#: The levels each role passes: a set, not a ladder.
ROLE_LEVELS: dict[Level, frozenset[Level]] = {
    ADMIN: frozenset(LEVELS),
    READ_WRITE: frozenset({READ_WRITE, READ_ONLY, WRITE_ONLY}),
    READ_ONLY: frozenset({READ_ONLY}),
    # Our own write-only tokens pass the same routes (``domain/tokens.py``).
    WRITE_ONLY: WRITE_ONLY_LEVELS,
}

HMAC = ("HS256", "HS384", "HS512")
RSA = ("RS256", "RS384", "RS512")
EDDSA = ("EdDSA",)
#: ``JWT_ALGORITHM`` -> the ``alg`` values a token may declare (Queen's sets).
ALGORITHMS: dict[str, tuple[str, ...]] = {
    "HS256": ("HS256",),
    "HS384": ("HS384",),
    "HS512": ("HS512",),
    "RS256": RSA,
    "RS384": ("RS384",),
    "RS512": ("RS512",),
    "EdDSA": EDDSA,
    "auto": HMAC + RSA + EDDSA,
}

#: The longest a verified token is trusted without checking it again.
CACHE_SECONDS = 60.0


class TokenRefused(Unauthorized):
    """Authentication required"""


class InsufficientPermissions(Forbidden):
    """Insufficient permissions"""


class BadConfiguration(Exception):
    """A JWT configuration Queen's broker refuses to start with."""


@dataclass(frozen=True)
class JwtConfig:
    """The JWT settings, parsed once (``jwt_config``)."""

    enabled: bool
    algorithm: str
    #: The ``alg`` values a token may declare.
    algorithms: frozenset[str]
    secret: bytes
    #: The parsed ``JWT_PUBLIC_KEY`` (None: unset).
    public_key: Any
    jwks: Jwks | None
    skew: int
    issuer: str
    audience: str
    role_claim: str
    roles_claim: str
    #: Role value -> Queen's level.
    roles: dict[str, Level]
    skip_exact: frozenset[str]
    skip_prefixes: tuple[str, ...]


def _parse() -> JwtConfig:
    s = settings
    algorithm = s.JWT_ALGORITHM.strip()
    public_key: Any = None
    if s.JWT_PUBLIC_KEY.strip():
        try:
            public_key = load_pem_public_key(s.JWT_PUBLIC_KEY.strip().encode())
        except (ValueError, TypeError) as exc:
            raise BadConfiguration(f"JWT_PUBLIC_KEY is not a PEM public key ({exc})") from None
        if not isinstance(public_key, RSAPublicKey | Ed25519PublicKey):
            raise BadConfiguration("JWT_PUBLIC_KEY is neither an RSA nor an Ed25519 public key")
    url = s.JWT_JWKS_URL.strip()
    jwks = Jwks(url, refresh_seconds=s.JWT_JWKS_REFRESH_INTERVAL, timeout_ms=s.JWT_JWKS_TIMEOUT_MS) if url else None
    skips = [p.strip() for p in s.JWT_SKIP_PATHS.split(",") if p.strip()]
    return JwtConfig(
        enabled=s.JWT_ENABLED,
        algorithm=algorithm,
        algorithms=frozenset(ALGORITHMS.get(algorithm, ())),
        secret=s.JWT_SECRET.encode(),
        public_key=public_key,
        jwks=jwks,
        skew=s.JWT_CLOCK_SKEW,
        issuer=s.JWT_ISSUER,
        audience=s.JWT_AUDIENCE,
        role_claim=s.JWT_ROLES_CLAIM,
        roles_claim=s.JWT_ROLES_ARRAY_CLAIM,
        roles={
            s.JWT_ROLE_ADMIN: ADMIN,
            s.JWT_ROLE_READ_WRITE: READ_WRITE,
            s.JWT_ROLE_READ_ONLY: READ_ONLY,
            s.JWT_ROLE_WRITE_ONLY: WRITE_ONLY,
        },
        skip_exact=frozenset(p for p in skips if len(p) == 1 or not p.endswith("/")),
        skip_prefixes=tuple(p for p in skips if len(p) > 1 and p.endswith("/")),
    )


def _refusal(config: JwtConfig) -> str | None:
    algorithm = config.algorithm
    if algorithm not in ALGORITHMS:
        return f"JWT_ALGORITHM={algorithm!r} is not one of {', '.join(ALGORITHMS)}"
    has_pem, has_jwks = config.public_key is not None, config.jwks is not None
    if algorithm == "auto":
        if not (config.secret or has_pem or has_jwks):
            return "JWT_ALGORITHM=auto needs key material: set JWT_SECRET, JWT_PUBLIC_KEY or JWT_JWKS_URL"
    elif algorithm in HMAC:
        if not config.secret:
            return f"JWT_ALGORITHM={algorithm} needs JWT_SECRET (the HMAC key)"
    elif not (has_pem or has_jwks):
        return f"JWT_ALGORITHM={algorithm} needs JWT_PUBLIC_KEY (a PEM) or JWT_JWKS_URL"
    return None


_config: JwtConfig | None = None
_config_lock = threading.Lock()


def jwt_config() -> JwtConfig:
    """The JWT configuration, parsed at the first call after a settings change.

    Raise ``BadConfiguration`` (naming what is missing or wrong) for one
    Queen's broker would refuse to start with, when JWTs are enabled.
    """
    config = _config
    if config is None:
        with _config_lock:
            config = _load()
    return config


def _load() -> JwtConfig:
    global _config
    if _config is not None:
        return _config
    config = _parse()
    if config.enabled:
        refused = _refusal(config)
        if refused is not None:
            raise BadConfiguration(refused)
    _config = config
    return config


def jwt_start_refusal() -> str | None:
    """Why the server must not start with these JWT settings, or None.

    The refusals are Queen's (``identity.md``): an unknown
    ``JWT_ALGORITHM``, HS* without ``JWT_SECRET``, ``auto`` without any key
    material, RS*/EdDSA with neither ``JWT_PUBLIC_KEY`` nor
    ``JWT_JWKS_URL``; and a ``JWT_PUBLIC_KEY`` that is not a PEM public key.
    None as well when JWTs are off. A JWKS that cannot be fetched yet is no
    refusal (``jwt_prefetch``).
    """
    if not settings.JWT_ENABLED:
        return None
    try:
        jwt_config()
    except BadConfiguration as exc:
        return str(exc)
    return None


def jwt_prefetch() -> str | None:
    """Fetch the JWKS now, when there is one: why it failed, or None.

    Not fatal: the first token that needs a key fetches again.
    """
    config = jwt_config()
    return config.jwks.prefetch() if config.enabled and config.jwks is not None else None


def jwt_start_warnings() -> list[str]:
    """What start-up should say about working but doubtful JWT settings."""
    config = jwt_config()
    if not config.enabled:
        return []
    said = []
    if config.secret and len(config.secret) < 32 and config.algorithms & set(HMAC):
        said.append("JWT_SECRET is shorter than 32 bytes; an HMAC key that short can be guessed")
    return said


def _forget(**kwargs: Any) -> None:
    global _config
    with _config_lock:
        _config = None
    with _cache_lock:
        _cache.clear()


setting_changed.connect(_forget, dispatch_uid="queenadmin.domain.identity.jwt.forget")


def looks_like_jwt(token: str) -> bool:
    """Whether the bearer token is a JWT rather than one of our ``qa_`` tokens."""
    return token.count(".") == 2 and not token.startswith(TOKEN_PREFIX)


def jwt_skips(path: str) -> bool:
    """Whether ``JWT_SKIP_PATHS`` serves ``path`` without a token (JWTs on)."""
    config = jwt_config()
    return config.enabled and (path in config.skip_exact or path.startswith(config.skip_prefixes))


@dataclass(frozen=True)
class Identity:
    """What a verified JWT says of its bearer."""

    sub: str | None
    levels: frozenset[Level]


_cache: dict[str, tuple[float, TokenAuth]] = {}
_cache_lock = threading.Lock()


def jwt_check(token: str) -> TokenAuth:
    """The caller a JWT names; raise ``TokenRefused`` with Queen's message.

    The messages: ``Bad token header``, ``Unsupported token algorithm``,
    ``Invalid token signature``, ``Unknown key ID``, ``Token has expired``,
    ``Token not yet valid``, ``Token issued in the future``, ``Invalid
    token issuer``, ``Invalid token audience``. A verified token is cached
    until its ``exp`` (with the skew), at most ``CACHE_SECONDS``.
    """
    now = time.time()
    hit = _cache.get(token)
    if hit is not None and hit[0] > now:
        return hit[1]
    config = jwt_config()
    claims = _verified_claims(config, token)
    expires = _check_claims(config, claims, now)
    identity = identity_of(config, claims)
    auth = auth_of(identity)
    with _cache_lock:
        if len(_cache) > 10_000:
            _cache.clear()
        _cache[token] = (min(expires, now + CACHE_SECONDS), auth)
    return auth


def jwt_check_cached(token: str) -> TokenAuth | None:
    """``jwt_check``'s answer when its cache holds the token, else None (no fetch)."""
    hit = _cache.get(token)
    return hit[1] if hit is not None and hit[0] > time.time() else None


def _verified_claims(config: JwtConfig, token: str) -> dict[str, Any]:
    try:
        header = pyjwt.get_unverified_header(token)
    except pyjwt.DecodeError:
        raise TokenRefused("Bad token header") from None
    alg = header.get("alg")
    if not isinstance(alg, str) or alg not in config.algorithms:
        raise TokenRefused("Unsupported token algorithm")
    key = _key_for(config, alg, header.get("kid"))
    try:
        claims = pyjwt.decode(
            token,
            key,
            algorithms=[alg],
            options={
                "verify_signature": True,
                "verify_exp": False,
                "verify_nbf": False,
                "verify_iat": False,
                "verify_aud": False,
                "verify_iss": False,
            },
        )
    except (pyjwt.InvalidSignatureError, pyjwt.InvalidKeyError):
        raise TokenRefused("Invalid token signature") from None
    except pyjwt.DecodeError:
        raise TokenRefused("Bad token header") from None
    if not isinstance(claims, dict):
        raise TokenRefused("Bad token header")
    return claims


def _key_for(config: JwtConfig, alg: str, kid: Any) -> Any:
    if alg in HMAC:
        if not config.secret:
            raise TokenRefused("Invalid token signature")
        return config.secret
    wanted = Ed25519PublicKey if alg in EDDSA else RSAPublicKey
    if config.public_key is not None:
        if not isinstance(config.public_key, wanted):
            raise TokenRefused("Invalid token signature")
        return config.public_key
    if config.jwks is None:
        raise TokenRefused("Invalid token signature")
    key = config.jwks.key(kid if isinstance(kid, str) else None)
    if key is None:
        raise TokenRefused("Unknown key ID")
    if not isinstance(key, wanted):
        raise TokenRefused("Invalid token signature")
    return key


def _number(claims: dict[str, Any], name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TokenRefused("Bad token header")
    return float(value)


def _check_claims(config: JwtConfig, claims: dict[str, Any], now: float) -> float:
    """Check ``exp``, ``nbf``, ``iat``, ``iss``, ``aud``; return until when the token holds."""
    skew = config.skew
    exp, nbf, iat = _number(claims, "exp"), _number(claims, "nbf"), _number(claims, "iat")
    if exp is not None and now > exp + skew:
        raise TokenRefused("Token has expired")
    if nbf is not None and now + skew < nbf:
        raise TokenRefused("Token not yet valid")
    if iat is not None and iat > now + skew:
        raise TokenRefused("Token issued in the future")
    if config.issuer and claims.get("iss") != config.issuer:
        raise TokenRefused("Invalid token issuer")
    if config.audience:
        aud = claims.get("aud")
        auds = aud if isinstance(aud, list) else [aud]
        if config.audience not in auds:
            raise TokenRefused("Invalid token audience")
    # A token without exp never expires (Queen's docs call that a foot-gun).
    return float("inf") if exp is None else exp + skew


def identity_of(config: JwtConfig, claims: dict[str, Any]) -> Identity:
    """The ``sub`` and the levels of the roles the claims name."""
    roles: list[Any] = []
    role = claims.get(config.role_claim)
    if isinstance(role, str):
        roles.append(role)
    many = claims.get(config.roles_claim)
    if isinstance(many, list):
        roles.extend(many)
    levels: frozenset[Level] = frozenset()
    for value in roles:
        level = config.roles.get(value) if isinstance(value, str) else None
        if level is not None:
            levels |= ROLE_LEVELS[level]
    sub = claims.get("sub")
    return Identity(sub=None if sub is None else str(sub), levels=levels)


def auth_of(identity: Identity) -> TokenAuth:
    """The ``TokenAuth`` of a verified JWT (``request.auth``).

    Its ``scope`` is the highest rung of our ladder its levels hold (for
    the checks inside a route); its ``levels`` decide which routes it
    passes (``api/bearer.py``).
    """
    levels = identity.levels
    if ADMIN in levels:
        scope = TokenScope.ADMIN
    elif READ_WRITE in levels or WRITE_ONLY in levels:
        scope = TokenScope.WRITE
    else:
        scope = TokenScope.READ
    return TokenAuth(
        name=f"jwt:{identity.sub or '-'}",
        scope=scope,
        producer_sub=None if identity.sub is None else names.identity_label(identity.sub),
        levels=levels,
    )
