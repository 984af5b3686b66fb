"""``/search/?q=``: one box that finds a queue, lock, KV key, timer or message."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import groupby

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import urlencode

from queenadmin.dashboard import links
from queenadmin.dashboard.views.access import may_view, staff_page
from queenadmin.domain import clock
from queenadmin.domain.search import LIMIT, Hit, search

#: Result kind -> the page permission needed to see it.
_KIND_PAGE = {"queue": "queues", "message": "queues", "lock": "locks", "kv": "kv", "timer": "timers"}
#: Result kind -> what a list of them is called.
_KIND_PLURAL = {"queue": "queues", "message": "messages", "lock": "locks", "kv": "KV keys", "timer": "timers"}


@dataclass(frozen=True)
class Result:
    hit: Hit
    url: str


@dataclass(frozen=True)
class Kind:
    """The results of one kind; ``capped`` when the search stopped at its
    limit for the kind, so more may match than are shown."""

    kind: str
    results: list[Result]
    capped: bool

    @property
    def plural(self) -> str:
        return _KIND_PLURAL.get(self.kind, self.kind)


def url_of(hit: Hit) -> str:
    """The page that shows ``hit`` (filtered down to it where the page can)."""
    if hit.kind == "queue":
        return links.queue_url(hit.ref[0])
    if hit.kind == "message":
        return links.message_url(hit.ref[0], hit.ref[1])
    if hit.kind == "lock":
        return reverse("dashboard:locks") + "?" + urlencode({"prefix": hit.ref[0]})
    if hit.kind == "kv":
        return links.kv_key_url(hit.ref[0], hit.ref[1])
    return reverse("dashboard:timers") + "?" + urlencode({"queue": hit.ref[0], "prefix": hit.ref[1]})


@staff_page("overview")
def search_page(request: HttpRequest) -> HttpResponse:
    text = request.GET.get("q", "")
    kinds = frozenset(k for k, page in _KIND_PAGE.items() if may_view(request.user, page))
    hits = search(text=text, now=clock.now(), kinds=kinds)
    # ``search`` returns each kind's hits together, at most LIMIT of each
    # (a KV key named exactly "namespace/key" may add one).
    by_kind = [
        Kind(kind, results, len(results) >= LIMIT)
        for kind, found in groupby(hits, key=lambda h: h.kind)
        for results in [[Result(h, url_of(h)) for h in found]]
    ]
    ctx = {"q": text.strip(), "results": by_kind, "limit": LIMIT}
    template = "queenadmin/search.html"
    if request.headers.get("HX-Request"):
        template += "#search-results"
    return render(request, template, ctx)
