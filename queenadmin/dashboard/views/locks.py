"""``/locks/``: live permits with masked owners and tokens, and force release."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse

from queenadmin.conf import settings as app_settings
from queenadmin.dashboard import live
from queenadmin.dashboard.permissions import User
from queenadmin.dashboard.views import lock_history
from queenadmin.dashboard.views.access import HtmxHttpRequest, page_view, staff_action, who_of
from queenadmin.dashboard.views.querystring import paging, query
from queenadmin.domain import events
from queenadmin.domain.locks.operator import Permit, lease_mark, lock_force_release, locks_page, server_lock
from queenadmin.domain.masking import mask_token
from queenadmin.errors import LocksBadRequest


def _shown(permit: Permit, limit_at_least: int = 1) -> dict[str, Any]:
    """A permit as templates may see it: owner and token as fingerprints only."""
    return {
        "name": permit.name,
        "slot": permit.slot,
        "held": permit.held,
        #: A semaphore's limit is named by each acquire and stored nowhere;
        #: what the permits show is a floor: as many as are held, and one
        #: above the highest slot taken.
        "limit_at_least": limit_at_least,
        "owner_fp": mask_token(permit.owner) if permit.owner is not None else None,
        #: Who took the lease (a token's name, a JWT's sub): no credential.
        "caller": permit.caller,
        "token_fp": mask_token(permit.token),
        "since": permit.since,
        "renewed_at": permit.renewed_at if permit.renewed else None,
        #: The last grant or renew: the lease's length is expires_at - this.
        "granted_at": permit.renewed_at,
        "expires_at": permit.expires_at,
        "lease": lease_mark(owner=permit.owner, since=permit.since),
        #: The server's own loops hold it (``SERVER_LOCKS``), or None.
        "server": server_lock(permit.name),
    }


def locks_context(user: User, params: QueryDict) -> dict[str, Any]:
    name = params.get("name", "")
    prefix = name or params.get("prefix", "")
    after = params.get("after", "")
    try:
        page = locks_page(prefix=prefix, after=after, limit=app_settings.DASHBOARD_PAGE_SIZE)
        error = ""
    except LocksBadRequest as exc:
        page, error = None, str(exc)
    permits = [] if page is None else [p for p in page.permits if not name or p.name == name]
    next_after = None if page is None else page.next_after
    floor: dict[str, int] = {}
    for p in permits:
        floor[p.name] = max(floor.get(p.name, 1), p.held, p.slot + 1)
    return {
        "name": name,
        "prefix": params.get("prefix", ""),
        "after": after,
        "error": error,
        "permits": [_shown(p, floor[p.name]) for p in permits],
        "stale_at": min((p.expires_at for p in permits if p.expires_at is not None), default=None),
        **paging(params, next_after),
        **lock_history.life_context(name),
    }


LOCKS = live.one_region_page("locks", "queenadmin/locks.html", locks_context, "locks-holders", events.LOCKS_GROUP)
locks = page_view(LOCKS)


def _slot(raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        return -1


@staff_action("lock.release")
def lock_release(request: HtmxHttpRequest) -> HttpResponse:
    """GET: the confirmation (what force release means). POST: do it."""
    source = request.POST if request.method == "POST" else request.GET
    name, slot, lease = source.get("name", ""), _slot(source.get("slot", "")), source.get("lease", "")
    ctx: dict[str, Any] = {"name": name, "slot": slot, "lease": lease, "page": "locks", "server": server_lock(name)}
    if request.method == "GET" or not name or slot < 0:
        ctx["error"] = "" if request.method == "GET" else "Name a lock and a slot."
        status = 200 if request.method == "GET" else 422
        template = "queenadmin/locks_release.html"
        if request.htmx:
            template += "#confirm-form"
        return render(request, template, ctx, status=status)
    try:
        outcome = lock_force_release(name=name, slot=slot, lease=lease, who=who_of(request))
    except LocksBadRequest as exc:
        ctx["error"] = str(exc)
        template = "queenadmin/locks_release.html" + ("#confirm-form" if request.htmx else "")
        return render(request, template, ctx, status=422)
    ctx.update(
        outcome=outcome,
        token_fp=mask_token(outcome.token),
        owner_fp=mask_token(outcome.owner),
        current=_shown(outcome.current) if outcome.current is not None else None,
    )
    if request.htmx:
        return live.answer_action(request, LOCKS, "queenadmin/locks_release.html#outcome", ctx)
    if outcome.released:
        messages.success(request, f"Released {name}#{slot}. Its token {ctx['token_fp']} is dead.")
    elif outcome.reason == "gone":
        messages.warning(request, f"{name}#{slot} was no longer held: it expired or was released.")
    else:
        messages.warning(request, f"{name}#{slot} is held by another lease now; nothing was released.")
    return redirect(reverse("dashboard:locks") + (query({"name": name}) if name else ""))
