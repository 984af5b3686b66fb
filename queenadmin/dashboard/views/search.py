"""``/search/?q=``: one box that finds a queue, lock, KV key, timer or message."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import urlencode

from queenadmin.dashboard.views.common import may_view, staff_page
from queenadmin.domain import clock
from queenadmin.domain.search import Hit, search

#: Result kind -> the page permission needed to see it.
_KIND_PAGE = {"queue": "queues", "message": "queues", "lock": "locks", "kv": "kv", "timer": "timers"}


@dataclass(frozen=True)
class Result:
    hit: Hit
    url: str


def url_of(hit: Hit) -> str:
    """The page that shows ``hit`` (filtered down to it where the page can)."""
    if hit.kind == "queue":
        return reverse("dashboard:queue", args=[hit.ref[0]])
    if hit.kind == "message":
        return reverse("dashboard:queue", args=[hit.ref[0]]) + "?" + urlencode({"find": hit.ref[1]}) + "#queue-messages"
    if hit.kind == "lock":
        return "/locks/?" + urlencode({"prefix": hit.ref[0]})
    if hit.kind == "kv":
        return f"/kv/{quote(hit.ref[0], safe='')}/?" + urlencode({"prefix": hit.ref[1]})
    return "/timers/?" + urlencode({"queue": hit.ref[0], "prefix": hit.ref[1]})


@staff_page("overview")
def search_page(request: HttpRequest) -> HttpResponse:
    text = request.GET.get("q", "")
    kinds = frozenset(k for k, page in _KIND_PAGE.items() if may_view(request.user, page))
    hits = search(text=text, now=clock.now(), kinds=kinds)
    ctx = {"q": text.strip(), "results": [Result(h, url_of(h)) for h in hits]}
    template = "queenadmin/search.html"
    if request.headers.get("HX-Request"):
        template += "#search-results"
    return render(request, template, ctx)
