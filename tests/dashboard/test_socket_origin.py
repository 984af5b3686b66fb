"""The live socket opens only for the origins the site serves: the one the
handshake came to (scheme, host and port) and ``QUEENADMIN_ORIGINS`` (a
proxy's public address), which is also what Django's CSRF check trusts.

A missing ``Origin`` is refused: browsers always send one on a websocket, so
only a tool leaves it out, and the socket serves the dashboard's pages."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from asgiref.sync import sync_to_async
from channels.testing.websocket import WebsocketCommunicator
from django.http import HttpResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.test import Client, RequestFactory, override_settings

from queenadmin.server.app import _websocket as websocket_app
from queenadmin.server.origins import parse_origins
from tests.conftest import ROOT

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("short_connections")]

PROXY = "https://queen.example.com"

#: (Origin, Host, over TLS, allowed): the page's origin against the address
#: the handshake came to.
CASES = [
    ("http://testserver", "testserver", False, True),
    ("http://127.0.0.1:8000", "127.0.0.1:8000", False, True),
    ("https://127.0.0.1:8443", "127.0.0.1:8443", True, True),
    # Another port of the same host: another origin.
    ("http://testserver:9999", "testserver", False, False),
    ("http://127.0.0.1:9999", "127.0.0.1:8000", False, False),
    ("http://127.0.0.1", "127.0.0.1:8000", False, False),
    # Another scheme.
    ("https://testserver", "testserver", False, False),
    ("http://127.0.0.1:8443", "127.0.0.1:8443", True, False),
    # Another host, allowed or not.
    ("http://localhost:8000", "127.0.0.1:8000", False, False),
    ("http://evil.example", "testserver", False, False),
    # A host outside ALLOWED_HOSTS is no site of ours (DNS rebinding).
    ("http://evil.example:8000", "evil.example:8000", False, False),
    ("null", "testserver", False, False),
    # The proxy's public origin, configured.
    (PROXY, "127.0.0.1:8000", False, True),
    (PROXY, "testserver", True, True),
    ("http://queen.example.com", "127.0.0.1:8000", False, False),
    ("https://queen.example.com:8443", "127.0.0.1:8000", False, False),
    # A configured wildcard: its subdomains, as Django's CSRF check reads it.
    ("https://a.example.org", "127.0.0.1:8000", False, True),
    ("https://example.org.evil.example", "127.0.0.1:8000", False, False),
]


@pytest.fixture(autouse=True)
def memory_layer():
    with override_settings(
        CHANNEL_LAYERS={"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}},
        CSRF_TRUSTED_ORIGINS=parse_origins(f"{PROXY},https://*.example.org", name="QUEENADMIN_ORIGINS"),
    ):
        yield


def _session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


async def _opens(cookie: str, origin: str | None, host: str, secure: bool) -> bool:
    """Whether ``/ws/overview/`` opens and sends the page's live regions."""
    headers = [(b"host", host.encode()), (b"cookie", f"sessionid={cookie}".encode())]
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    communicator = WebsocketCommunicator(websocket_app, "/ws/overview/", headers=headers)
    communicator.scope["scheme"] = "wss" if secure else "ws"
    connected, _ = await communicator.connect(timeout=10)
    if not connected:
        return False
    first = await communicator.receive_output(timeout=10)
    await communicator.disconnect()
    assert first["type"] == "websocket.send", first
    return True


async def test_only_the_sites_own_origins_open_the_live_socket(operator):
    """With an operator's session cookie, a page on another port, scheme or
    host of the machine is refused at the handshake; the site's own origin
    and the configured proxy origin get the live page."""
    cookie = await sync_to_async(_session_cookie)(operator)
    found = [(origin, host, secure, await _opens(cookie, origin, host, secure)) for origin, host, secure, _ in CASES]
    assert found == CASES


async def test_a_handshake_without_an_origin_is_refused(operator):
    """No ``Origin`` header: refused (browsers always send one; a tool with a
    stolen cookie could send any, so nothing is lost by refusing)."""
    cookie = await sync_to_async(_session_cookie)(operator)
    assert not await _opens(cookie, None, "testserver", False)
    assert await _opens(cookie, "http://testserver", "testserver", False)


def test_the_socket_and_csrf_trust_the_same_origins():
    """For every case, Django's CSRF check accepts a form from the origin
    exactly when the socket opens for it."""
    factory = RequestFactory()
    token = "a" * 32
    for origin, host, secure, allowed in CASES:
        request = factory.post(
            "/logout/", {"csrfmiddlewaretoken": token}, secure=secure, headers={"origin": origin, "host": host}
        )
        request.COOKIES["csrftoken"] = token
        refused = CsrfViewMiddleware(lambda r: HttpResponse()).process_view(request, lambda r: HttpResponse(), (), {})
        assert (refused is None) == allowed, (origin, host, secure)


def test_queenadmin_origins_feeds_csrf_trusted_origins(tmp_path):
    """``QUEENADMIN_ORIGINS`` (and the older ``DJANGO_CSRF_TRUSTED_ORIGINS``)
    become ``CSRF_TRUSTED_ORIGINS``, the list the socket reads; a value that is
    no origin stops the start with the setting's name."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    env.update(
        DJANGO_SETTINGS_MODULE="queenadmin.settings",
        QUEENADMIN_DATA_DIR=str(tmp_path),
        QUEENADMIN_ORIGINS=f"{PROXY}, https://*.example.org",
        DJANGO_CSRF_TRUSTED_ORIGINS="https://old.example.net",
    )
    code = "from django.conf import settings; print(settings.CSRF_TRUSTED_ORIGINS)"
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert run.stdout.strip() == repr([PROXY, "https://*.example.org", "https://old.example.net"])

    env["QUEENADMIN_ORIGINS"] = "queen.example.com"
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert run.returncode != 0
    assert "QUEENADMIN_ORIGINS: 'queen.example.com' is not an origin" in run.stderr
