"""``bearer_token`` reads the Authorization header the same way under WSGI and ASGI."""

from __future__ import annotations

import io

import pytest
from django.core.handlers.asgi import ASGIRequest
from django.test import RequestFactory

from queenadmin.api import bearer_token


def asgi_request(headers: list[tuple[bytes, bytes]]) -> ASGIRequest:
    scope = {
        "type": "http",
        "method": "GET",
        "path": "/api/v1/resources/queues",
        "query_string": b"",
        "headers": headers,
    }
    return ASGIRequest(scope, io.BytesIO(b""))


@pytest.mark.parametrize(
    ("value", "token"),
    [
        ("Bearer qa_abc", "qa_abc"),
        ("bearer qa_abc", "qa_abc"),
        ("BEARER qa_abc", "qa_abc"),
        ("Bearer  qa_abc", None),  # two spaces
        ("Bearer qa_abc ", None),  # trailing space
        ("Bearer qa_a bc", None),
        ("Bearer ", None),
        ("Basic qa_abc", None),
        ("qa_abc", None),
        ("", None),
    ],
)
def test_the_same_token_under_wsgi_and_asgi(value, token):
    wsgi = RequestFactory().get("/api/v1/resources/queues", HTTP_AUTHORIZATION=value)
    asgi = asgi_request([(b"authorization", value.encode())])
    assert bearer_token(wsgi) == token
    assert bearer_token(asgi) == token


def test_no_header_is_no_token():
    assert bearer_token(RequestFactory().get("/api/v1/resources/queues")) is None
    assert bearer_token(asgi_request([])) is None


def test_the_header_name_is_case_insensitive_on_the_wire():
    """HTTP header names have no case; ASGI servers lower them, WSGI upper-cases them into META."""
    assert bearer_token(asgi_request([(b"Authorization", b"Bearer qa_abc")])) == "qa_abc"
