"""API tokens: created once, stored hashed, compared in constant time.

A token may carry **grants** ``KIND:PATTERN=SCOPE`` that limit it to some
KV namespaces, queues, lock names or timer queues (docs/security.md,
"Per-resource token grants"). Grants only add; a resource no grant covers is
out of reach; a token without grants reaches the whole store. The KV rows
of locks (``queen-locks``, ``<name>#<slot>``) count as the lock ``<name>``.

**No account mints more power than it has.** Whoever makes a token or sets
its grants is a ``Maker``: superusers and the host's shell (``HOST``) give
anything; any other account at most ``write``, with grants that name what
the token reaches (none without grants, none on ``*``), else
``BeyondReach``, audited. A token made by an account is revoked when the
account is deleted or deactivated (``token_revoke_made_by``): its maker saw
the secret.

A token's scope is a rung of ``TokenScope``'s ladder (read, write, admin),
or Queen's **write-only** level (``WRITE_ONLY``): such a token carries the
levels of a JWT of that role (``WRITE_ONLY_LEVELS``), so the API's one
level check lets it push, schedule timers and push ephemeral messages, and
call nothing that reads; inside a route, for its grants and for its maker
it stands on the ``write`` rung (``rung_of``).
"""

from __future__ import annotations

import functools
import hmac
import secrets
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Literal, get_args

from django.db import IntegrityError, connection, transaction
from django.db.models import Q

from queenadmin.conf import settings
from queenadmin.domain import clock, names
from queenadmin.domain.audit import Who
from queenadmin.domain.firstrun import first_run_settle
from queenadmin.errors import Forbidden, InvalidArgument, NotFound
from queenadmin.models import WRITE_ONLY_SCOPE, ApiToken, TokenScope

TOKEN_PREFIX = "qa_"

#: What a grant names: KV namespaces, queues, lock names, timer queues.
Kind = Literal["kv", "queue", "lock", "timer"]
KINDS: tuple[Kind, ...] = get_args(Kind)
#: The KV namespace that holds the locks' permits (``kv.LOCKS_NAMESPACE``).
LOCKS_NAMESPACE = "queen-locks"


class TokenExists(InvalidArgument):
    """A token with that name exists already."""

    code = "token_exists"


@dataclass(frozen=True)
class TokenInfo:
    name: str
    prefix: str
    #: read, write-only, write or admin (``ApiToken.scope``).
    scope: str
    created_at: datetime
    revoked_at: datetime | None
    #: The grants, one a line; empty for a token that reaches the whole store.
    grants: str = ""
    #: Who made it (``made_by_text``); empty when the host's shell did, or before makers were recorded.
    made_by: str = ""


class NotGranted(Forbidden):
    """No grant of the bearer token covers a resource the call names."""

    code = "forbidden"


@dataclass(frozen=True)
class Grant:
    """One grant: ``scope`` on the names of ``kind`` that ``pattern`` covers."""

    kind: Kind | Literal["*"]
    #: An exact name, or a prefix followed by ``*``.
    pattern: str
    scope: TokenScope

    def __str__(self) -> str:
        if self.kind == "*" and self.pattern == "*":
            return f"*={self.scope.value}"
        return f"{self.kind}:{self.pattern}={self.scope.value}"

    @property
    def prefix(self) -> str | None:
        """The prefix a pattern ending in ``*`` covers; None for an exact name."""
        return self.pattern[:-1] if self.pattern.endswith("*") else None


_KIND_NAMES = ", ".join(KINDS)


def grant_parse(text: str) -> Grant:
    """Parse one grant, ``KIND:PATTERN=SCOPE`` or ``*=SCOPE``.

    Raise ``InvalidArgument`` saying what is wrong with it.
    """
    text = text.strip()
    left, eq, scope_text = text.rpartition("=")
    if not eq or not left:
        raise InvalidArgument(f"grant {text!r}: write KIND:PATTERN=SCOPE, such as queue:orders.*=write")
    scope = scope_of(scope_text.strip())
    kind_text, colon, pattern = left.partition(":")
    if not colon:
        if left.strip() != "*":
            raise InvalidArgument(f"grant {text!r}: name the kind, such as queue:{left}={scope.value}")
        kind_text, pattern = "*", "*"
    kind_text, pattern = kind_text.strip(), pattern.strip()
    if kind_text != "*" and kind_text not in KINDS:
        raise InvalidArgument(f"grant {text!r}: the kind is one of {_KIND_NAMES} or *")
    if not pattern or "*" in pattern[:-1] or any(c.isspace() for c in pattern):
        raise InvalidArgument(
            f"grant {text!r}: the pattern is a name, or a prefix ending in * (orders.*); no spaces, one * at the end"
        )
    return Grant(kind=kind_text, pattern=pattern, scope=scope)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Grants:
    """A token's grants, indexed for the check each operation makes."""

    grants: tuple[Grant, ...]
    #: kind -> exact name -> the highest scope's rank granted on it.
    _exact: dict[str, dict[str, int]] = field(default_factory=dict, repr=False, compare=False)
    #: kind -> (prefix, rank) of each prefix grant.
    _prefixes: dict[str, tuple[tuple[str, int], ...]] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        for kind in KINDS:
            exact: dict[str, int] = {}
            prefixes: list[tuple[str, int]] = []
            for grant in self.grants:
                if grant.kind not in (kind, "*"):
                    continue
                rank = _RANKS[grant.scope]
                prefix = grant.prefix
                if prefix is None:
                    exact[grant.pattern] = max(rank, exact.get(grant.pattern, -1))
                else:
                    prefixes.append((prefix, rank))
            self._exact[kind] = exact
            self._prefixes[kind] = tuple(prefixes)

    def rank(self, kind: Kind, name: str) -> int:
        """The rank of the highest scope granted on ``name`` (-1: none)."""
        best = self._exact[kind].get(name, -1)
        for prefix, rank in self._prefixes[kind]:
            if rank > best and name.startswith(prefix):
                best = rank
        return best

    def allows(self, kind: Kind, name: str, need: TokenScope) -> bool:
        """Whether a grant gives ``need`` (or more) on ``name``."""
        return self.rank(kind, name) >= _RANKS[need]

    def allows_prefix(self, kind: Kind, prefix: str, need: TokenScope) -> bool:
        """Whether a grant gives ``need`` on every name that starts with ``prefix``."""
        return any(prefix.startswith(p) and rank >= _RANKS[need] for p, rank in self._prefixes[kind])

    def allows_every(self, kind: Kind, need: TokenScope) -> bool:
        """Whether a grant gives ``need`` on every name of ``kind`` (a ``*`` pattern)."""
        return any(p == "" and rank >= _RANKS[need] for p, rank in self._prefixes[kind])

    def require(self, kind: Kind, name: str, need: TokenScope) -> None:
        """Raise ``NotGranted`` unless a grant gives ``need`` on ``name``."""
        if self.rank(kind, name) < _RANKS[need]:
            raise NotGranted(f"no grant of this token gives {need.value} on {kind} {name!r}")

    def require_every(self, kind: Kind, need: TokenScope) -> None:
        """Raise ``NotGranted`` unless a grant gives ``need`` on every name of ``kind``."""
        if not self.allows_every(kind, need):
            raise NotGranted(
                f"the call reaches every {kind}: it needs a grant of {need.value} on {kind}:* for this token"
            )

    def __str__(self) -> str:
        return "\n".join(str(g) for g in self.grants)


_RANKS = {scope: rank for rank, scope in enumerate(TokenScope)}


def kv_resource(namespace: str, key: str | None = None) -> tuple[Kind, str]:
    """What a KV operation on ``namespace`` reaches: a namespace, or a lock for its permit rows."""
    if namespace == LOCKS_NAMESPACE and key is not None:
        return "lock", key.rpartition("#")[0] or key
    return "kv", namespace


def grants_parse(lines: Iterable[str], *, ceiling: TokenScope | None = None) -> Grants | None:
    """Parse grants, one a line (blank lines skipped); None when there are none.

    With ``ceiling`` (the token's scope), a grant above it raises
    ``InvalidArgument``, as does any grant ``grant_parse`` refuses.
    """
    parsed: list[Grant] = []
    for line in lines:
        if not line.strip():
            continue
        grant = grant_parse(line)
        if ceiling is not None and not ceiling.covers(grant.scope):
            raise InvalidArgument(f"grant {str(grant)!r} gives more than the token's scope, {ceiling.value}")
        if grant not in parsed:
            parsed.append(grant)
    return Grants(tuple(parsed)) if parsed else None


@functools.lru_cache(maxsize=256)
def _stored_grants(text: str) -> Grants | None:
    # Parsed once per text, not at every cache miss (~0.2 ms for six grants).
    return grants_parse(text.splitlines())


@dataclass(frozen=True)
class TokenAuth:
    """Who a request's bearer token is, and what it may do (``request.auth``)."""

    name: str
    scope: TokenScope
    #: None: the whole store (a token without grants).
    grants: Grants | None = None
    #: Who a push by this caller names as its producer (``producerSub``):
    #: our token's name, a JWT's ``sub`` (each as ``names.identity_label``
    #: makes it); None without either (open mode).
    producer_sub: str | None = None
    #: The Queen levels of a JWT (``domain/identity/jwt.py``) or of our
    #: write-only token (``WRITE_ONLY_LEVELS``), which decide the routes it
    #: passes (``api/bearer.py``); None: our token, whose ``scope`` decides.
    levels: frozenset[str] | None = None


#: Queen's write-only level (``models.WRITE_ONLY_SCOPE``): our token's scope
#: and a JWT's level share the name.
WRITE_ONLY: Final = WRITE_ONLY_SCOPE
#: The levels of our write-only token, which are those of a JWT of Queen's
#: write-only role (``identity.jwt.ROLE_LEVELS`` takes them from here): the
#: bearer check lets both through the same routes, ``api/routes.py``'s
#: ``WRITE_ONLY`` (push, timers, ephemeral push), and nothing that reads.
WRITE_ONLY_LEVELS: Final[frozenset[Literal["write-only"]]] = frozenset({WRITE_ONLY})


#: ``request.auth`` when ``QUEENADMIN_OPEN_API`` serves the API without tokens.
OPEN = TokenAuth(name="open", scope=TokenScope.ADMIN)


_SCOPE_NAMES: Final = ", ".join(TokenScope.values)


def scope_of(value: str) -> TokenScope:
    """The rung of ``TokenScope`` named ``value`` (a grant's scope, a ceiling);
    raise ``InvalidArgument`` for anything else."""
    try:
        return TokenScope(value)
    except ValueError:
        raise InvalidArgument(f"unknown scope {value!r}: a token's scope is one of {_SCOPE_NAMES}") from None


def token_scope_of(value: str) -> str:
    """The token scope named ``value``: a rung of ``TokenScope`` or
    ``WRITE_ONLY``; raise ``InvalidArgument`` for anything else."""
    if value == WRITE_ONLY:
        return WRITE_ONLY
    try:
        return TokenScope(value).value
    except ValueError:
        raise InvalidArgument(
            f"unknown scope {value!r}: a token's scope is one of {_SCOPE_NAMES}, or {WRITE_ONLY} "
            "(push, timers and ephemeral push; nothing that reads)"
        ) from None


def rung_of(scope: str) -> TokenScope:
    """The rung of ``TokenScope`` a token of ``scope`` stands on: ``write`` for
    ``WRITE_ONLY`` (the checks inside a route, the ceiling of its grants, what
    its maker gives), else the rung of that name. Raises as ``token_scope_of``."""
    return TokenScope.WRITE if scope == WRITE_ONLY else scope_of(token_scope_of(scope))


_cache: dict[str, tuple[float, TokenAuth]] = {}
_cache_lock = threading.Lock()


class BeyondReach(Forbidden):
    """The token would get more than the account making it may give."""

    code = "forbidden"


@dataclass(frozen=True)
class Maker:
    """Who makes a token or sets its grants, and so the most it may give.

    ``HOST`` (the host's shell) and superusers give anything; any other
    account at most ``write``, in grants that name what the token reaches
    (the module's docstring says why that is an operator's reach).
    """

    #: The acting account's primary key; None for the host's shell.
    account_id: int | None = None
    #: The account's user name; empty for the host's shell.
    account_name: str = ""
    #: Any scope and any grants (superusers, the host's shell).
    unlimited: bool = True


#: The host's shell (``manage.py``, ``serve``'s first run): whoever runs it
#: can read and write the database directly, so it may make any token, and
#: the token names no account.
HOST: Final = Maker()


def maker_of(user: Any) -> Maker:
    """The ``Maker`` a signed-in account is: unlimited if it is an active superuser."""
    return Maker(
        account_id=user.pk,
        account_name=user.get_username(),
        unlimited=bool(user.is_active and user.is_superuser),
    )


#: The most an account that is not a superuser gives: a scope, a grant's scope.
MAKER_CEILING: Final = TokenScope.WRITE
#: What ``token_refusal`` is told about a token being made (it had nothing).
NEW: Final = "new"


def token_refusal(
    *, by: Maker, scope: TokenScope, grants: Grants | None, before: Grants | Literal["new"] | None = NEW
) -> str | None:
    """Why ``by`` may not give a token of ``scope`` these ``grants`` (None:
    the whole store), or None when it may. Reads nothing, writes nothing.

    ``before`` is what the token holds until now (None: the whole store),
    or ``NEW`` for a token being made. A grant the token holds already may
    stay, whoever gave it: keeping it mints nothing, and an operator can
    still narrow a superuser's token. Dropping every grant widens the token
    to the whole store, unless it reached that already.
    """
    if by.unlimited:
        return None
    maker = by.account_name or "this account"
    if before == NEW and not MAKER_CEILING.covers(scope):
        return (
            f"only a superuser may make a token of {scope.value} scope; "
            f"{maker} may make read, {WRITE_ONLY} and {MAKER_CEILING.value} tokens"
        )
    if grants is None:
        if before is None:
            return None
        return (
            "a token without grants reaches the whole store, which only a superuser may give: "
            f"give it grants that name what it needs, such as queue:orders.*={MAKER_CEILING.value}"
        )
    kept = set(before.grants) if isinstance(before, Grants) else set()
    for grant in grants.grants:
        if grant in kept:
            continue
        if grant.pattern == "*":
            kinds, kind = ("every kind", "queue") if grant.kind == "*" else (grant.kind, grant.kind)
            return (
                f"grant {str(grant)!r} covers every name of {kinds}, which only a superuser may give: "
                f"name a prefix instead, such as {kind}:orders.*={grant.scope.value}"
            )
        if not MAKER_CEILING.covers(grant.scope):
            return (
                f"grant {str(grant)!r} gives {grant.scope.value} scope, which only a superuser may give; "
                f"{maker} may give read and {MAKER_CEILING.value}"
            )
    return None


def _asked(scope: str, grants: Grants | None) -> str:
    return f"scope {scope}, {_grants_text(grants)}"


def _refused_in_txn(*, who: Who | None, name: str, asked: str, refused: str | None) -> str | None:
    if refused is not None and who is not None:
        who.record_in_txn(
            now=clock.now(), action="token.refuse", target=name, before=asked, after=f"refused: {refused}"
        )
    return refused


def token_create_refusal_in_txn(
    *, name: str, by: Maker, scope: str = TokenScope.WRITE, grants: Sequence[str] = (), who: Who | None = None
) -> str | None:
    """Why ``by`` may not make this token (``token_refusal``), recorded with
    ``who`` (``token.refuse``); None when it may, and nothing is written.

    A form asks this first to show the refusal as its error; the audit
    entry commits with the caller's transaction, which must go on. Raises
    ``InvalidArgument`` as ``token_create_in_txn`` does for a bad scope or
    grant. Runs inside the caller's transaction.
    """
    assert connection.in_atomic_block
    granted = token_scope_of(scope)
    limits = grants_parse(grants, ceiling=rung_of(granted))
    refused = token_refusal(by=by, scope=rung_of(granted), grants=limits)
    return _refused_in_txn(who=who, name=name.strip(), asked=_asked(granted, limits), refused=refused)


def token_create_in_txn(
    *, name: str, by: Maker, scope: str = TokenScope.WRITE, grants: Sequence[str] = (), who: Who | None = None
) -> str:
    """Create a token named ``name`` and return it; it is never shown again.

    ``scope`` is ``read``, ``write`` (the default), ``admin`` or
    ``write-only`` (``WRITE_ONLY``); anything else raises ``InvalidArgument``.
    ``grants`` limit the token to some resources (the module's docstring has
    the syntax); none means the whole store. A grant that does not parse, or
    gives more than ``scope`` (``rung_of``), raises ``InvalidArgument``. ``by`` makes it: a token beyond its reach raises
    ``BeyondReach`` (``token_create_refusal_in_txn`` records why), and an
    account is kept as the token's maker. With ``who`` (an operator's
    action), the audit entry is written in the same transaction (the
    token's prefix only, never the token). Raises ``TokenExists`` when the
    name is taken (revoked tokens included). Runs inside the caller's
    transaction.
    """
    assert connection.in_atomic_block
    name = name.strip()
    if not name or len(name) > 100:
        raise InvalidArgument("a token name is 1 to 100 characters")
    granted = token_scope_of(scope)
    limits = grants_parse(grants, ceiling=rung_of(granted))
    refused = token_refusal(by=by, scope=rung_of(granted), grants=limits)
    if refused is not None:
        raise BeyondReach(refused)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    now = clock.now()
    try:
        with transaction.atomic():
            ApiToken.objects.create(
                name=name,
                token_hash=ApiToken.hash_of(token),
                prefix=token[:10],
                scope=granted,
                created_at=now,
                grants="" if limits is None else str(limits),
                created_by_id=by.account_id,
                created_by_name=by.account_name,
            )
    except IntegrityError as exc:
        raise TokenExists(f"a token named {name!r} exists already") from exc
    if who is not None:
        # The maker, when the one acting names another account (``apitoken --by``).
        maker = f", made by account {by.account_name}" if by.account_name and by.account_name != who.actor else ""
        who.record_in_txn(
            now=now,
            action="token.create",
            target=name,
            after=f"active, scope {granted}, prefix {token[:10]}, {_grants_text(limits)}{maker}",
        )
    return token


def _grants_text(grants: Grants | None) -> str:
    return "no grants (the whole store)" if grants is None else "grants " + ", ".join(map(str, grants.grants))


def token_create(
    *, name: str, by: Maker, scope: str = TokenScope.WRITE, grants: Sequence[str] = (), who: Who | None = None
) -> str:
    """``token_create_in_txn`` as its own transaction: must be the outermost call.

    A token beyond ``by``'s reach is refused before anything is made: the
    refusal is recorded (with ``who``) and ``BeyondReach`` raised.
    """
    with transaction.atomic(durable=True):
        refused = token_create_refusal_in_txn(name=name, by=by, scope=scope, grants=grants, who=who)
        if refused is None:
            return token_create_in_txn(name=name, by=by, scope=scope, grants=grants, who=who)
    raise BeyondReach(refused)


@transaction.atomic(durable=True)
def token_revoke(*, name: str, who: Who | None = None) -> None:
    """Revoke the token named ``name``; raise ``NotFound`` if there is none.

    With ``who``, the audit entry is written in the same transaction.
    Must be the outermost call. Revoking the token of the first-run notes
    removes them after the commit (``domain.firstrun``).
    """
    now = clock.now()
    updated = ApiToken.objects.filter(name=name, revoked_at__isnull=True).update(revoked_at=now)
    if not updated:
        raise NotFound(f"no active token named {name!r}")
    if who is not None:
        who.record_in_txn(now=now, action="token.revoke", target=name, before="active", after="revoked")
    with _cache_lock:
        _cache.clear()
    transaction.on_commit(first_run_settle, robust=True)


@transaction.atomic
def token_revoke_made_by(*, account_id: int, who: Who) -> list[str]:
    """Revoke every active token the account ``account_id`` made; return
    their names (none: nothing is written).

    Each is recorded with ``who`` (``token.revoke``). The maker saw each
    secret when it was made, so its tokens go with the account: this runs
    when the account is deleted or deactivated (``queenadmin/accounts.py``).
    Joins the caller's transaction when there is one (the account's delete
    or save), so the tokens go if and only if the account does, and opens
    its own otherwise.
    """
    now = clock.now()
    rows = ApiToken.objects.filter(created_by_id=account_id, revoked_at__isnull=True)
    names = list(rows.select_for_update().order_by("pk").values_list("name", flat=True))
    if not names:
        return []
    rows.filter(name__in=names).update(revoked_at=now)
    for name in names:
        who.record_in_txn(now=now, action="token.revoke", target=name, before="active", after="revoked")
    _forget_cached()
    transaction.on_commit(_forget_cached)
    return names


def made_by_text(token: ApiToken) -> str:
    """Who made ``token``, for lists: ``otto``, ``otto (inactive)`` or
    ``otto (account deleted)``; empty for the host's shell and for tokens
    made before makers were recorded. Select ``created_by`` with it."""
    account = token.created_by
    if account is None:
        return f"{token.created_by_name} (account deleted)" if token.created_by_name else ""
    name = account.get_username()
    return name if account.is_active else f"{name} (inactive)"


def _active_grants(name: str, *, lock: bool = False) -> tuple[TokenScope, str]:
    rows = ApiToken.objects.filter(name=name, revoked_at__isnull=True)
    if lock:
        rows = rows.select_for_update()
    row = rows.values_list("scope", "grants").first()
    if row is None:
        raise NotFound(f"no active token named {name!r}")
    return rung_of(row[0]), row[1]


def token_grants_refusal_in_txn(*, name: str, grants: Sequence[str], by: Maker, who: Who | None = None) -> str | None:
    """Why ``by`` may not give the active token ``name`` these grants
    (``token_refusal``: widening a token is minting too), recorded with
    ``who`` (``token.refuse``); None when it may, and nothing is written.

    Raises ``NotFound`` and ``InvalidArgument`` as
    ``token_grants_set_in_txn`` does. Runs inside the caller's transaction.
    """
    assert connection.in_atomic_block
    scope, held = _active_grants(name)
    limits = grants_parse(grants, ceiling=scope)
    before = grants_parse(held.splitlines())
    refused = token_refusal(by=by, scope=scope, grants=limits, before=before)
    asked = f"{_grants_text(before)}, asked for {_grants_text(limits)}"
    return _refused_in_txn(who=who, name=name, asked=asked, refused=refused)


def token_grants_set_in_txn(*, name: str, grants: Sequence[str], by: Maker, who: Who | None = None) -> Grants | None:
    """Replace the grants of the active token ``name``; return them (None: none, the whole store).

    Raise ``NotFound`` when there is no such active token, ``InvalidArgument``
    for a grant that does not parse or gives more than the token's scope,
    ``BeyondReach`` for grants ``by`` may not give
    (``token_grants_refusal_in_txn`` records why). With ``who``, the audit
    entry is written in the same transaction. Takes effect in this process
    at once, in others within ``QUEENADMIN_TOKEN_CACHE_SECONDS``. Runs
    inside the caller's transaction.
    """
    assert connection.in_atomic_block
    # Locked (and compared again below): what the token holds decides
    # which grants may stay.
    scope, held = _active_grants(name, lock=True)
    limits = grants_parse(grants, ceiling=scope)
    before = grants_parse(held.splitlines())
    refused = token_refusal(by=by, scope=scope, grants=limits, before=before)
    if refused is not None:
        raise BeyondReach(refused)
    text = "" if limits is None else str(limits)
    if not ApiToken.objects.filter(name=name, revoked_at__isnull=True, grants=held).update(grants=text):
        raise NotFound(f"no active token named {name!r} with the grants it had a moment ago: look again")
    if who is not None and text != held:
        who.record_in_txn(
            now=clock.now(), action="token.grants", target=name, before=_grants_text(before), after=_grants_text(limits)
        )
    # Now for this transaction's own reads, and after the commit again: a
    # request in between may have cached the grants from before.
    _forget_cached()
    transaction.on_commit(_forget_cached)
    return limits


def token_grants_set(*, name: str, grants: Sequence[str], by: Maker, who: Who | None = None) -> Grants | None:
    """``token_grants_set_in_txn`` as its own transaction: must be the outermost call.

    Grants beyond ``by``'s reach are refused before anything changes: the
    refusal is recorded (with ``who``) and ``BeyondReach`` raised.
    """
    with transaction.atomic(durable=True):
        refused = token_grants_refusal_in_txn(name=name, by=by, grants=grants, who=who)
        if refused is None:
            return token_grants_set_in_txn(name=name, grants=grants, by=by, who=who)
    raise BeyondReach(refused)


def _forget_cached() -> None:
    with _cache_lock:
        _cache.clear()


def token_list() -> list[TokenInfo]:
    return [
        TokenInfo(t.name, t.prefix, t.scope, t.created_at, t.revoked_at, t.grants, made_by_text(t))
        for t in ApiToken.objects.select_related("created_by").order_by("name")
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
    return _cached(ApiToken.hash_of(token), time.monotonic()) if token else None


def token_check(token: str) -> TokenAuth | None:
    """Return the name, scope and grants of the active token ``token``, or None.

    A token whose maker's account is inactive or gone counts as none.

    The lookup is by SHA-256, and the stored hash is compared again with
    ``hmac.compare_digest``. A positive answer is cached for
    ``QUEENADMIN_TOKEN_CACHE_SECONDS`` (a revocation in another process takes
    effect within that time; one in this process at once).
    """
    if not token:
        return None
    digest = ApiToken.hash_of(token)
    ttl = settings.TOKEN_CACHE_SECONDS
    now = time.monotonic()
    cached = _cached(digest, now)
    if cached is not None:
        return cached
    row = (
        ApiToken.objects.filter(token_hash=digest, revoked_at__isnull=True)
        # Revoked with their account already (``queenadmin/accounts.py``);
        # an account made inactive without a save (a bulk update) revoked
        # nothing, so its tokens are refused here while it stays inactive.
        # A maker's name without its account: the account is gone.
        .filter(Q(created_by__is_active=True) | Q(created_by__isnull=True, created_by_name=""))
        .values_list("token_hash", "name", "scope", "grants")
        .first()
    )
    if row is None or not hmac.compare_digest(row[0], digest):
        return None
    auth = TokenAuth(
        name=row[1],
        scope=rung_of(row[2]),
        grants=_stored_grants(row[3]),
        producer_sub=names.identity_label(row[1]),
        levels=WRITE_ONLY_LEVELS if row[2] == WRITE_ONLY else None,
    )
    if ttl > 0:
        with _cache_lock:
            if len(_cache) > 10_000:
                _cache.clear()
            _cache[digest] = (now + ttl, auth)
    return auth
