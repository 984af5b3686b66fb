"""``/queues/<name>/leases/`` and ``/queues/<name>/messages/<id>/``.

Two live pages beside the queue page (``views/queues.py``): a queue's
message leases, one row per consumer group's batch on a partition, keyset
paged by cursor id (region ``queue-leases``); and one message with its
payload and its delivery state for every consumer group (region
``message-delivery``: groups, dead letters and traces). Both re-render on
the queue's events and when a lease they show runs out (``stale_at``).
Lease ids are credentials: the pages show their fingerprints only.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpResponse, QueryDict
from django.shortcuts import render

from queenadmin.dashboard import links, live
from queenadmin.dashboard.views.access import HtmxHttpRequest, User, staff_page
from queenadmin.dashboard.views.querystring import int_param, query
from queenadmin.dashboard.views.queues import queue_page
from queenadmin.domain import clock
from queenadmin.domain.queues import leases


def _queue_links(name: str) -> dict[str, str]:
    """The queue these pages are about, and the links their header shows."""
    return {
        "queue_name": name,
        "queue_url": links.queue_url(name),
        "leases_url": links.queue_url(name, "leases"),
    }


def leases_context(user: User, params: QueryDict) -> dict[str, Any]:
    """The leases page; ``params["name"]`` is the queue its path names."""
    name = params.get("name", "")
    group = params.get("group", "") or None
    page = leases.lease_page(queue=name, group=group, after=int_param(params, "after"))
    if page is None:
        return {"missing": f"no queue {name}", "queue_name": name}
    kept = {k: params[k] for k in ("group",) if params.get(k)}
    return {
        **_queue_links(name),
        "group": group,
        "groups": page.groups,
        "leases": page.leases,
        "after": params.get("after", ""),
        "next_query": query(kept, after=page.next_after) if page.next_after is not None else "",
        "first_query": query(kept) if params.get("after") else "",
        "stale_at": min((lease.leased_until for lease in page.leases), default=None),
    }


def message_context(user: User, params: QueryDict) -> dict[str, Any]:
    """The message page; ``params`` holds the queue and message id its path names."""
    name, message_id = params.get("name", ""), params.get("message_id", "")
    found = leases.message_delivery(queue=name, message_id=message_id)
    if found is None:
        return {"missing": f"no message {message_id} in queue {name}", "queue_name": name, "message_id": message_id}
    now = clock.now()
    ends = [g.leased_until for g in found.groups if g.leased_until is not None and g.leased_until > now]
    ends += [g.parked_until for g in found.groups if g.parked_until is not None and g.parked_until > now]
    return {
        **_queue_links(name),
        "message_id": message_id,
        "m": found,
        "payload_cap": leases.PAYLOAD_CAP,
        "trace_cap": leases.TRACE_CAP,
        "stale_at": min(ends, default=None),
    }


QUEUE_LEASES = queue_page("queue-leases", "queenadmin/queues/leases.html", leases_context, "queue-leases")
QUEUE_MESSAGE = queue_page("queue-message", "queenadmin/queues/message.html", message_context, "message-delivery")


def _render(request: HtmxHttpRequest, page: live.LivePage, params: QueryDict) -> HttpResponse:
    """``live.render_page``, but a queue or message that is not there is a 404.

    A push finds it gone too (retention, a queue delete): its region then
    says so instead of failing.
    """
    ctx = live.page_context(page, request.user, params)
    if "missing" in ctx:
        raise Http404(ctx["missing"])
    target = request.htmx.target if request.htmx else None
    if target in {region.name for region in page.regions}:
        return render(request, f"{page.template}#{target}", ctx)
    return render(request, page.template, ctx)


@staff_page("queues")
def queue_leases(request: HtmxHttpRequest, name: str) -> HttpResponse:
    params = request.GET.copy()
    params["name"] = name
    return _render(request, QUEUE_LEASES, params)


@staff_page("queues")
def queue_message(request: HtmxHttpRequest, name: str, message_id: str) -> HttpResponse:
    params = QueryDict(mutable=True)
    params.update({"name": name, "message_id": message_id})
    return _render(request, QUEUE_MESSAGE, params)
