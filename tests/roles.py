"""The roles' groups for tests that log in as a viewer or an operator."""

from __future__ import annotations

from django.contrib.auth.models import Group, Permission

from queenadmin.dashboard.permissions import CHANGE, OPERATOR_ONLY_PAGES, OPERATORS_GROUP, VIEW


def role_group(name: str) -> Group:
    """The group the migrations made; re-made with the dashboard's permissions
    after a transactional test's flush removed it (flush keeps no data)."""
    group, created = Group.objects.get_or_create(name=name)
    if created:
        # As the migrations make them: viewers see no API tokens.
        viewed = [perm for page, perm in VIEW.items() if page not in OPERATOR_ONLY_PAGES or name == OPERATORS_GROUP]
        wanted = viewed + (list(CHANGE.values()) if name == OPERATORS_GROUP else [])
        codenames = [perm.split(".", 1)[1] for perm in wanted]
        group.permissions.add(*Permission.objects.filter(content_type__app_label="queenadmin", codename__in=codenames))
    return group
