"""Live pages: a registry of page -> live regions -> how to render them.

The full page (``render_page``), an htmx request for one region (the same
view, answered with the partial its ``HX-Target`` names) and a websocket
push (``consumers.DashboardConsumer``) render a region the same way, so
they show the same HTML. A region is a named partial whose root element's
``id`` is its name; it never reads ``request`` (a push has none); a page's
context function ``(user, params) -> dict`` reads through the domain with a
number of queries that does not grow with the data. A page is live once it
is listed in ``dashboard/pages.py``. How to write one, step by step:
docs/design.md, "The dashboard's live pages".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlencode, urlsplit

from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import render
from django.template.loader import render_to_string

from queenadmin.conf import settings as app_settings
from queenadmin.dashboard import links
from queenadmin.dashboard.permissions import VIEW, User, can
from queenadmin.domain import clock

Context = Callable[[User, QueryDict], dict[str, Any]]

#: Where every live page's socket is: ``/ws/<name>/``. Channels' routes
#: have no ``reverse``: ``socket_url`` and ``routing.py`` both read this.
SOCKET_PATH = "ws/"


@dataclass(frozen=True)
class Region:
    """A live region: a partial of the page's template, and what stales it."""

    #: The partial's name, and the ``id`` of its root element.
    name: str
    #: Event groups (``domain/events.py``) whose messages make it stale.
    groups: tuple[str, ...]
    #: Optional: does this event concern the page as the viewer filtered it?
    #: ``(message, params) -> bool``; e.g. a KV change in another namespace
    #: leaves a namespace's page alone. None: every event of ``groups``.
    match: Callable[[dict[str, Any], QueryDict], bool] | None = None


@dataclass(frozen=True)
class LivePage:
    name: str
    template: str
    context: Context
    regions: tuple[Region, ...] = ()
    #: The nav entry to mark current (defaults to ``name``).
    nav: str = ""
    #: The key of ``permissions.VIEW`` it needs (defaults to ``name``).
    perm: str = ""
    #: Shortest gap in seconds between two pushes of this page; None means
    #: ``DASHBOARD_LIVE_GAP_SECONDS``. Raise it for a costly context.
    gap: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def groups(self) -> set[str]:
        return {group for region in self.regions for group in region.groups}

    @property
    def permission(self) -> str:
        return self.perm or self.name

    def stale_regions(self, group: str, message: dict[str, Any], params: QueryDict) -> set[str]:
        return {
            region.name
            for region in self.regions
            if group in region.groups and (region.match is None or region.match(message, params))
        }


def one_region_page(
    name: str,
    template: str,
    context: Context,
    region: str,
    *groups: str,
    match: Callable[[dict[str, Any], QueryDict], bool] | None = None,
    nav: str = "",
    perm: str = "",
    gap: float | None = None,
) -> LivePage:
    """A live page with one region (most pages), stale on ``groups``' events."""
    return LivePage(name, template, context, (Region(region, groups, match),), nav=nav, perm=perm, gap=gap)


def registry(pages: Iterable[LivePage]) -> dict[str, LivePage]:
    """``pages`` by name (their ``/ws/<name>/`` path), each name once, each
    with a view permission."""
    found: dict[str, LivePage] = {}
    for page in pages:
        assert page.permission in VIEW, f"{page.name} needs a view permission in permissions.VIEW"
        assert page.name not in found, f"live page {page.name} listed twice"
        found[page.name] = page
    return found


def page_context(page: LivePage, user: User, params: QueryDict) -> dict[str, Any]:
    """The page's own context plus what every page and region may read."""
    ctx: dict[str, Any] = {
        "page": page.nav or page.permission,
        "live_page": page.name,
        "live_socket_url": socket_url(page, params),
        "can": can(user),
        "now": clock.now(),
        "environment": app_settings.ENVIRONMENT_NAME,
        "params": params,
    }
    ctx.update(page.context(user, params))
    return ctx


def socket_query(params: QueryDict) -> str:
    """The query string of a page's socket: ``params``, each value spelled
    by ``links.spell``, so a stored name with NUL or a newline (SQLite,
    from before the name rule) reaches the socket as it reached the page."""
    return urlencode([(key, links.spell(value)) for key, values in params.lists() for value in values])


def socket_url(page: LivePage, params: QueryDict) -> str:
    """Where ``page``'s socket is, for the page showing ``params``:
    ``/ws/<name>/?<socket_query>`` (``routing.py`` routes it)."""
    query = socket_query(params)
    return f"/{SOCKET_PATH}{page.name}/" + (f"?{query}" if query else "")


def socket_params(query_string: bytes) -> QueryDict:
    """The ``params`` a socket's query string (``socket_query``) spells.

    Raises ``ValueError`` when it spells none, or holds NUL as such (no
    page sends either).
    """
    spelled = QueryDict(query_string.decode("latin-1"))
    params = QueryDict(mutable=True)
    for key, values in spelled.lists():
        if "\x00" in key or any("\x00" in value for value in values):
            raise ValueError("NUL in a socket's query string")
        params.setlist(key, [links.name_of(value) for value in values])
    return params


def render_page(
    request: HttpRequest, page: LivePage, *, params: QueryDict | None = None, status: int = 200
) -> HttpResponse:
    """The full page, or the one region an htmx request targets.

    ``params`` defaults to the query string; pass it to add what the path
    names (``ns``), so the socket renders the same page.
    """
    params = request.GET if params is None else params
    ctx = page_context(page, request.user, params)
    htmx = getattr(request, "htmx", None)
    target = htmx.target if htmx else None
    names = {region.name for region in page.regions}
    if target in names:
        return render(request, f"{page.template}#{target}", ctx, status=status)
    return render(request, page.template, ctx, status=status)


def render_regions(page: LivePage, user: User, params: QueryDict, names: Iterable[str]) -> tuple[str, datetime | None]:
    """The HTML of the named regions, one after another (a websocket frame),
    and when they go stale by themselves (the context's ``stale_at``: a
    lease or key that expires with no event), if ever."""
    ctx = page_context(page, user, params)
    wanted = set(names)
    html = "".join(
        render_to_string(f"{page.template}#{region.name}", ctx) for region in page.regions if region.name in wanted
    )
    return html, ctx.get("stale_at")


def params_of_current_page(request: HttpRequest) -> QueryDict:
    """The query string of the page an htmx request came from (its filters)."""
    current = request.headers.get("HX-Current-URL", "")
    return QueryDict(urlsplit(current).query if current else "")


def answer_action(
    request: HttpRequest, page: LivePage, template: str, ctx: dict[str, Any], *, extra: dict[str, str] | None = None
) -> HttpResponse:
    """An htmx action's answer: its outcome (into the dialog) and fresh regions.

    The regions go out-of-band, drawn with the filters of the page the
    request came from (plus ``extra``, what its path names), so the page
    is current even without its socket.
    """
    outcome = render_to_string(template, ctx, request=request)
    params = params_of_current_page(request).copy()
    for name, value in (extra or {}).items():
        params[name] = value
    regions_ctx = page_context(page, request.user, params)
    regions_ctx["oob"] = True
    regions = "".join(render_to_string(f"{page.template}#{r.name}", regions_ctx) for r in page.regions)
    return HttpResponse(outcome + regions)
