"""The WSGI bridge's environ: a2wsgi's, with header names made once."""

from __future__ import annotations

import io
from typing import Any

import pytest
from a2wsgi.wsgi import build_environ

from queenadmin.server import wsgi_bridge


def _scope(**extra: Any) -> dict[str, Any]:
    scope: dict[str, Any] = {
        "type": "http",
        "method": "POST",
        "path": "/api/v1/kv",
        "raw_path": b"/api/v1/kv",
        "root_path": "",
        "query_string": b"a=1",
        "http_version": "1.1",
        "scheme": "http",
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 5000),
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", b"2"),
            (b"authorization", b"Bearer t"),
            (b"x-a", b"1"),
            (b"x-a", b"2"),
            (b"x-latin", "caf\u00e9".encode("latin1")),
        ],
    }
    scope.update(extra)
    return scope


def test_environ_has_what_a_wsgi_app_reads():
    """Method, path, query, headers (a repeated one joined), server, client, input."""
    body = io.BytesIO(b"{}")
    environ = wsgi_bridge.wsgi_environ(_scope(), body)
    assert environ["REQUEST_METHOD"] == "POST"
    assert environ["PATH_INFO"] == "/api/v1/kv"
    assert environ["QUERY_STRING"] == "a=1"
    assert environ["CONTENT_TYPE"] == "application/json"
    assert environ["CONTENT_LENGTH"] == "2"
    assert environ["HTTP_AUTHORIZATION"] == "Bearer t"
    assert environ["HTTP_X_A"] == "1,2"
    assert environ["SERVER_NAME"] == "127.0.0.1"
    assert environ["SERVER_PORT"] == "8000"
    assert environ["REMOTE_ADDR"] == "127.0.0.1"
    assert environ["REMOTE_PORT"] == "5000"
    assert environ["wsgi.input"] is body
    assert environ["wsgi.url_scheme"] == "http"


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"root_path": "/queen", "path": "/queen/api/v1/kv"},
        {"path": "/api/v1/kv/ns/caf\u00e9", "client": None, "server": None, "headers": []},
        {"scheme": "https", "http_version": "1.0", "query_string": b""},
    ],
)
def test_environ_is_a2wsgis(extra, monkeypatch):
    """The same environ as ``a2wsgi.wsgi.build_environ``, the one it replaces,
    twice over (the second time with the header names already kept); a
    ``SCRIPT_NAME`` in the process's environment, which a2wsgi reads, is
    not read: the prefix is the scope's ``root_path``."""
    body = io.BytesIO(b"{}")
    for _ in range(2):
        assert wsgi_bridge.wsgi_environ(_scope(**extra), body) == build_environ(_scope(**extra), body)
    expected = build_environ(_scope(**extra), body)
    monkeypatch.setenv("SCRIPT_NAME", "/mounted")
    assert wsgi_bridge.wsgi_environ(_scope(**extra), body) == expected


def test_header_names_kept_are_bounded(monkeypatch):
    """Header names a client makes up are named right but not all kept."""
    monkeypatch.setattr(wsgi_bridge, "_header_names", dict(wsgi_bridge._header_names))
    headers = [(f"x-made-up-{n}".encode(), b"v") for n in range(wsgi_bridge._HEADER_NAMES_KEPT + 50)]
    environ = wsgi_bridge.wsgi_environ(_scope(headers=headers), io.BytesIO(b""))
    assert environ[f"HTTP_X_MADE_UP_{wsgi_bridge._HEADER_NAMES_KEPT + 49}"] == "v"
    assert len(wsgi_bridge._header_names) == wsgi_bridge._HEADER_NAMES_KEPT
