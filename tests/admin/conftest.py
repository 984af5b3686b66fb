"""Users, clients and event capture for the admin's tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from queenadmin.dashboard.permissions import OPERATORS_GROUP, VIEWERS_GROUP
from queenadmin.domain import events


def _client(username: str, group: str | None) -> Client:
    user = User.objects.create_user(username=username, password="pw", is_staff=True)
    if group:
        user.groups.add(Group.objects.get(name=group))
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def operator(db: None) -> Client:
    """A member of the operators group (view and change)."""
    return _client("otto", OPERATORS_GROUP)


@pytest.fixture
def viewer(db: None) -> Client:
    """A member of the viewers group (view only)."""
    return _client("vera", VIEWERS_GROUP)


@pytest.fixture
def published() -> Iterator[list[tuple[str, dict[str, Any]]]]:
    """The dashboard events published after commit while the test runs."""
    seen: list[tuple[str, dict[str, Any]]] = []

    def listen(group: str, message: dict[str, Any]) -> None:
        seen.append((group, message))

    events.publisher.listeners.append(listen)
    try:
        yield seen
    finally:
        events.publisher.listeners.remove(listen)


@pytest.fixture
def committing(django_capture_on_commit_callbacks: Any) -> Callable[[], Any]:
    """``with committing():`` runs the on-commit hooks (events) of what it wraps."""
    return lambda: django_capture_on_commit_callbacks(execute=True)


def groups_of(published: list[tuple[str, dict[str, Any]]]) -> set[str]:
    return {group for group, _ in published}


def action(name: str, ids: list[Any], **fields: Any) -> dict[str, Any]:
    """The POST of an admin action's confirmation page."""
    return {"action": name, "_selected_action": [str(i) for i in ids], "confirmed": "1", **fields}
