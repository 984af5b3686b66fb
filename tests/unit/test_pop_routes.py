"""The pop handler's resolving: the URL matches of the last few paths kept."""

from __future__ import annotations

from django.http import HttpRequest
from django.test import override_settings
from django.urls import path

from queenadmin.server import handlers


def _request(at: str) -> HttpRequest:
    request = HttpRequest()
    request.path_info = request.path = at
    return request


def _other_pop(request: HttpRequest, queue: str) -> None:
    return None


#: The URL conf of ``test_a_new_urlconf_drops_the_kept_matches``.
urlpatterns = [path("api/v1/pop/queue/<str:queue>", _other_pop)]


def test_each_view_gets_its_own_arguments_from_a_kept_match():
    handler = handlers.PopHandler()
    first = handler.resolve_request(_request("/api/v1/pop/queue/orders"))
    again = handler.resolve_request(_request("/api/v1/pop/queue/orders"))
    other = handler.resolve_request(_request("/api/v1/pop/queue/bills"))
    assert first[2] == again[2] == {"queue": "orders"}
    assert other[2] == {"queue": "bills"}
    first[2]["added"] = True  # a view middleware's change stays with its request
    assert handler.resolve_request(_request("/api/v1/pop/queue/orders"))[2] == {"queue": "orders"}
    assert set(handler._kept_routes) == {"/api/v1/pop/queue/orders", "/api/v1/pop/queue/bills"}


def test_the_kept_matches_are_bounded(monkeypatch):
    monkeypatch.setattr(handlers, "POP_ROUTES_KEPT", 3)
    handler = handlers.PopHandler()
    for n in range(10):
        request = _request(f"/api/v1/pop/queue/q{n}")
        assert handler.resolve_request(request)[2] == {"queue": f"q{n}"}
        assert request.resolver_match.kwargs == {"queue": f"q{n}"}
        assert len(handler._kept_routes) <= 3


def test_a_new_urlconf_drops_the_kept_matches():
    handler = handlers.PopHandler()
    real = handler.resolve_request(_request("/api/v1/pop/queue/orders"))[0]
    with override_settings(ROOT_URLCONF=__name__):
        assert handler.resolve_request(_request("/api/v1/pop/queue/orders"))[0] is _other_pop
    assert handler.resolve_request(_request("/api/v1/pop/queue/orders"))[0] is real
