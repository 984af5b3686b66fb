"""Open-API mode (``QUEENADMIN_OPEN_API=1``, ``api/openmode.py``): the API
without tokens refuses what another site's page could make the developer's
browser send without a preflight, ``serve`` warns at every start, and it
refuses the mode on a host that is not a loopback address unless
``QUEENADMIN_OPEN_API_ANY_HOST=1``."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest
from django.test import Client, override_settings
from queen.http.push_binary import PushBatch, encode_push_binary

from queenadmin.api import openmode
from queenadmin.models import KVEntry
from tests.conftest import ROOT, _server_env, run_server

open_mode = override_settings(QUEENADMIN_OPEN_API=True)


def _put(key: str) -> bytes:
    ops = [{"op": "put", "ns": "open-mode", "key": key, "value": 1, "forever": True}]
    return json.dumps({"operations": ops}).encode()


def _written(key: str) -> bool:
    return KVEntry.objects.filter(namespace="open-mode", key=key).exists()


@pytest.mark.django_db
@open_mode
def test_a_body_a_browser_sends_without_a_preflight_is_refused():
    """A KV write whose body is a form's, ``text/plain`` or has no
    ``Content-Type`` at all: 415 in the protocol's envelope, nothing written.
    JSON (with or without a charset) and the binary push are served."""
    client = Client()
    for content_type in (
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "",
    ):
        key = f"refused-{content_type or 'none'}"
        answer = client.generic("POST", "/api/v1/kv", _put(key), CONTENT_TYPE=content_type)
        assert answer.status_code == 415, content_type
        shown = repr(content_type or "(none)")
        assert answer.json() == {
            "error": f"open-API mode: a body of type {shown}; send application/json (or application/x-queen-push)",
            "code": "unsupported_media_type",
        }
        assert not _written(key), content_type
    for content_type in ("application/json", "application/json; charset=utf-8"):
        answer = client.generic("POST", "/api/v1/kv", _put(content_type), CONTENT_TYPE=content_type)
        assert answer.status_code == 200, content_type
        assert _written(content_type)
    pushed = client.generic(
        "POST",
        "/api/v1/push",
        encode_push_binary([PushBatch("open-mode-bin", "Default", [b'{"a":1}'], None)]),
        CONTENT_TYPE="application/x-queen-push",
    )
    assert pushed.status_code == 201, pushed.content
    # A request without a body needs no Content-Type (the official client
    # sends none then).
    assert client.generic("POST", "/api/v1/kv", b"", CONTENT_TYPE="").status_code != 415


@pytest.mark.django_db(transaction=True)
@open_mode
def test_a_request_from_another_page_is_refused(short_connections):
    """A foreign ``Origin`` (another host, another port of this one, ``null``)
    or a ``Sec-Fetch-Site`` of another site: 403, the KV key unwritten and
    the message unpopped (a pop is a GET an ``<img>`` can send). The site's
    own origin, ``same-origin`` and ``none`` (typed in the address bar) are
    served, as is a request without either header (the official client)."""
    client = Client()
    pushed = client.post("/api/v1/push", {"items": [{"queue": "open-pop", "payload": {"n": 1}}]}, "application/json")
    assert pushed.status_code == 201
    foreign = [
        {"origin": "http://evil.example"},
        {"origin": "http://testserver:9999"},
        {"origin": "https://testserver"},
        {"origin": "null"},
        {"sec-fetch-site": "cross-site"},
        {"sec-fetch-site": "same-site"},
        {"origin": "http://testserver", "sec-fetch-site": "same-site"},
    ]
    for n, headers in enumerate(foreign):
        key = f"foreign-{n}"
        answer = client.post("/api/v1/kv", _put(key), "application/json", headers=headers)
        assert answer.status_code == 403, headers
        body = answer.json()
        assert (body["error"], body["code"]) == ("forbidden", "forbidden"), body
        assert body["detail"].startswith("open-API mode: "), body
        assert not _written(key), headers
        popped = client.get("/api/v1/pop/queue/open-pop", {"wait": "false"}, headers=headers)
        assert popped.status_code == 403, headers
        assert popped.json()["code"] == "forbidden"
        metrics = client.get("/metrics", headers=headers)
        assert metrics.status_code == 403, headers
    own = [{}, {"origin": "http://testserver"}, {"sec-fetch-site": "same-origin"}, {"sec-fetch-site": "none"}]
    for n, headers in enumerate(own):
        key = f"own-{n}"
        assert client.post("/api/v1/kv", _put(key), "application/json", headers=headers).status_code == 200
        assert _written(key), headers
    popped = client.get("/api/v1/pop/queue/open-pop", {"wait": "false"}, headers={"origin": "http://testserver"})
    assert [m["data"] for m in popped.json()["messages"]] == [{"n": 1}]


def test_serve_refuses_the_open_mode_only_off_loopback():
    """Loopback addresses (and ``localhost``) may serve it; any other host is
    refused with a message naming the second setting, unless it is set."""
    for host in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"):
        assert openmode.start_refusal(host, any_host=False) is None, host
    for host in ("0.0.0.0", "::", "192.168.1.20", "queen.example.com"):
        refused = openmode.start_refusal(host, any_host=False)
        assert refused is not None
        assert f"--host {host}, which is not a loopback address" in refused
        assert "QUEENADMIN_OPEN_API_ANY_HOST=1" in refused
        assert openmode.start_refusal(host, any_host=True) is None


@pytest.mark.live
def test_serve_will_not_start_the_open_mode_on_every_interface(tmp_path):
    """``serve --host 0.0.0.0`` with ``QUEENADMIN_OPEN_API=1`` alone exits 1
    with one line saying why, before it listens."""
    env = {**_server_env(), "QUEENADMIN_DATA_DIR": str(tmp_path), "QUEENADMIN_OPEN_API": "1"}
    env.pop("QUEENADMIN_OPEN_API_ANY_HOST", None)
    run = subprocess.run(
        [sys.executable, "manage.py", "serve", "--host", "0.0.0.0", "--port", "0", "--no-migrate"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 1
    assert "refusing it on --host 0.0.0.0, which is not a loopback address" in run.stderr + run.stdout
    assert "serving on" not in run.stderr + run.stdout


@pytest.mark.live
def test_serve_warns_at_start_and_refuses_a_cross_site_write():
    """With the second setting it starts on 0.0.0.0 and logs the warning; a
    ``text/plain`` POST (what another site's form or ``fetch`` sends) is
    refused over the wire and writes nothing."""
    env = {"QUEENADMIN_OPEN_API": "1", "QUEENADMIN_OPEN_API_ANY_HOST": "1"}
    with run_server(extra_env=env, args=("--host", "0.0.0.0")) as server:
        port = server.url.rsplit(":", 1)[1]
        assert f"QUEENADMIN_OPEN_API=1: the API on 0.0.0.0 port {port} takes no token" in server.log()
        refused = httpx.post(
            f"{server.url}/api/v1/kv",
            content=_put("wire"),
            headers={"Content-Type": "text/plain", "Origin": "http://evil.example"},
        )
        assert refused.status_code == 403
        refused = httpx.post(f"{server.url}/api/v1/kv", content=_put("wire"), headers={"Content-Type": "text/plain"})
        assert refused.status_code == 415
        get = [{"op": "get", "ns": "open-mode", "key": "wire"}]
        read = httpx.post(f"{server.url}/api/v1/kv", json={"operations": get})
        assert read.status_code == 200
        assert read.json()["results"][0].get("found") is False, read.json()
