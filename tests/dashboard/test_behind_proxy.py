"""Behind a TLS-terminating proxy, through ``serve`` (uvicorn's proxy headers).

uvicorn believes ``X-Forwarded-Proto`` and ``X-Forwarded-For`` only from the
addresses in ``FORWARDED_ALLOW_IPS``: from such a proxy an HTTPS request gets
``Secure`` cookies and HSTS, and failed logins count against the forwarded
client address (its right-most entry, the one the proxy added); from anyone
else both headers change nothing. These tests' requests come from
127.0.0.1, trusted or not by each server's setting.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import LiveServer, run_server

pytestmark = pytest.mark.live

HTTPS = {"X-Forwarded-Proto": "https"}
#: What is tested is the proxy's headers, not the password hasher: each of
#: the some fifteen logins would cost PBKDF2's 0.34 s of CPU.
FAST_HASHING = {"DJANGO_SETTINGS_MODULE": "tests.fast_hashing_settings"}


@pytest.fixture(scope="module")
def trusted() -> Iterator[LiveServer]:
    """127.0.0.1 is the trusted proxy (uvicorn's default, said outright).
    ``--bootstrap`` makes the account the tests log in with (``admin``,
    its password in first-run.txt) inside the server process."""
    env = {"FORWARDED_ALLOW_IPS": "127.0.0.1", "DJANGO_SECURE_HSTS_SECONDS": "3600", **FAST_HASHING}
    with run_server(extra_env=env, args=("--bootstrap",)) as server:
        yield server


@pytest.fixture(scope="module")
def password(trusted: LiveServer) -> str:
    """The password of ``trusted``'s ``admin``."""
    notes = Path(trusted.env["QUEENADMIN_DATA_DIR"]) / "first-run.txt"
    found = re.search(r"user admin, password (\S+)\)", notes.read_text())
    assert found is not None
    return found.group(1)


@pytest.fixture(scope="module")
def untrusted() -> Iterator[LiveServer]:
    """Only 192.0.2.1 is trusted: 127.0.0.1's forwarded headers are not;
    ``QUEENADMIN_HTTPS=1`` says browsers come over HTTPS only."""
    env = {"FORWARDED_ALLOW_IPS": "192.0.2.1", "QUEENADMIN_HTTPS": "1", **FAST_HASHING}
    with run_server(extra_env=env) as server:
        yield server


def set_cookies(response: httpx.Response) -> dict[str, str]:
    """Each cookie the answer sets -> its whole Set-Cookie line."""
    return {line.split("=", 1)[0]: line for line in response.headers.get_list("set-cookie")}


def secure(line: str) -> bool:
    return bool(re.search(r";\s*Secure(;|$)", line, re.IGNORECASE))


def login(server: LiveServer, username: str, password: str, headers: dict[str, str]) -> httpx.Response:
    """A login form's POST, with the CSRF cookie the login page gave (sent
    by hand: a client keeps a Secure cookie from plain HTTP)."""
    page = httpx.get(f"{server.url}/login/", headers=headers)
    token = re.search(r"csrftoken=([^;]+)", set_cookies(page)["csrftoken"]).group(1)
    origin = server.url.replace("http://", "https://") if headers.get("X-Forwarded-Proto") == "https" else server.url
    return httpx.post(
        f"{server.url}/login/",
        data={"username": username, "password": password, "csrfmiddlewaretoken": token},
        headers={**headers, "Cookie": f"csrftoken={token}", "Origin": origin},
    )


def test_https_from_the_trusted_proxy_gets_secure_cookies_and_hsts(trusted, password):
    page = httpx.get(f"{trusted.url}/login/", headers=HTTPS)
    assert secure(set_cookies(page)["csrftoken"])
    assert page.headers["strict-transport-security"] == "max-age=3600"
    logged_in = login(trusted, "admin", password, HTTPS)
    assert logged_in.status_code == 302
    assert secure(set_cookies(logged_in)["sessionid"])


def test_plain_http_gets_neither(trusted, password):
    page = httpx.get(f"{trusted.url}/login/")
    assert not secure(set_cookies(page)["csrftoken"])
    assert "strict-transport-security" not in page.headers
    logged_in = login(trusted, "admin", password, {})
    assert logged_in.status_code == 302
    assert not secure(set_cookies(logged_in)["sessionid"])


def test_an_untrusted_peers_forwarded_proto_is_ignored(untrusted):
    """No HSTS for a scheme nobody trusted; the cookies are Secure all the
    same, because QUEENADMIN_HTTPS says so."""
    page = httpx.get(f"{untrusted.url}/login/", headers=HTTPS)
    assert "strict-transport-security" not in page.headers
    assert secure(set_cookies(page)["csrftoken"])
    plain = httpx.get(f"{untrusted.url}/login/")
    assert secure(set_cookies(plain)["csrftoken"])


def test_failures_count_against_the_address_the_trusted_proxy_forwarded(trusted, password):
    """The right-most X-Forwarded-For entry is the client: what a client
    put before it (here a new address each time) changes nothing; another
    forwarded client is not locked."""
    for n in range(5):
        forwarded = {"X-Forwarded-For": f"203.0.113.{n}, 198.51.100.7"}
        assert login(trusted, f"guess{n}", "wrong", forwarded).status_code in (200, 429)
    locked = login(trusted, "admin", password, {"X-Forwarded-For": "198.51.100.7"})
    assert locked.status_code == 429
    assert "Try again in 15 minutes." in locked.text
    other = login(trusted, "admin", password, {"X-Forwarded-For": "198.51.100.8"})
    assert other.status_code == 302


def test_an_untrusted_peers_forwarded_for_is_ignored(untrusted):
    """From a peer that is no trusted proxy, a new X-Forwarded-For each
    time does not escape its own address's lockout."""
    for n in range(5):
        login(untrusted, f"guess{n}", "wrong", {"X-Forwarded-For": f"198.51.100.{n}"})
    locked = login(untrusted, "anyone", "wrong", {"X-Forwarded-For": "198.51.100.200"})
    assert locked.status_code == 429
    assert "Logins from your address are locked" in locked.text
