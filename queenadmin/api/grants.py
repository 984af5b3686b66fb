"""How each /api/v1 route meets a token's grants, and the checks.

A token without grants (``request.auth.grants is None``) reaches the whole
store and every check here returns at once: one attribute read and a
comparison per operation. A token with grants (``domain/tokens.py``) meets
one of four rules per route:

- ``named``: the call names its resources (a KV namespace, a lock, a timer
  queue, a queue, or a partition, lease or message, whose queue is looked
  up); every one is checked before anything is written, and one that no
  grant covers refuses the whole call, 403, in the auth envelope
  (``{"error": "forbidden", "code": "forbidden", "detail"}``);
- ``filtered``: the call lists across resources and answers only the rows
  the grants let it read (never a 403 for what it leaves out);
- ``store-wide``: the call reaches every queue at once (a count over all of
  them, a discovery pop, a group on every queue); it needs a grant on
  ``queue:*`` at the scope, else 403;
- ``none``: the call reads no resource.

Each route's rule is its row of ``routes.ROUTES`` (beside its scope);
``scopes.ScopedRouter`` refuses a route without a row, and puts the rule in
the OpenAPI document (``x-token-grants``); ``openapi.complete``
documents the 403 of every rule that can refuse.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from django.http import HttpRequest

from queenadmin.api import routes
from queenadmin.api.routes import EVERY, NAMED, Rule
from queenadmin.domain import kv, locks, timers, tokens
from queenadmin.domain.queues import owners
from queenadmin.domain.tokens import Grants, Kind
from queenadmin.models import TokenScope

READ, WRITE, ADMIN = TokenScope.READ, TokenScope.WRITE, TokenScope.ADMIN

#: Rules that can answer 403 (``openapi.complete`` documents it).
REFUSING: frozenset[str] = frozenset({NAMED, EVERY})
OPENAPI_KEY = "x-token-grants"

#: "METHOD /path" -> how the route meets a token's grants (``routes.ROUTES``).
ROUTES: dict[str, Rule] = {route: row.rule for route, row in routes.ROUTES.items()}

T = TypeVar("T")


def limits(request: HttpRequest) -> Grants | None:
    """The caller's grants; None for a token that reaches the whole store."""
    grants: Grants | None = request.auth.grants  # type: ignore[attr-defined]
    return grants


def require(request: HttpRequest, kind: Kind, name: str, need: TokenScope) -> None:
    """Raise ``NotGranted`` unless the caller may ``need`` the ``kind`` ``name``."""
    grants = limits(request)
    if grants is not None:
        grants.require(kind, name, need)


def require_every(request: HttpRequest, kind: Kind, need: TokenScope) -> None:
    """A store-wide call: raise ``NotGranted`` unless the caller may ``need`` every ``kind``."""
    grants = limits(request)
    if grants is not None:
        grants.require_every(kind, need)


def readable(request: HttpRequest, kind: Kind, rows: Sequence[T], name: Callable[[T], str | None]) -> Sequence[T]:
    """The rows whose ``kind`` named ``name(row)`` the caller may read (all of them without grants)."""
    grants = limits(request)
    if grants is None:
        return rows
    return [row for row in rows if (n := name(row)) is not None and grants.allows(kind, n, READ)]


def may(request: HttpRequest, kind: Kind, name: str, need: TokenScope) -> bool:
    """Whether the caller's scope and grants both give ``need`` on the ``kind`` ``name``."""
    auth: tokens.TokenAuth = request.auth  # type: ignore[attr-defined]
    return auth.scope.covers(need) and (auth.grants is None or auth.grants.allows(kind, name, need))


def sees_permit(request: HttpRequest) -> Callable[[str], bool]:
    """Whether the caller sees a lock permit's owner and token, by the permit's key.

    Only a caller who may write the lock does (they are what a renew or
    release needs); any other reader sees fingerprints (``masking``).
    """
    return lambda key: may(request, "lock", tokens.kv_resource(tokens.LOCKS_NAMESPACE, key)[1], WRITE)


def may_read_every(request: HttpRequest, kind: Kind) -> bool:
    grants = limits(request)
    return grants is None or grants.allows_every(kind, READ)


# -- the operations of a batch or a transaction ---------------------------------------

#: KV commands that change a key. ``check`` is not one: it writes nothing
#: and tells no more than a ``get`` (the rate limit still counts it a write).
KV_CHANGES = (kv.KVPut, kv.KVDelete, kv.KVIncr)


def require_kv(grants: Grants, ops: Iterable[kv.KVOp]) -> None:
    for op in ops:
        # A check of a lock permit tells its version, the lock's token: it is a holder's guard.
        permit_check = isinstance(op, kv.KVCheck) and op.namespace == tokens.LOCKS_NAMESPACE
        need = WRITE if isinstance(op, KV_CHANGES) or permit_check else READ
        keys: Sequence[str | None]
        if isinstance(op, kv.KVGetMany):
            keys = op.keys
        elif isinstance(op, kv.KVGetPrefix):
            if op.namespace == tokens.LOCKS_NAMESPACE and grants.allows_prefix("lock", op.prefix, need):
                # Every permit under the prefix is a lock the grants cover.
                continue
            keys = [None]
        else:
            keys = [op.key]
        for key in keys:
            kind, name = tokens.kv_resource(op.namespace, key)
            grants.require(kind, name, need)


def require_kv_ops(request: HttpRequest, ops: Iterable[kv.KVOp]) -> None:
    """Every KV operation: its namespace (a lock for a permit row), read or write."""
    grants = limits(request)
    if grants is not None:
        require_kv(grants, ops)


def require_lock_ops(request: HttpRequest, ops: Iterable[locks.LockOp]) -> None:
    """Every lock operation: ``get`` reads its lock, the others write it."""
    grants = limits(request)
    if grants is not None:
        for op in ops:
            grants.require("lock", op.name, READ if op.op == "get" else WRITE)


def require_timer_ops(grants: Grants | None, ops: Iterable[timers.TimerOp]) -> None:
    """Every schedule or cancel writes its timer queue; a schedule also the queue it fires into."""
    if grants is not None:
        for op in ops:
            grants.require("timer", op.queue, WRITE)
            if isinstance(op, timers.TimerSchedule):
                # The fire is a push onto the queue of the same name.
                grants.require("queue", op.queue, WRITE)


def require_queues(grants: Grants | None, names: Iterable[str], need: TokenScope) -> None:
    if grants is not None:
        for name in names:
            grants.require("queue", name, need)


def require_stored_queues(grants: Grants | None, names: Iterable[str], need: TokenScope, what: str) -> None:
    """``require_queues`` for queues found from stored state (a partition's, a lease's).

    The refusal says ``what`` the call named, never the queue found: a
    partition id is a small number anyone can count up, and its queue's
    name is the store's to keep.
    """
    if grants is not None:
        for name in names:
            if not grants.allows("queue", name, need):
                raise tokens.NotGranted(f"no grant of this token gives {need.value} on {what}")


def require_partitions(grants: Grants | None, texts: Iterable[str | int], need: TokenScope) -> None:
    """The queues of the partitions named (ids, or their text); ids that name none are left to the route."""
    if grants is None:
        return
    ids = {n for t in texts if (n := t if isinstance(t, int) else owners.partition_number(t)) is not None}
    require_stored_queues(
        grants, owners.queue_names_of_partitions(ids).values(), need, "the queue of a partition named"
    )


def require_partition(request: HttpRequest, text: str | int, need: TokenScope) -> None:
    require_partitions(limits(request), [text], need)


def require_dead_letter(request: HttpRequest, dead_letter_id: int | None, need: TokenScope) -> None:
    """The queue of the dead letter named (an unknown one, or None, is left to the route)."""
    grants = limits(request)
    if grants is not None and dead_letter_id is not None:
        name = owners.queue_name_of_dead_letter(dead_letter_id)
        if name is not None:
            require_stored_queues(grants, [name], need, "the queue of the dead letter named")


def require_replayed(request: HttpRequest, source_queue: str, queue: str, need: TokenScope) -> None:
    """An earlier replay's record (``queue_operator.ReplayRecord``): the
    dead letter's queue, and the queue its copy went to, which the answer
    names; the refusal names neither."""
    grants = limits(request)
    require_stored_queues(grants, [source_queue], need, "the queue of the dead letter named")
    require_stored_queues(grants, [queue], need, "the queue the dead letter named was replayed into")


def require_lease(request: HttpRequest, lease_id: str, need: TokenScope) -> None:
    """The queues whose partitions the lease holds (an unknown lease reaches none)."""
    grants = limits(request)
    if grants is not None:
        require_stored_queues(grants, owners.queue_names_of_lease(lease_id), need, "the queues the lease holds")


def check(routes: Iterable[str]) -> None:
    """Raise ``LookupError`` naming a route of ``routes`` without a row, a row without a route,
    or a row whose rule does not fit what it touches."""
    seen = set(routes)
    missing = seen - set(ROUTES)
    stale = set(ROUTES) - seen
    if missing or stale:
        raise LookupError(f"grant rules missing for {sorted(missing)}, stale for {sorted(stale)}")
    _check_rows()


def _check_rows() -> None:
    """Raise ``LookupError`` for a row whose rule does not fit what it touches (``routes.check_row``)."""
    for route, row in routes.ROUTES.items():
        routes.check_row(route, row)


def rule_of(routes: Sequence[str]) -> Rule:
    """The one rule of a view's routes; raise ``LookupError`` when one has none."""
    found = {ROUTES[r] for r in routes if r in ROUTES}
    if len(found) != 1 or any(r not in ROUTES for r in routes):
        raise LookupError(f"{list(routes)} need one rule in queenadmin/api/routes.py")
    return found.pop()
