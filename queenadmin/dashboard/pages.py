"""The dashboard's pages: the nav (``NAV``) and the live pages (``PAGES``).

``NAV`` declares each page of the nav once: its URL name, its title and
the permission that shows it (``permissions.VIEW``), if any. The base
template draws the nav from it (``{% nav_links %}``), in this order, for
whoever may see each page; a page marks itself current when its context's
``page`` is the entry's ``key``.

A page is live when it is in ``PAGES``: ``routing.py`` gives each a
``/ws/<name>/`` route and ``consumers.DashboardConsumer`` looks the page up
here. How to write a live page: docs/design.md, "The dashboard's live pages".
"""

from __future__ import annotations

from dataclasses import dataclass

from django.urls import reverse

from queenadmin.dashboard import live
from queenadmin.dashboard.permissions import VIEW, User
from queenadmin.dashboard.views import (
    audit,
    consumers,
    deadletters,
    ephemeral,
    kv,
    locks,
    messages,
    overview,
    queues,
    timers,
)


@dataclass(frozen=True)
class NavPage:
    """A page of the nav."""

    #: Its URL name, as ``reverse`` takes it.
    url_name: str
    title: str
    #: The key of ``permissions.VIEW`` a user needs to be shown it; None:
    #: shown to everyone (the admin and the API docs ask for themselves).
    permission: str | None = None

    @property
    def key(self) -> str:
        """What a page's context names as ``page`` when this page is current."""
        return self.url_name.rpartition(":")[2]


#: The nav, in its order.
NAV: tuple[NavPage, ...] = (
    NavPage("dashboard:overview", "Overview", "overview"),
    NavPage("dashboard:locks", "Locks", "locks"),
    NavPage("dashboard:timers", "Timers", "timers"),
    NavPage("dashboard:kv", "KV", "kv"),
    NavPage("dashboard:queues", "Queues", "queues"),
    NavPage("dashboard:dlq", "DLQ", "queues"),
    NavPage("dashboard:ephemeral", "Ephemeral", "queues"),
    NavPage("dashboard:consumers", "Consumers", "queues"),
    NavPage("dashboard:audit", "Audit", "audit"),
    NavPage("dashboard:tokens", "Tokens", "tokens"),
    NavPage("admin:index", "Admin"),
    NavPage("api:openapi-view", "API docs"),
)


@dataclass(frozen=True)
class NavLink:
    """One link of the nav as a user sees it."""

    url: str
    title: str
    #: The page shown is this one (``aria-current``).
    current: bool


def nav_links(user: User | None, current: str) -> list[NavLink]:
    """The nav ``user`` sees (None: nobody signed in), with ``current``
    (the context's ``page``) marked."""
    return [
        NavLink(reverse(page.url_name), page.title, page.key == current)
        for page in NAV
        if page.permission is None or (user is not None and user.has_perm(VIEW[page.permission]))
    ]


#: Every live page by name (its ``/ws/<name>/`` path).
PAGES: dict[str, live.LivePage] = live.registry(
    [
        overview.OVERVIEW,
        queues.QUEUES,
        queues.QUEUE,
        deadletters.DLQ,
        consumers.CONSUMERS,
        ephemeral.EPHEMERAL,
        messages.QUEUE_LEASES,
        messages.QUEUE_MESSAGE,
        locks.LOCKS,
        timers.TIMERS,
        kv.KV,
        kv.KV_KEYS,
        kv.KV_KEY,
        audit.AUDIT,
    ]
)
