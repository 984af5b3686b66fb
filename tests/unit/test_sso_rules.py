"""Single sign-on's rules without a provider: the claim -> role mapping, the
allowlist, the start-up refusals and the discovery document's checks
(domain/identity/sso.py and discovery.py)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import override_settings

from queenadmin.domain.identity import sso
from queenadmin.domain.identity.discovery import ProviderUnavailable, metadata_of
from queenadmin.domain.roles import role_of
from queenadmin.models import AuditEntry
from tests.roles import role_group as _group

ON = {
    "QUEENADMIN_OIDC_ISSUER": "https://idp.example.com/realms/ops",
    "QUEENADMIN_OIDC_CLIENT_ID": "queenadmin",
    "QUEENADMIN_OIDC_CLIENT_SECRET": "s3cret",
    "QUEENADMIN_OIDC_ALLOWED_DOMAINS": "example.com, @Example.org",
    "QUEENADMIN_OIDC_ALLOWED_EMAILS": "Ann@Partner.test",
}


@pytest.fixture
def config():
    with override_settings(**ON):
        yield sso.sso_config()


def test_the_highest_mapped_role_wins_whatever_the_claims_shape(config):
    role = sso.sso_role
    assert role(config, {"groups": ["staff", "queenadmin-viewers", "queenadmin-operators"]}) == "operators"
    assert role(config, {"groups": "queenadmin-viewers"}) == "viewers"
    assert role(config, {"groups": ["staff"]}) is None
    assert role(config, {"groups": [1, None, {"a": "queenadmin-operators"}]}) is None
    assert role(config, {}) is None


def test_a_dotted_role_claim_reads_a_nested_one_and_values_are_configurable():
    with override_settings(
        **ON,
        QUEENADMIN_OIDC_ROLE_CLAIM="realm_access.roles",
        QUEENADMIN_OIDC_SUPERUSER_VALUES="qa-admin",
        QUEENADMIN_OIDC_OPERATOR_VALUES="qa-ops,sre",
        QUEENADMIN_OIDC_DEFAULT_ROLE="viewers",
    ):
        config = sso.sso_config()
        assert sso.sso_role(config, {"realm_access": {"roles": ["sre"]}}) == "operators"
        assert sso.sso_role(config, {"realm_access": {"roles": ["sre", "qa-admin"]}}) == "superuser"
        # The old values mean nothing now; the default role applies.
        assert sso.sso_role(config, {"realm_access": {"roles": ["queenadmin-operators"]}}) == "viewers"
        assert sso.sso_role(config, {"realm_access": "sre"}) == "viewers"
        assert sso.sso_role(config, {"groups": ["qa-ops"]}) == "viewers"


def test_the_allowlist_takes_exact_domains_and_listed_addresses(config):
    allowed = sso.sso_allowed
    assert allowed(config, "bob@example.com")
    assert allowed(config, "eve@example.org")
    assert allowed(config, "ann@partner.test")
    assert not allowed(config, "bob@eng.example.com")
    assert not allowed(config, "bob@example.com.evil.test")
    assert not allowed(config, "carl@partner.test")
    with override_settings(**{**ON, "QUEENADMIN_OIDC_ALLOWED_DOMAINS": "*", "QUEENADMIN_OIDC_ALLOWED_EMAILS": ""}):
        assert allowed(sso.sso_config(), "anyone@anywhere.test")


def test_decisions_name_why(config):
    decide = sso.sso_decide
    ok = decide(config, {"email": " Bob@Example.COM ", "groups": ["queenadmin-operators"]})
    assert (ok.email, ok.role, ok.refusal) == ("bob@example.com", "operators", "")
    assert "sent no e-mail address" in decide(config, {"groups": ["queenadmin-operators"]}).refusal
    assert "sent no e-mail address" in decide(config, {"email": "not-an-address"}).refusal
    unverified = decide(config, {"email": "bob@example.com", "email_verified": False})
    assert "has not verified" in unverified.refusal
    assert "not on the allowlist" in decide(config, {"email": "x@elsewhere.test"}).refusal
    assert "has no role here: its groups claim" in decide(config, {"email": "bob@example.com"}).refusal
    assert "longer than 150" in decide(config, {"email": "b" * 140 + "@example.com"}).refusal


@pytest.fixture
def groups(db):
    _group("queenadmin viewers")
    _group("queenadmin operators")


def test_a_superuser_claim_makes_a_superuser_and_the_next_sign_in_takes_it_back(groups):
    with override_settings(**ON, QUEENADMIN_OIDC_SUPERUSER_VALUES="root"):
        done = sso.sso_sign_in(claims={"sub": "1", "email": "ann@partner.test", "groups": ["root"]})
        user = User.objects.get(pk=done.user_id)
        assert (done.role, user.is_superuser, user.is_staff, role_of(user)) == ("superuser", True, True, "superuser")
        sso.sso_sign_in(claims={"sub": "1", "email": "ann@partner.test", "groups": ["queenadmin-viewers"]})
        user.refresh_from_db()
        assert (user.is_superuser, role_of(user)) == (False, "viewers")
        assert list(user.groups.values_list("name", flat=True)) == ["queenadmin viewers"]


def test_a_deactivated_account_is_refused_and_stays_as_it_is(groups, config):
    first = sso.sso_sign_in(claims={"email": "bob@example.com", "groups": ["queenadmin-operators"]})
    User.objects.filter(pk=first.user_id).update(is_active=False)
    again = sso.sso_sign_in(claims={"email": "bob@example.com", "groups": ["queenadmin-operators"]})
    assert (again.user_id, again.refusal) == (None, "The account bob@example.com is deactivated here.")
    user = User.objects.get(pk=first.user_id)
    assert (user.is_active, user.groups.count()) == (False, 1)


def test_a_refusal_without_an_address_names_the_sub(groups, config):
    sso.sso_sign_in(claims={"sub": "abc-123"})
    entry = AuditEntry.objects.get(action="login.sso_refused")
    assert (entry.actor, entry.target, entry.after) == ("sub abc-123", "abc-123", "refused")


# -- start-up -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("configured", "refusal"),
    [
        (
            {"QUEENADMIN_OIDC_ISSUER": "http://idp.example.com"},
            "QUEENADMIN_OIDC_ISSUER='http://idp.example.com' is no issuer URL: plain http://",
        ),
        (
            {"QUEENADMIN_OIDC_ISSUER": "idp.example.com"},
            "QUEENADMIN_OIDC_ISSUER='idp.example.com' is no issuer URL: not an https:// URL",
        ),
        ({"QUEENADMIN_OIDC_ISSUER": "https://idp.example.com/?realm=x"}, "is no issuer URL: it has a query"),
        ({"QUEENADMIN_OIDC_ISSUER": "https://idp.example.com:99999"}, "is no issuer URL: not a URL"),
        ({"QUEENADMIN_OIDC_CLIENT_SECRET": ""}, "QUEENADMIN_OIDC_ISSUER needs QUEENADMIN_OIDC_CLIENT_ID and"),
        (
            {"QUEENADMIN_OIDC_SCOPES": "openid profile"},
            "QUEENADMIN_OIDC_SCOPES='openid profile' must hold openid and email",
        ),
        ({"QUEENADMIN_OIDC_SIGNING_ALGORITHM": "none"}, "QUEENADMIN_OIDC_SIGNING_ALGORITHM='none' is not one of"),
        (
            {"QUEENADMIN_OIDC_ALLOWED_DOMAINS": "", "QUEENADMIN_OIDC_ALLOWED_EMAILS": ""},
            "single sign-on needs an allowlist",
        ),
        (
            {"QUEENADMIN_OIDC_ALLOWED_DOMAINS": "bob@example.com"},
            "QUEENADMIN_OIDC_ALLOWED_DOMAINS: 'bob@example.com' is not a domain",
        ),
        ({"QUEENADMIN_OIDC_ALLOWED_EMAILS": "bob"}, "QUEENADMIN_OIDC_ALLOWED_EMAILS: 'bob' is not an e-mail address"),
        ({"QUEENADMIN_OIDC_ROLE_CLAIM": " "}, "QUEENADMIN_OIDC_ROLE_CLAIM is empty"),
        ({"QUEENADMIN_OIDC_DEFAULT_ROLE": "superuser"}, "QUEENADMIN_OIDC_DEFAULT_ROLE='superuser' is not one of none"),
        (
            {"QUEENADMIN_OIDC_ISSUER": "", "QUEENADMIN_LOCAL_LOGIN": False},
            "QUEENADMIN_LOCAL_LOGIN=0 needs single sign-on",
        ),
    ],
)
def test_start_up_refuses_settings_that_cannot_work(configured, refusal):
    with override_settings(**{**ON, **configured}):
        said = sso.sso_start_refusal()
        assert said is not None
        assert refusal in said, said
        assert sso.sso_offered() is None
        with pytest.raises(SystemExit):
            call_command("serve", "--host", "127.0.0.1", "--port", "0", "--no-migrate")


def test_start_up_takes_working_settings_without_reaching_the_provider():
    """The provider is read at the first sign-in, not at start."""
    for configured in (
        ON,
        {**ON, "QUEENADMIN_OIDC_ISSUER": "http://127.0.0.1:9", "QUEENADMIN_LOCAL_LOGIN": False},
        {**ON, "QUEENADMIN_OIDC_ALLOWED_DOMAINS": "", "QUEENADMIN_OIDC_DEFAULT_ROLE": "Viewers"},
        {"QUEENADMIN_OIDC_ISSUER": ""},
    ):
        with override_settings(**configured):
            assert sso.sso_start_refusal() is None
    with override_settings(**ON):
        config = sso.sso_offered()
        assert config is not None
        assert config.provider_name == "idp.example.com"
        assert config.local_login
        assert sso.local_login_allowed()


# -- discovery ------------------------------------------------------------------------

ISSUER = "https://idp.example.com/realms/ops"
DOCUMENT = {
    "issuer": ISSUER,
    "authorization_endpoint": f"{ISSUER}/auth",
    "token_endpoint": f"{ISSUER}/token",
    "jwks_uri": f"{ISSUER}/certs",
}


def test_the_discovery_document_gives_the_endpoints_and_what_the_provider_takes():
    found = metadata_of(ISSUER + "/", DOCUMENT)
    assert (found.issuer, found.token_endpoint, found.userinfo_endpoint, found.end_session_endpoint) == (
        ISSUER,
        f"{ISSUER}/token",
        "",
        "",
    )
    assert (found.pkce_s256, found.basic_auth) == (False, True)
    post_only = {**DOCUMENT, "token_endpoint_auth_methods_supported": ["client_secret_post"]}
    assert not metadata_of(ISSUER, post_only).basic_auth
    assert metadata_of(ISSUER, {**DOCUMENT, "code_challenge_methods_supported": ["plain", "S256"]}).pkce_s256


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"issuer": "https://evil.example.com"}, "names the issuer 'https://evil.example.com'"),
        ({"token_endpoint": None}, "has no token_endpoint"),
        ({"jwks_uri": "http://idp.example.com/certs"}, "jwks_uri 'http://idp.example.com/certs': plain http://"),
        ({"end_session_endpoint": 7}, "has no end_session_endpoint"),
    ],
)
def test_a_discovery_document_for_another_issuer_or_without_https_is_refused(change, said):
    with pytest.raises(ProviderUnavailable, match=said):
        metadata_of(ISSUER, {**DOCUMENT, **change})
