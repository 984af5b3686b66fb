"""Single sign-on in process: the views, the ID token's checks, the rules'
effect on accounts and sessions, and local login turned off.

The provider here is a stub served from a thread (discovery, keys, token and
userinfo endpoints; it signs the ID token each test asks for), so that each
check of the token can be failed on purpose; tests/browser/test_sso.py
signs in at a real provider.
"""

from __future__ import annotations

import html
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jwt
import pytest
from axes.models import AccessAttempt
from cryptography.hazmat.primitives.asymmetric import rsa
from django.contrib.auth import BACKEND_SESSION_KEY
from django.contrib.auth.models import User
from django.test import Client

from queenadmin.dashboard.twofactor import SSO_BACKEND
from queenadmin.domain.roles import role_of
from queenadmin.models import AuditEntry
from tests.conftest import free_port
from tests.roles import role_group as _group

CLIENT_ID = "queenadmin-tests"
SECRET = "stub-client-secret"


class StubProvider:
    """An OpenID provider that answers what the test sets."""

    def __init__(self) -> None:
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        #: The ID token's claims for the next code (set by ``next_sign_in``).
        self.id_claims: dict[str, Any] = {}
        self.userinfo: dict[str, Any] = {}
        self.end_session = True
        self.token_requests: list[str] = []

    def document(self) -> dict[str, Any]:
        doc = {
            "issuer": self.issuer,
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token",
            "jwks_uri": f"{self.issuer}/jwks",
            "userinfo_endpoint": f"{self.issuer}/userinfo",
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
        }
        if self.end_session:
            doc["end_session_endpoint"] = f"{self.issuer}/logout?ui=1"
        return doc

    def answer(self, path: str, body: str) -> tuple[int, dict[str, Any]]:
        if path == "/.well-known/openid-configuration":
            return 200, self.document()
        if path == "/jwks":
            jwk = jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
            return 200, {"keys": [{**jwk, "kid": "stub", "use": "sig", "alg": "RS256"}]}
        if path == "/token":
            self.token_requests.append(body)
            token = jwt.encode(self.id_claims, self.key, algorithm="RS256", headers={"kid": "stub"})
            return 200, {"access_token": "stub-access", "token_type": "Bearer", "id_token": token}
        if path == "/userinfo":
            return 200, self.userinfo
        return 404, {"error": "not_found"}


@pytest.fixture(scope="module")
def stub() -> Iterator[StubProvider]:
    provider = StubProvider()

    class Handler(BaseHTTPRequestHandler):
        def _send(self, body: str = "") -> None:
            status, document = provider.answer(urlsplit(self.path).path, body)
            payload = json.dumps(document).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:
            self._send()

        def do_POST(self) -> None:
            self._send(self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode())

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", provider.port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield provider
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def sso_on(settings, stub: StubProvider, db: None) -> StubProvider:
    settings.QUEENADMIN_OIDC_ISSUER = stub.issuer
    settings.QUEENADMIN_OIDC_PROVIDER_NAME = "Stub"
    settings.QUEENADMIN_OIDC_CLIENT_ID = CLIENT_ID
    settings.QUEENADMIN_OIDC_CLIENT_SECRET = SECRET
    settings.QUEENADMIN_OIDC_ALLOWED_DOMAINS = "example.com"
    settings.QUEENADMIN_OIDC_ALLOWED_EMAILS = "guest@partner.test"
    stub.end_session = True
    _group("queenadmin viewers")
    _group("queenadmin operators")
    return stub


def begin(client: Client, next_url: str = "/") -> dict[str, str]:
    """Start a sign-in; the authorization request's parameters."""
    answer = client.get(f"/login/sso/?next={next_url}")
    assert answer.status_code == 302, answer.content
    return {k: v[0] for k, v in parse_qs(urlsplit(answer["Location"]).query).items()}


def sign_in(client: Client, stub: StubProvider, *, groups: Any = ("queenadmin-operators",), **claims: Any) -> Any:
    """The whole flow, the stub answering with these claims; the callback's answer."""
    params = begin(client)
    now = int(time.time())
    sub = claims.pop("sub", "u-1")
    stub.id_claims = {
        "iss": stub.issuer,
        "aud": CLIENT_ID,
        "sub": sub,
        "iat": now,
        "exp": now + 300,
        "nonce": params["nonce"],
        **{k: v for k, v in claims.items() if k in ("iss", "aud", "iat", "exp", "nonce", "azp")},
    }
    stub.userinfo = {
        "sub": sub,
        "email": "olga@example.com",
        "email_verified": True,
        "groups": list(groups),
        **{k: v for k, v in claims.items() if k not in stub.id_claims},
    }
    return client.get(f"/login/sso/callback/?code=the-code&state={params['state']}")


def test_the_login_pages_offer_the_provider_only_when_configured(client, sso_on, settings):
    assert "Sign in with Stub" in client.get("/login/").content.decode()
    assert "Sign in with Stub" in client.get("/admin/login/?next=/admin/").content.decode()
    settings.QUEENADMIN_OIDC_ISSUER = ""
    assert "Sign in with" not in client.get("/login/").content.decode()
    assert "Sign in with" not in client.get("/admin/login/?next=/admin/").content.decode()
    assert client.get("/login/sso/").status_code == 404
    assert client.get("/login/sso/callback/?code=x&state=y").status_code == 404


def test_the_authorization_request_carries_state_nonce_pkce_and_the_callback(client, sso_on):
    params = begin(client, "/queues/")
    assert params["client_id"] == CLIENT_ID
    assert params["redirect_uri"] == "http://testserver/login/sso/callback/"
    assert params["scope"] == "openid email profile"
    assert params["response_type"] == "code"
    assert params["code_challenge_method"] == "S256"
    assert len(params["state"]) >= 32
    assert len(params["nonce"]) >= 32


def test_an_allowed_user_is_made_with_the_claims_role_and_a_later_sign_in_demotes(client, sso_on):
    """The role is set again at every sign-in: a group taken away at the
    provider demotes at the next one."""
    answer = sign_in(client, sso_on, given_name="Olga")
    assert answer.status_code == 302
    assert answer["Location"] == "/"
    user = User.objects.get(username="olga@example.com")
    assert (role_of(user), user.email, user.first_name, user.has_usable_password()) == (
        "operators",
        "olga@example.com",
        "Olga",
        False,
    )
    assert client.session[BACKEND_SESSION_KEY] == SSO_BACKEND
    assert client.get("/tokens/").status_code == 200
    # The client authenticated with HTTP Basic, and sent the PKCE verifier.
    assert "code_verifier=" in sso_on.token_requests[-1]
    assert "client_secret" not in sso_on.token_requests[-1]

    assert sign_in(Client(), sso_on, groups=["queenadmin-viewers"]).status_code == 302
    user.refresh_from_db()
    assert role_of(user) == "viewers"
    # The first session has lost the operators' pages at once.
    assert client.get("/tokens/").status_code == 403
    entries = list(AuditEntry.objects.filter(action="login.sso").order_by("pk").values_list("before", "after", "via"))
    assert entries == [("new account", "role: operators", "sso"), ("role: operators", "role: viewers", "sso")]


def test_a_user_outside_the_allowlist_is_refused_without_an_account_or_a_lockout_count(client, sso_on):
    answer = sign_in(client, sso_on, email="mallory@elsewhere.test")
    assert answer.status_code == 403
    assert "mallory@elsewhere.test may not sign in here" in answer.content.decode()
    assert not User.objects.filter(username="mallory@elsewhere.test").exists()
    assert BACKEND_SESSION_KEY not in client.session
    assert not AccessAttempt.objects.exists()
    entry = AuditEntry.objects.get(action="login.sso_refused")
    assert (entry.actor, entry.target, entry.via) == ("mallory@elsewhere.test", "mallory@elsewhere.test", "sso")
    # A listed address of another domain is allowed.
    assert sign_in(Client(), sso_on, email="Guest@Partner.test").status_code == 302
    assert User.objects.filter(username="guest@partner.test").exists()


def test_losing_every_mapped_group_refuses_and_takes_the_role_away(client, sso_on):
    assert sign_in(client, sso_on).status_code == 302
    answer = sign_in(Client(), sso_on, groups=["somebody-else"])
    assert answer.status_code == 403
    assert "has no role here" in answer.content.decode()
    user = User.objects.get(username="olga@example.com")
    assert (role_of(user), user.is_staff) == (None, False)
    # Her earlier session can no longer see a page.
    assert client.get("/").status_code in (302, 403)
    entry = AuditEntry.objects.get(action="login.sso_refused")
    assert (entry.before, entry.after) == ("role: operators", "refused; role taken away")


def test_a_local_account_of_the_same_name_is_never_taken_over(client, sso_on):
    local = User.objects.create_user("olga@example.com", password="pw", is_staff=True)
    answer = sign_in(client, sso_on)
    assert answer.status_code == 403
    assert "A local account is named olga@example.com" in answer.content.decode()
    local.refresh_from_db()
    assert local.check_password("pw")
    assert role_of(local) is None
    assert local.is_staff
    # Handed over by removing its password.
    local.set_unusable_password()
    local.save()
    assert sign_in(Client(), sso_on).status_code == 302


@pytest.mark.parametrize(
    ("claims", "why"),
    [
        ({"aud": "another-client"}, "Audience doesn't match"),
        ({"iss": "http://127.0.0.1:9/other"}, "Invalid issuer"),
        ({"exp": 1_000_000_000}, "Signature has expired"),
        ({"nonce": "replayed"}, "nonce"),
        ({"aud": [CLIENT_ID, "other"]}, "azp"),
    ],
)
def test_an_id_token_failing_a_check_signs_nobody_in(client, sso_on, claims, why):
    answer = sign_in(client, sso_on, **claims)
    assert answer.status_code == 400
    assert why.lower() in html.unescape(answer.content.decode()).lower()
    assert not User.objects.filter(username="olga@example.com").exists()
    assert BACKEND_SESSION_KEY not in client.session


def test_several_audiences_pass_with_this_client_as_azp(client, sso_on):
    assert sign_in(client, sso_on, aud=[CLIENT_ID, "other"], azp=CLIENT_ID).status_code == 302


def test_an_unverified_address_is_refused(client, sso_on):
    answer = sign_in(client, sso_on, email_verified=False)
    assert answer.status_code == 403
    assert "has not verified the address" in answer.content.decode()


def test_callbacks_that_are_no_answer_to_this_sign_in_get_400(client, sso_on):
    # No sign-in begun in this session.
    assert client.get("/login/sso/callback/?code=c&state=s").status_code == 400
    begin(client)
    # An unknown state: a replay, or another browser's answer.
    answer = client.get("/login/sso/callback/?code=c&state=not-this-one")
    assert answer.status_code == 400
    assert "not for this browser" in answer.content.decode()
    # The provider said no.
    params = begin(client)
    answer = client.get(
        f"/login/sso/callback/?error=access_denied&error_description=User+said+no&state={params['state']}"
    )
    assert answer.status_code == 400
    assert "User said no" in answer.content.decode()
    assert client.get("/login/sso/callback/").status_code == 400


def test_a_provider_out_of_reach_is_said_502(client, sso_on, settings):
    settings.QUEENADMIN_OIDC_ISSUER = "http://127.0.0.1:9"
    answer = client.get("/login/sso/")
    assert answer.status_code == 502
    assert "cannot be reached" in answer.content.decode()


def test_logout_of_a_sso_session_goes_on_to_the_providers_logout(client, sso_on, settings):
    assert sign_in(client, sso_on).status_code == 302
    answer = client.post("/logout/")
    assert answer.status_code == 200
    assert BACKEND_SESSION_KEY not in client.session
    url = answer.context["url"]
    parts = urlsplit(url)
    assert f"{parts.scheme}://{parts.netloc}{parts.path}" == f"{sso_on.issuer}/logout"
    query = parse_qs(parts.query)
    assert query["ui"] == ["1"]
    assert query["client_id"] == [CLIENT_ID]
    assert query["post_logout_redirect_uri"] == ["http://testserver/login/"]
    assert jwt.decode(query["id_token_hint"][0], options={"verify_signature": False})["sub"] == "u-1"
    # Without an end_session_endpoint, or for a local session: Django's own.
    sso_on.end_session = False
    # A settings change forgets the provider's metadata read before.
    settings.QUEENADMIN_OIDC_LOGOUT_AT_PROVIDER = True
    other = Client()
    assert sign_in(other, sso_on).status_code == 302
    assert other.post("/logout/")["Location"] == "/login/"


def test_a_sso_session_owes_no_second_factor(client, sso_on, settings):
    settings.QUEENADMIN_REQUIRE_2FA = True
    assert sign_in(client, sso_on).status_code == 302
    assert client.get("/").status_code == 200
    assert client.get("/admin/").status_code == 200
    assert "Two-factor" not in client.get("/").content.decode()


def test_with_local_login_off_passwords_are_refused_before_being_checked(client, sso_on, settings):
    settings.QUEENADMIN_LOCAL_LOGIN = False
    User.objects.create_user("otto", password="pw", is_staff=True).groups.add(_group("queenadmin operators"))
    page = client.get("/login/").content.decode()
    assert "Sign in with Stub" in page
    assert 'name="password"' not in page
    answer = client.post("/login/", {"username": "otto", "password": "pw"})
    assert answer.status_code == 403
    assert "Password login is off here" in answer.content.decode()
    assert BACKEND_SESSION_KEY not in client.session
    answer = client.post("/admin/login/?next=/admin/", {"username": "otto", "password": "pw"})
    assert answer.status_code == 200
    assert "Password login is off here: sign in with Stub." in answer.content.decode()
    assert BACKEND_SESSION_KEY not in client.session
    assert not AccessAttempt.objects.exists()
    assert 'name="password"' not in client.get("/admin/login/?next=/admin/").content.decode()


def test_turning_local_login_off_ends_password_sessions_but_not_sso_ones(client, sso_on, settings):
    otto = User.objects.create_user("otto", password="pw", is_staff=True)
    otto.groups.add(_group("queenadmin operators"))
    local, admin = Client(), Client()
    for c in (local, admin):
        c.force_login(otto, backend="django.contrib.auth.backends.ModelBackend")
        assert c.get("/").status_code == 200
    assert sign_in(client, sso_on).status_code == 302
    settings.QUEENADMIN_LOCAL_LOGIN = False
    assert local.get("/")["Location"] == "/login/?next=/"
    assert admin.get("/admin/")["Location"].startswith("/login/")
    assert BACKEND_SESSION_KEY not in admin.session
    assert client.get("/").status_code == 200
