"""``/audit/``: every operator action, filterable; revert a KV edit as CAS."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.contrib import messages
from django.db.models import Q
from django.http import HttpResponse, QueryDict
from django.shortcuts import redirect, render

from queenadmin.conf import settings as app_settings
from queenadmin.dashboard import live
from queenadmin.dashboard.permissions import User
from queenadmin.dashboard.views.access import HtmxHttpRequest, page_view, staff_action, who_of
from queenadmin.dashboard.views.querystring import paging
from queenadmin.domain import events
from queenadmin.domain.audit import KINDS, VIAS
from queenadmin.domain.kv.operator import kv_operator_revert, kv_revertible
from queenadmin.errors import KVBadRequest, NotFound
from queenadmin.models import AuditEntry


def _cursor(after: str) -> tuple[datetime, int] | None:
    stamp, _, ident = after.rpartition("|")
    try:
        return datetime.fromisoformat(stamp), int(ident)
    except ValueError:
        return None


def _side(text: str) -> dict[str, Any]:
    """An audit before/after as shown: KV snapshots are JSON, the rest text."""
    if text.startswith("{"):
        try:
            found = json.loads(text)
        except ValueError:
            return {"text": text}
        if isinstance(found, dict) and "version" in found:
            return {
                "version": found.get("version"),
                "value": json.dumps(found.get("value"), ensure_ascii=False),
                "expires_at": found.get("expires_at"),
            }
    return {"text": text}


def audit_entries(params: QueryDict, limit: int) -> tuple[list[AuditEntry], str | None]:
    """A keyset page of entries, newest first, filtered. One query."""
    rows = AuditEntry.objects.order_by("-at", "-id")
    kind, actor = params.get("kind", ""), params.get("actor", "")
    action, target = params.get("action", ""), params.get("target", "")
    via = params.get("via", "")
    if kind in KINDS:
        rows = rows.filter(kind=kind)
    if via in VIAS:
        rows = rows.filter(via=via)
    if actor:
        rows = rows.filter(actor=actor)
    if action:
        rows = rows.filter(action=action)
    if target:
        rows = rows.filter(target__startswith=target)
    cursor = _cursor(params.get("after", ""))
    if cursor is not None:
        rows = rows.filter(Q(at__lt=cursor[0]) | Q(at=cursor[0], id__lt=cursor[1]))
    found = list(rows[: limit + 1])
    more = len(found) > limit
    page = found[:limit]
    return page, (f"{page[-1].at.isoformat()}|{page[-1].pk}" if more and page else None)


def audit_context(user: User, params: QueryDict) -> dict[str, Any]:
    entries, next_after = audit_entries(params, app_settings.DASHBOARD_PAGE_SIZE)
    shown = [
        {
            "entry": e,
            "before": _side(e.before),
            "after": _side(e.after),
            "revertible": kv_revertible(e) is not None,
        }
        for e in entries
    ]
    filters = {k: params.get(k, "") for k in ("kind", "via", "actor", "action", "target")}
    return {
        **filters,
        "kinds": sorted(KINDS),
        "vias": VIAS,
        "after": params.get("after", ""),
        "entries": shown,
        **paging(params, next_after),
    }


AUDIT = live.one_region_page("audit", "queenadmin/audit.html", audit_context, "audit-entries", events.AUDIT_GROUP)
audit = page_view(AUDIT)


@staff_action("kv.revert")
def revert(request: HtmxHttpRequest, entry_id: int) -> HttpResponse:
    """GET: what the revert would do. POST: do it as a compare-and-set."""
    entry = AuditEntry.objects.filter(pk=entry_id).first()
    htmx = bool(request.htmx)
    template = "queenadmin/audit_revert.html"
    ctx: dict[str, Any] = {"entry": entry, "entry_id": entry_id, "page": "audit"}
    plan = kv_revertible(entry) if entry is not None else None
    ctx["plan"] = plan
    if plan is not None:
        ctx["plan_value"] = json.dumps(plan.value, indent=2, ensure_ascii=False)
    if request.method == "GET" or entry is None or plan is None:
        status = 200 if plan is not None else 404
        return render(request, template + ("#confirm-form" if htmx else ""), ctx, status=status)
    try:
        result = kv_operator_revert(entry_id=entry_id, who=who_of(request))
    except (NotFound, KVBadRequest) as exc:
        ctx["error"] = str(exc)
        return render(request, template + ("#confirm-form" if htmx else ""), ctx, status=422)
    ctx["result"] = result
    ctx["current_text"] = (
        json.dumps(result.current_value, indent=2, ensure_ascii=False) if result.current_version else ""
    )
    if htmx:
        return live.answer_action(request, AUDIT, template + "#outcome", ctx)
    if result.applied:
        messages.success(request, f"Reverted {entry.target} (audit entry {entry_id}).")
    else:
        messages.warning(request, f"Not reverted: {entry.target} changed since that edit; a newer write wins.")
    return redirect("dashboard:audit")
