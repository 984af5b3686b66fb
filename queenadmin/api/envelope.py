"""The API's error envelope: every refusal on ``/api/`` as the protocol's JSON.

``ApiErrorMiddleware`` sits in ``MIDDLEWARE`` (so in every chain that
serves the API: the full one, the API's own and the pops'); refusals the
API's views make themselves go through ``api/errors.py``.
"""

from __future__ import annotations

import json

from django.core.exceptions import TooManyFieldsSent
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.urls import Resolver404, resolve

from queenadmin.api import errors as error_table
from queenadmin.api.bodies import BodyTooLarge
from queenadmin.domain import names
from queenadmin.errors import (
    EphemeralBadRequest,
    InvalidArgument,
    KVBadRequest,
    LocksBadRequest,
    QueenError,
    TimersBadRequest,
)
from queenadmin.plumbing import db
from queenadmin.plumbing.middleware import DualModeMiddleware, payload_too_large

#: Answers Django or ninja give on their own in HTML or plain text, as the
#: protocol's engine family (``{"error", "code"}``) on API routes.
_ENVELOPES = {
    400: ("the request is malformed", "bad_request"),
    403: ("forbidden", "forbidden"),
    404: ("no such route", "not_found"),
    405: ("this method is not allowed on this route", "method_not_allowed"),
    500: ("internal server error", "internal"),
}


def _json_error(detail: str, code: str, status: int) -> HttpResponse:
    body = json.dumps({"error": detail, "code": code}, separators=(",", ":"))
    return HttpResponse(body, status=status, content_type="application/json")


#: The API's paths: /api/v1 and Queen's Streams SDK routes, /streams/v1.
_PREFIXES = ("/api/", "/streams/")


class ApiErrorMiddleware(DualModeMiddleware):
    """Every refusal on ``/api/`` in the protocol's JSON envelope.

    Ninja answers a wrong method with a plain-text 405, and Django a query
    string of over ``DATA_UPLOAD_MAX_NUMBER_FIELDS`` fields (or any other
    ``SuspiciousOperation``) with an HTML 400. The 413 of the body limit
    stays plain text, as the protocol says.
    """

    def before(self, request: HttpRequest) -> HttpResponseBase | None:
        if not request.path.startswith(_PREFIXES):
            return None
        try:
            request.GET  # noqa: B018 - parses the query string once, here
        except TooManyFieldsSent:
            return _json_error("the query string has too many fields", "bad_request", 400)
        return unstorable_parameter(request)

    def after(self, request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        status = response.status_code
        if (
            status < 400
            or status == 413
            or not request.path.startswith(_PREFIXES)
            or response.get("Content-Type", "").startswith("application/json")
        ):
            return response
        detail, code = _ENVELOPES.get(
            status, ("the request was refused", "bad_request" if status < 500 else "internal")
        )
        answer = _json_error(detail, code, status)
        if response.has_header("Allow"):
            answer["Allow"] = response["Allow"]
        return answer

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        """A lost or refused database connection: 503, which clients retry.

        A connection that went away while idle less than a second (see
        ``pgbackend``), a PostgreSQL restart or its connection limit: the
        request did nothing (its transaction rolled back), and the next one
        gets a new connection. Other errors stay 500s.

        psycopg's "received 2 results from command 'BEGIN'" (or 'COMMIT')
        is the same loss through PgBouncer (``db.lost_mid_command``): 503 too.

        A prepared statement missing from (or already in) the server session
        is a transaction pooler this process was not told about: 503 as
        well, with one log line naming ``QUEENADMIN_DB_POOLER``
        (``db.pooler_session_error``) instead of a traceback per call.

        A body whose parse would take too much memory (``BodyTooLarge``) is
        answered as the body limit answers, 413 in plain text.
        """
        if isinstance(exception, BodyTooLarge):
            return payload_too_large()
        if not request.path.startswith(_PREFIXES):
            return None
        if isinstance(exception, OperationalError | InterfaceError):
            return _unavailable()
        if db.lost_mid_command(exception):
            return _unavailable()
        if db.pooler_session_error(exception):
            answer = _unavailable()
            # The log line above says it all: not one "Service Unavailable"
            # line per call from django.request as well.
            answer._has_been_logged = True  # type: ignore[attr-defined]
            return answer
        return None


def unstorable_parameter(request: HttpRequest) -> HttpResponse | None:
    """400 when the path or the query string holds text no database can
    store or compare (``names.unstorable``: a NUL, a lone surrogate), in the
    route's error family; else ``None``.

    PostgreSQL refuses a NUL in any text it is sent, so a read that passed
    one on to a query answered 500 there and an empty page on SQLite. Every
    API request passes here before its route, so no route can forget the
    check, and both databases answer the same.
    """
    for key, values in request.GET.lists():
        for text in (key, *values):
            fault = names.unstorable(text)
            if fault is not None:
                return _bad_parameter(request, key, fault)
    fault = names.unstorable(request.path)
    if fault is None:
        return None
    return _bad_parameter(request, _path_parameter(request) or "the path", fault)


def _path_parameter(request: HttpRequest) -> str | None:
    """The wire name of the path parameter that holds the bad text."""
    try:
        match = resolve(request.path_info, getattr(request, "urlconf", None))
    except Resolver404:
        return None
    for name, value in match.kwargs.items():
        if isinstance(value, str) and names.unstorable(value) is not None:
            head, *rest = name.split("_")
            return head + "".join(part.title() for part in rest)
    return None


#: Path prefixes whose routes answer a family of their own (api/errors.py).
_FAMILIES: tuple[tuple[str, type[QueenError], str | None], ...] = (
    ("/api/v1/kv", KVBadRequest, "kv_bad_key"),
    ("/api/v1/resources/kv/", KVBadRequest, "kv_bad_key"),
    ("/api/v1/locks", LocksBadRequest, None),
    ("/api/v1/timers", TimersBadRequest, "timers_bad_request"),
    ("/api/v1/ephemeral/", EphemeralBadRequest, None),
)


def _bad_parameter(request: HttpRequest, what: str, fault: str) -> HttpResponse:
    refusal: QueenError = InvalidArgument(f"{what} {fault}")
    for prefix, family, reason in _FAMILIES:
        if request.path.startswith(prefix):
            refusal = family(f"{what} {fault}", reason=reason)
            break
    status, body = error_table.render(refusal)
    return HttpResponse(json.dumps(body, separators=(",", ":")), status=status, content_type="application/json")


def _unavailable() -> HttpResponse:
    answer = _json_error("the database is unavailable; retry", "unavailable", 503)
    answer["Retry-After"] = "1"
    return answer
