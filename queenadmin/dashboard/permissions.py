"""Who may see and do what on the dashboard (and its websockets).

Staff only; viewing a page needs its view permission, each action its
change permission. The two groups the migrations make hold these.
"""

from __future__ import annotations

from typing import Any, Final, TypeAlias

from queenadmin.domain.roles import OPERATORS_GROUP, VIEWERS_GROUP

#: A request's or a socket's user (a model, AnonymousUser or a lazy one).
User: TypeAlias = Any

#: page -> permission needed to see it.
VIEW: Final = {
    "overview": "queenadmin.view_queue",
    "locks": "queenadmin.view_kventry",
    "timers": "queenadmin.view_timer",
    "kv": "queenadmin.view_kventry",
    "queues": "queenadmin.view_queue",
    "audit": "queenadmin.view_auditentry",
    "tokens": "queenadmin.view_apitoken",
}

#: Pages only operators see: a viewer's group has no view_apitoken (the
#: migrations give API tokens to operators alone, in the admin as here).
OPERATOR_ONLY_PAGES: Final = frozenset({"tokens"})

#: action -> permission needed to do it.
CHANGE: Final = {
    "lock.release": "queenadmin.change_kventry",
    "kv.edit": "queenadmin.change_kventry",
    "kv.delete": "queenadmin.delete_kventry",
    "kv.revert": "queenadmin.change_kventry",
    "timer.cancel": "queenadmin.change_timer",
    "timer.move": "queenadmin.change_timer",
    "timer.fire": "queenadmin.change_timer",
    "dlq.replay": "queenadmin.change_deadletter",
    "dlq.purge": "queenadmin.delete_deadletter",
    "queue.group": "queenadmin.change_queue",
    "queue.purge": "queenadmin.change_queue",
    "queue.pause": "queenadmin.change_queue",
    # A queue's settings, a new queue, a message pushed from its page: the
    # operators group holds change_queue (the migrations give it no
    # add_queue or add_message), so these are changes to the queue too.
    "queue.configure": "queenadmin.change_queue",
    "queue.create": "queenadmin.change_queue",
    "queue.push": "queenadmin.change_queue",
    "queue.attention": "queenadmin.change_queue",
}

__all__ = [
    "CHANGE",
    "OPERATORS_GROUP",
    "OPERATOR_ONLY_PAGES",
    "VIEW",
    "VIEWERS_GROUP",
    "User",
    "can",
    "may_do",
    "may_view",
]


def may_view(user: User, page: str) -> bool:
    """Staff with the page's view permission (``permissions.VIEW``)."""
    return bool(user.is_authenticated and getattr(user, "is_staff", False) and user.has_perm(VIEW[page]))


def may_do(user: User, action: str) -> bool:
    """Staff with the action's change permission (``permissions.CHANGE``)."""
    return bool(user.is_authenticated and getattr(user, "is_staff", False) and user.has_perm(CHANGE[action]))


def can(user: User) -> dict[str, bool]:
    """Every action of ``permissions.CHANGE`` -> may this user do it.

    Templates read ``can.<action with _ for .>``: ``can.lock_release``.
    """
    return {action.replace(".", "_"): may_do(user, action) for action in CHANGE}
