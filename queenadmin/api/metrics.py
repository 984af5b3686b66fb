"""The ``/metrics`` view: any valid token but a write-only one, the series its grants cover."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from queenadmin import metrics
from queenadmin.api import bearer_token, openmode
from queenadmin.api import errors as error_table
from queenadmin.api.bearer import require_level
from queenadmin.api.http import json_response
from queenadmin.conf import settings
from queenadmin.domain import tokens
from queenadmin.errors import QueenError, Unauthorized


def _caller(request: HttpRequest) -> tokens.TokenAuth | None:
    # A valid API token of any scope may read the metrics (the API's own
    # bearer check; docs/clients.md, "API token scopes"); its grants decide
    # which. A write-only token reads nothing: 403, as on a read route.
    if settings.OPEN_API:
        return tokens.OPEN
    token = bearer_token(request)  # the API's one parser of the header
    return None if token is None else tokens.token_check(token)


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    if settings.OPEN_API:
        # The API's refusal of what another site's page could send.
        try:
            openmode.refuse_foreign(request)
        except QueenError as exc:
            status, body = error_table.render(exc)
            return json_response(body, status)
    caller = _caller(request)
    if caller is None:
        # The API's 401, so a scraper's misconfiguration reads the same.
        status, body = error_table.render(Unauthorized())
        return json_response(body, status, {"WWW-Authenticate": "Bearer"})
    try:
        require_level(caller, "read-only")
    except QueenError as exc:
        status, body = error_table.render(exc)
        return json_response(body, status)
    text, content_type = metrics.render(caller.grants)
    return HttpResponse(text, content_type=content_type)
