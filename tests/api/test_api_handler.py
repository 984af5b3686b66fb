"""The API's own handler: MIDDLEWARE without the browser-only entries.

``server.app.application`` sends ``/api/...``, ``/health`` and ``/metrics`` to
``ApiWSGIHandler``; its answers and headers are the full chain's, and a
session cookie or a CSRF token has no effect on an API call.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.test import Client, override_settings
from django.urls import path

from queenadmin.api.http import json_response
from queenadmin.domain import tokens
from queenadmin.server import handlers as apihandler

pytestmark = pytest.mark.django_db

FULL_CHAIN_ONLY = {
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "queenadmin.server.secure_cookies.SecureCookiesMiddleware",
    "django_otp.middleware.OTPMiddleware",
    "queenadmin.dashboard.twofactor.SecondFactorMiddleware",
    "axes.middleware.AxesMiddleware",
    "queenadmin.server.csp.CSPMiddleware",
    "queenadmin.dashboard.middleware.RefuseUnstorable",
}


@pytest.fixture
def handler() -> Iterator[apihandler.ApiWSGIHandler]:
    # As Django's test client does: the request signals would close the
    # test's connection (it is inside the test's transaction).
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield apihandler.ApiWSGIHandler()
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def _call(
    handler: apihandler.ApiWSGIHandler, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    raw = b"" if body is None else json.dumps(body).encode()
    environ = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "QUERY_STRING": "",
        "SERVER_NAME": "testserver",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(raw),
        "wsgi.errors": io.StringIO(),
        "CONTENT_LENGTH": str(len(raw)),
        "CONTENT_TYPE": "application/json",
    }
    for name, value in (headers or {}).items():
        environ["HTTP_" + name.upper().replace("-", "_")] = value
    answer: dict[str, Any] = {}

    def start_response(status: str, response_headers: list[tuple[str, str]], exc_info: Any = None) -> None:
        answer["status"] = int(status.split()[0])
        answer["headers"] = {k.lower(): v for k, v in response_headers}

    chunks = handler(environ, start_response)
    body_bytes = b"".join(chunks)
    getattr(chunks, "close", lambda: None)()
    return answer["status"], answer["headers"], body_bytes


def test_the_api_chain_is_middleware_without_the_browser_entries():
    chain = apihandler.api_middleware()
    assert chain == [m for m in settings.MIDDLEWARE if m not in FULL_CHAIN_ONLY]
    assert not FULL_CHAIN_ONLY & set(chain)
    for kept in (
        "queenadmin.server.middleware.BodyLimitMiddleware",
        "queenadmin.api.envelope.ApiErrorMiddleware",
        "django.middleware.security.SecurityMiddleware",
        "django.middleware.common.CommonMiddleware",
        "django.middleware.clickjacking.XFrameOptionsMiddleware",
    ):
        assert kept in chain


@pytest.mark.parametrize(
    ("path", "api"),
    [
        ("/api/v1/kv", True),
        ("/api/v1/pop/queue/q", True),  # (served by the pop handler before this)
        ("/api/nope", True),
        ("/api", True),
        ("/health", True),
        ("/metrics", True),
        ("/healthz", False),
        ("/apix", False),
        ("/", False),
        ("/admin/", False),
        ("/locks/", False),
    ],
)
def test_which_paths_take_the_api_chain(path, api):
    assert apihandler.is_api_path(path) is api


def test_serve_routes_the_api_to_its_own_handler():
    from queenadmin.server import app as asgi

    assert isinstance(asgi.api_app.wsgi_app, apihandler.ApiWSGIHandler)
    assert not isinstance(asgi.wsgi_app.wsgi_app, apihandler.ApiWSGIHandler)
    assert asgi.api_app.threads is asgi.wsgi_app.threads


def test_serve_answers_the_websocket_routes_the_settings_name(settings):
    """The server takes its websocket routes from ``QUEENADMIN_WEBSOCKET_ROUTES``
    (the dashboard's), not from an import of the dashboard; none named, none served."""
    from queenadmin.dashboard.routing import websocket_urlpatterns
    from queenadmin.server import app as asgi

    assert asgi._websocket_routes() == websocket_urlpatterns
    settings.QUEENADMIN_WEBSOCKET_ROUTES = ""
    assert asgi._websocket_routes() == []


def test_the_wsgi_threads_default_to_four_and_follow_the_environment(monkeypatch):
    from queenadmin.server import wsgi_bridge

    monkeypatch.delenv("QUEENADMIN_HTTP_THREADS", raising=False)
    assert wsgi_bridge.http_threads() == 4
    monkeypatch.setenv("QUEENADMIN_HTTP_THREADS", "12")
    assert wsgi_bridge.http_threads() == 12


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/api/v1/kv", {"operations": [{"op": "put", "ns": "h", "key": "k", "value": 1, "forever": True}]}),
        ("POST", "/api/v1/kv", {"operations": [{"op": "get", "ns": "h", "key": "missing"}]}),
        ("POST", "/api/v1/kv", {"operations": "no"}),
        ("GET", "/api/v1/kv", None),
        ("GET", "/api/v1/no/such/route", None),
        ("GET", "/health", None),
    ],
)
def test_answers_and_headers_match_the_full_chain(handler, method, path, body):
    token = tokens.token_create(by=tokens.HOST, name="handler")
    auth = {"Authorization": f"Bearer {token}"}
    status, headers, raw = _call(handler, method, path, body, auth)
    full = Client(HTTP_AUTHORIZATION=auth["Authorization"]).generic(
        method, path, data=b"" if body is None else json.dumps(body), content_type="application/json"
    )
    if path == "/api/v1/kv" and body and body["operations"] != "no" and body["operations"][0]["op"] == "put":
        # The second put bumps the version: compare the shape, not the number.
        assert json.loads(raw)["results"][0]["applied"] is json.loads(full.content)["results"][0]["applied"] is True
    else:
        assert raw == full.content
    assert status == full.status_code
    assert headers == {k.lower(): v for k, v in full.headers.items()}
    if status == 200:
        # The security middleware's headers are there.
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["x-frame-options"] == "DENY"


def test_a_session_cookie_does_not_authenticate_an_api_call(handler):
    staff = get_user_model().objects.create_user("ops", password="pw-for-tests", is_staff=True, is_superuser=True)
    browser = Client()
    browser.force_login(staff)
    cookie = f"{settings.SESSION_COOKIE_NAME}={browser.cookies[settings.SESSION_COOKIE_NAME].value}"
    status, headers, raw = _call(
        handler, "POST", "/api/v1/kv", {"operations": [{"op": "get", "ns": "h", "key": "k"}]}, {"Cookie": cookie}
    )
    assert status == 401
    # The same answer as with no credentials at all.
    _, _, anonymous = _call(handler, "POST", "/api/v1/kv", {"operations": [{"op": "get", "ns": "h", "key": "k"}]})
    assert json.loads(raw) == json.loads(anonymous)
    assert headers["www-authenticate"] == "Bearer"
    assert "set-cookie" not in headers
    assert "cookie" not in headers.get("vary", "").lower()


def test_a_csrf_token_has_no_effect_on_an_api_call(handler):
    token = tokens.token_create(by=tokens.HOST, name="csrf")
    body = {"operations": [{"op": "put", "ns": "h", "key": "c", "value": 1, "forever": True}]}
    for extra in (
        {},
        {"Cookie": "csrftoken=" + "a" * 32, "X-CSRFToken": "b" * 32},
        {"Cookie": "csrftoken=" + "a" * 32},
        {"X-CSRFToken": "garbage", "Origin": "http://evil.example"},
    ):
        status, headers, raw = _call(handler, "POST", "/api/v1/kv", body, {"Authorization": f"Bearer {token}", **extra})
        assert status == 200, raw
        assert json.loads(raw)["results"][0]["applied"] is True
        assert "set-cookie" not in headers


def _other_kv(request):
    # An answer the schema allows (the contract test checks every recorded
    # one), told apart from the real view's by its empty results.
    return json_response({"results": []})


#: The URL conf of ``test_a_new_urlconf_is_not_answered_from_the_remembered_routes``.
urlpatterns = [path("api/v1/kv", _other_kv)]


def test_only_literal_routes_are_remembered(handler):
    token = tokens.token_create(by=tokens.HOST, name="routes")
    auth = {"Authorization": f"Bearer {token}"}
    get = {"operations": [{"op": "get", "ns": "h", "key": "k"}]}
    for _ in range(2):
        assert _call(handler, "POST", "/api/v1/kv", get, auth)[0] == 200
        assert _call(handler, "GET", "/health")[0] == 200
    assert set(handler._literal_routes) == {"/api/v1/kv", "/health"}
    # A route with arguments, and made-up paths the catch-all answers, are not kept.
    assert _call(handler, "GET", "/api/v1/kv/h/k", None, auth)[0] == 200
    for n in range(50):
        status, _, raw = _call(handler, "GET", f"/api/made-up-{n}", None, auth)
        assert status == 404
        assert json.loads(raw)["path"] == f"/api/made-up-{n}"
    assert set(handler._literal_routes) == {"/api/v1/kv", "/health"}


def test_a_new_urlconf_is_not_answered_from_the_remembered_routes(handler):
    token = tokens.token_create(by=tokens.HOST, name="urlconf")
    auth = {"Authorization": f"Bearer {token}"}
    get = {"operations": [{"op": "get", "ns": "h", "key": "k"}]}
    real = b'{"results":[{"index":0,"op":"get","found":false'
    assert _call(handler, "POST", "/api/v1/kv", get, auth)[2].startswith(real)
    with override_settings(ROOT_URLCONF=__name__):
        assert _call(handler, "POST", "/api/v1/kv", get, auth)[2] == b'{"results":[]}'
    assert _call(handler, "POST", "/api/v1/kv", get, auth)[2].startswith(real)


def test_a_view_middleware_adding_kwargs_does_not_reach_the_next_request(handler):
    seen: list[dict[str, Any]] = []

    def process_view(request, view, args, kwargs):
        seen.append(dict(kwargs))
        kwargs["added"] = True  # a view that took it would get it; the next request must not

    handler._view_middleware.append(process_view)
    token = tokens.token_create(by=tokens.HOST, name="kwargs")
    auth = {"Authorization": f"Bearer {token}"}
    # /health takes no argument "added": that call fails, the next one must not.
    assert _call(handler, "GET", "/health", None, auth)[0] == 500
    handler._view_middleware.remove(process_view)
    handler._view_middleware.append(lambda request, view, args, kwargs: seen.append(dict(kwargs)))
    assert _call(handler, "GET", "/health", None, auth)[0] == 200
    assert seen == [{}, {}]
