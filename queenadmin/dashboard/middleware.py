"""``RefuseUnstorable``: a request whose path or parameters hold text no
stored name can hold answers 400, before any view reads it.

That text is NUL: PostgreSQL's ``text`` cannot store it, so a filter
holding one failed the query (a 500) on PostgreSQL and matched nothing on
SQLite. Refused here, it answers the same on both, for every page by
construction. A stored name that holds NUL (SQLite, from before the name
rule) still reaches its page: ``links.segment`` spells NUL as ``~00``.
Paths that answer machines (``/api/``, ``/streams/``, ``/metrics``) are
left to their own error envelope.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, QueryDict
from django.http.response import HttpResponseBase
from django.template import loader

from queenadmin.conf import settings as app_settings
from queenadmin.dashboard.views.errors import for_machines
from queenadmin.domain import clock
from queenadmin.plumbing.middleware import DualModeMiddleware

#: Characters no stored name holds on every database.
UNSTORABLE = ("\x00",)

#: Bodies whose fields are parameters too.
_FORMS = ("application/x-www-form-urlencoded", "multipart/form-data")


def unstorable(text: str) -> bool:
    """Whether ``text`` holds a character no database here can store."""
    return any(char in text for char in UNSTORABLE)


def _bad_field(params: QueryDict) -> str | None:
    for key, values in params.lists():
        if unstorable(key) or any(unstorable(value) for value in values):
            return key
    return None


def bad_request(why: str) -> HttpResponse:
    """The dashboard's 400 page, drawn without the request's context (no
    session or database read: this runs before either)."""
    ctx = {"page": "error", "why": why, "now": clock.now(), "environment": app_settings.ENVIRONMENT_NAME}
    return HttpResponse(loader.get_template("queenadmin/errors/400.html").render(ctx), status=400)


class RefuseUnstorable(DualModeMiddleware):
    """400 for NUL in a page's path, query string or form fields."""

    def before(self, request: HttpRequest) -> HttpResponseBase | None:
        if for_machines(request):
            return None
        if unstorable(request.path_info):
            return bad_request("The path holds a NUL character (%00).")
        field = _bad_field(request.GET)
        if field is None and request.method == "POST" and request.content_type in _FORMS:
            field = _bad_field(request.POST)
        if field is not None:
            # repr: the field's name shown with its invisible characters escaped.
            return bad_request(f"The field {field!r} holds a NUL character (%00).")
        return None
