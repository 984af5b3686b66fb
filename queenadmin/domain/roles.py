"""The dashboard's and the admin's roles, and the groups that carry them.

An account's role is what the migrations' two groups and Django's
superuser flag give it: ``viewers`` see every page, ``operators`` may also
act (and see API tokens), a ``superuser`` may do everything. Local accounts
get theirs in the admin; single sign-on sets it from a claim at every sign-in
(``domain/identity/sso.py``).
"""

from __future__ import annotations

from typing import Any, Final, Literal, get_args

Role = Literal["viewers", "operators", "superuser"]
#: Lowest first.
ROLES: tuple[Role, ...] = get_args(Role)

VIEWERS_GROUP: Final = "queenadmin viewers"
OPERATORS_GROUP: Final = "queenadmin operators"

#: The group that carries a role (a superuser needs none).
ROLE_GROUPS: Final[dict[Role, str]] = {"viewers": VIEWERS_GROUP, "operators": OPERATORS_GROUP}


def role_of(user: Any) -> Role | None:
    """The highest role ``user`` holds (None: none, or not staff)."""
    if not user.is_active or not user.is_staff:
        return None
    if user.is_superuser:
        return "superuser"
    names = set(user.groups.filter(name__in=ROLE_GROUPS.values()).values_list("name", flat=True))
    if OPERATORS_GROUP in names:
        return "operators"
    if VIEWERS_GROUP in names:
        return "viewers"
    return None
