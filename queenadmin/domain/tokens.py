"""API tokens: created once, stored hashed, compared in constant time."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, connection, transaction

from queenadmin.conf import settings
from queenadmin.domain import clock
from queenadmin.domain.audit import Who
from queenadmin.errors import InvalidArgument, NotFound
from queenadmin.models import ApiToken, TokenScope

TOKEN_PREFIX = "qa_"


class TokenExists(InvalidArgument):
    """A token with that name exists already."""

    code = "token_exists"


@dataclass(frozen=True)
class TokenInfo:
    name: str
    prefix: str
    scope: TokenScope
    created_at: datetime
    revoked_at: datetime | None


@dataclass(frozen=True)
class TokenAuth:
    """Who a request's bearer token is, and what it may do (``request.auth``)."""

    name: str
    scope: TokenScope


#: ``request.auth`` when ``QUEENADMIN_OPEN_API`` serves the API without tokens.
OPEN = TokenAuth(name="open", scope=TokenScope.ADMIN)


def scope_of(value: str) -> TokenScope:
    """The scope named ``value``; raise ``InvalidArgument`` for anything else."""
    try:
        return TokenScope(value)
    except ValueError:
        names = ", ".join(TokenScope.values)
        raise InvalidArgument(f"unknown scope {value!r}: a token's scope is one of {names}") from None


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


_cache: dict[str, tuple[float, TokenAuth]] = {}
_cache_lock = threading.Lock()


def token_create_in_txn(*, name: str, scope: str = TokenScope.WRITE, who: Who | None = None) -> str:
    """Create a token named ``name`` and return it; it is never shown again.

    ``scope`` is ``read``, ``write`` (the default) or ``admin``; anything
    else raises ``InvalidArgument``. With ``who`` (an operator's action),
    the audit entry is written in the same transaction (the token's prefix
    only, never the token). Raises ``TokenExists`` when the name is taken
    (revoked tokens included). Runs inside the caller's transaction.
    """
    assert connection.in_atomic_block
    name = name.strip()
    if not name or len(name) > 100:
        raise InvalidArgument("a token name is 1 to 100 characters")
    granted = scope_of(scope)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    now = clock.now()
    try:
        with transaction.atomic():
            ApiToken.objects.create(
                name=name, token_hash=_hash(token), prefix=token[:10], scope=granted, created_at=now
            )
    except IntegrityError as exc:
        raise TokenExists(f"a token named {name!r} exists already") from exc
    if who is not None:
        who.record_in_txn(
            now=now,
            action="token.create",
            target=name,
            after=f"active, scope {granted.value}, prefix {token[:10]}",
        )
    return token


#: ``token_create_in_txn`` as its own transaction: must be the outermost call.
token_create = transaction.atomic(durable=True)(token_create_in_txn)


@transaction.atomic(durable=True)
def token_revoke(*, name: str, who: Who | None = None) -> None:
    """Revoke the token named ``name``; raise ``NotFound`` if there is none.

    With ``who``, the audit entry is written in the same transaction.
    Must be the outermost call.
    """
    now = clock.now()
    updated = ApiToken.objects.filter(name=name, revoked_at__isnull=True).update(revoked_at=now)
    if not updated:
        raise NotFound(f"no active token named {name!r}")
    if who is not None:
        who.record_in_txn(now=now, action="token.revoke", target=name, before="active", after="revoked")
    with _cache_lock:
        _cache.clear()


def token_list() -> list[TokenInfo]:
    return [
        TokenInfo(t.name, t.prefix, TokenScope(t.scope), t.created_at, t.revoked_at)
        for t in ApiToken.objects.order_by("name")
    ]


def _cached(digest: str, now: float) -> TokenAuth | None:
    with _cache_lock:
        hit = _cache.get(digest)
    return hit[1] if hit is not None and hit[0] > now else None


def token_check_cached(token: str) -> TokenAuth | None:
    """``token_check``'s answer when its cache has it, else None; no database.

    Async views try this on the event loop before handing the full check
    to a database thread (a hop that cost a long-poll pop ~10% of its CPU).
    """
    return _cached(_hash(token), time.monotonic()) if token else None


def token_check(token: str) -> TokenAuth | None:
    """Return the name and scope of the active token ``token``, or None.

    The lookup is by SHA-256, and the stored hash is compared again with
    ``hmac.compare_digest``. A positive answer is cached for
    ``QUEENADMIN_TOKEN_CACHE_SECONDS`` (a revocation in another process takes
    effect within that time; one in this process at once).
    """
    if not token:
        return None
    digest = _hash(token)
    ttl = settings.TOKEN_CACHE_SECONDS
    now = time.monotonic()
    cached = _cached(digest, now)
    if cached is not None:
        return cached
    row = (
        ApiToken.objects.filter(token_hash=digest, revoked_at__isnull=True)
        .values_list("token_hash", "name", "scope")
        .first()
    )
    if row is None or not hmac.compare_digest(row[0], digest):
        return None
    auth = TokenAuth(name=row[1], scope=TokenScope(row[2]))
    if ttl > 0:
        with _cache_lock:
            if len(_cache) > 10_000:
                _cache.clear()
            _cache[digest] = (now + ttl, auth)
    return auth
