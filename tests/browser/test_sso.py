"""Single sign-on in a real browser, at a real OpenID provider (tests/oidc).

One ``serve`` configured for the provider (allowlist ``example.com``,
``queenadmin-operators`` -> operators) and one provider process serve the
module. Its users: ``olga`` (example.com, an operator), ``mallory``
(elsewhere.test, outside the allowlist).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests import oidc
from tests.browser.conftest import shot
from tests.conftest import LiveServer, free_port, run_server

pytestmark = pytest.mark.skipif(
    not oidc.available(), reason="needs node and tests/oidc's npm packages (.ci/install-system installs them)"
)

PROVIDER_NAME = "Test IdP"


@pytest.fixture(scope="module")
def sso() -> Iterator[tuple[LiveServer, oidc.Provider]]:
    port = free_port()
    env = {
        "QUEENADMIN_OIDC_ISSUER": f"http://127.0.0.1:{port}",
        "QUEENADMIN_OIDC_PROVIDER_NAME": PROVIDER_NAME,
        "QUEENADMIN_OIDC_CLIENT_ID": oidc.CLIENT_ID,
        "QUEENADMIN_OIDC_CLIENT_SECRET": oidc.CLIENT_SECRET,
        "QUEENADMIN_OIDC_SCOPES": "openid email profile groups",
        "QUEENADMIN_OIDC_ALLOWED_DOMAINS": "example.com",
        # The second factor is the provider's: an SSO operator is not asked for ours.
        "QUEENADMIN_REQUIRE_2FA": "1",
    }
    with (
        run_server(extra_env=env) as server,
        oidc.run_provider(
            port=port,
            redirect_uri=f"{server.url}/login/sso/callback/",
            post_logout_redirect_uri=f"{server.url}/login/",
        ) as provider,
    ):
        yield server, provider


def _page(browser: Any) -> Any:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(15_000)
    return page


def _sign_in_at_provider(page: Any, server: LiveServer, provider: oidc.Provider, login: str) -> None:
    page.goto(f"{server.url}/login/")
    shot(page, "sso-login")
    page.click(f"text=Sign in with {PROVIDER_NAME}")
    page.wait_for_url(f"{provider.issuer}/**")
    page.fill("input[name=login]", login)
    page.fill("input[name=password]", "any password will do")
    page.click("button[type=submit]")


def test_an_allowed_user_signs_in_with_the_mapped_role_and_logs_out(browser, sso):
    """olga signs in at the provider, lands as an operator (the tokens page,
    operators only, is hers), and logging out ends her session here and at
    the provider."""
    server, provider = sso
    page = _page(browser)
    try:
        _sign_in_at_provider(page, server, provider, "olga")
        page.wait_for_url(f"{server.url}/")
        assert page.locator(".who").inner_text().startswith("olga@example.com")
        assert page.locator("nav.nav a[href='/tokens/']").count() == 1
        assert page.locator("text=Two-factor").count() == 0
        page.goto(f"{server.url}/tokens/")
        assert page.locator("h1").inner_text() == "API tokens"
        shot(page, "sso-signed-in")
        page.click("form.logout button")
        # Our logout, then the provider's: it asks before ending its session.
        page.wait_for_url(f"{provider.issuer}/**")
        page.click("text=Yes, sign me out")
        page.wait_for_url(f"{server.url}/login/")
        page.goto(f"{server.url}/tokens/")
        page.wait_for_url(f"{server.url}/login/?next=/tokens/")
        # The provider's session is gone too: it asks who you are again.
        page.click(f"text=Sign in with {PROVIDER_NAME}")
        page.wait_for_url(f"{provider.issuer}/**")
        assert page.locator("input[name=login]").count() == 1
    finally:
        page.context.close()


def test_a_user_outside_the_allowlist_is_refused_and_no_account_is_made(browser, sso):
    server, provider = sso
    page = _page(browser)
    try:
        with page.expect_response(lambda r: "/login/sso/callback/" in r.url) as answer:
            _sign_in_at_provider(page, server, provider, "mallory")
        assert answer.value.status == 403
        assert page.locator("h1").inner_text() == "Sign-in refused"
        assert "not on the allowlist" in page.locator("#sso-refusal").inner_text()
        shot(page, "sso-refused")
        page.goto(f"{server.url}/")
        page.wait_for_url(f"{server.url}/login/?next=/")
    finally:
        page.context.close()
    found = json.loads(
        server.manage(
            "shell",
            "-c",
            "import json\n"
            "from django.contrib.auth.models import User\n"
            "from queenadmin.models import AuditEntry\n"
            "print(json.dumps({'users': sorted(User.objects.filter(username__contains='@')"
            ".values_list('username', flat=True)),"
            " 'audit': sorted(AuditEntry.objects.filter(via='sso').values_list('action', 'target'))}))",
        )
        .strip()
        .splitlines()[-1]
    )
    assert "mallory@elsewhere.test" not in found["users"]
    assert ["login.sso_refused", "mallory@elsewhere.test"] in found["audit"]
