"""Users and clients for the dashboard's tests: anonymous, viewer, operator."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from queenadmin.dashboard.permissions import OPERATORS_GROUP, VIEWERS_GROUP
from tests.roles import role_group


def _user(username: str, *, group: str | None, staff: bool = True) -> User:
    user = User.objects.create_user(username=username, password="pw", is_staff=staff)
    if group:
        user.groups.add(role_group(group))
    return user


@pytest.fixture
def viewer(db: None) -> User:
    return _user("vera", group=VIEWERS_GROUP)


@pytest.fixture
def operator(db: None) -> User:
    return _user("otto", group=OPERATORS_GROUP)


@pytest.fixture
def outsider(db: None) -> User:
    """Signed in, but not staff (the operators group alone is not enough)."""
    return _user("nina", group=OPERATORS_GROUP, staff=False)


class Pages:
    """Every HTML page and fragment the tests rendered, for the secrets grep."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def add(self, text: str) -> str:
        self.seen.append(text)
        return text

    def assert_free_of(self, *secrets: str) -> None:
        for secret in secrets:
            for text in self.seen:
                assert secret not in text, f"{secret!r} appears in a rendered page"


def advance_versions(count: int = 12_000) -> None:
    """Draw enough versions that tokens are distinctive numbers to grep for."""
    from queenadmin.domain import kv

    # The same 256 keys again and again: no count on a page nears a token.
    for _ in range(0, count, 256):
        kv.kv_call([kv.KVPut("grep-pad", f"k{i}", "1", None) for i in range(256)])


@pytest.fixture
def distinct_tokens(db: None) -> None:
    """Fencing tokens above 12,000: a raw token in a page is then findable."""
    advance_versions()


@pytest.fixture
def pages() -> Pages:
    return Pages()


@pytest.fixture
def client_for(pages: Pages) -> Callable[..., Client]:
    """A logged-in test client (None: anonymous) whose answers go to ``pages``."""

    def make(user: User | None, *, csrf: bool = False) -> Client:
        client = Client(enforce_csrf_checks=csrf)
        if user is not None:
            client.force_login(user)

        original = client.request

        def request(**kwargs: Any) -> Any:
            response = original(**kwargs)
            if response.get("Content-Type", "").startswith("text/html"):
                pages.add(response.content.decode())
            return response

        client.request = request  # type: ignore[method-assign]
        return client

    return make


def csrf_token_of(html: str) -> str:
    found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html)
    assert found, "no CSRF token in the page"
    return found.group(1)
