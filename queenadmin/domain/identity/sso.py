"""Single sign-on: who may sign in through the OpenID provider, as what.

The protocol itself (the redirect, state, nonce, PKCE, the code exchange,
the ID token's signature) is mozilla-django-oidc's, driven by
``dashboard/sso.py``; this module holds the rules applied to the claims it
verified, and the one write they make (``sso_sign_in``):

- The e-mail address (the ``email`` claim, lower-cased) is the account's
  name. A provider that says it has not verified it (``email_verified``
  false) is refused; one that says nothing about it is believed.
- The allowlist: an address whose domain is one of
  ``OIDC_ALLOWED_DOMAINS`` (each exact: ``example.com`` does not take
  ``eng.example.com``), or one of ``OIDC_ALLOWED_EMAILS``; ``*`` among the
  domains takes anyone the provider signs in.
- The role: the highest role whose values (``OIDC_SUPERUSER_VALUES``,
  ``OIDC_OPERATOR_VALUES``, ``OIDC_VIEWER_VALUES``) the role claim holds,
  else ``OIDC_DEFAULT_ROLE``; no role is a refusal. It is set again at
  every sign-in, so a group taken away at the provider demotes the account
  at its next sign-in.
- Single sign-on makes and manages only accounts without a usable
  password: a local account of the same name is refused (an administrator
  hands it over by removing its password), so a provider's account can
  never take over a local one, its password or its second factor. A
  refused sign-in of an account single sign-on manages takes its role
  away at once (its other sessions lose access at their next page).
- Signing in through the provider skips queenadmin's second factor: the
  provider owns that (``dashboard/twofactor.py``). Failed-login lockout
  counts local logins only.

Every sign-in and every refusal is audited: ``login.sso`` and
``login.sso_refused``, via ``sso``.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.signals import setting_changed
from django.db import IntegrityError, transaction

from queenadmin.conf import settings
from queenadmin.domain import clock
from queenadmin.domain.audit import Who
from queenadmin.domain.identity.discovery import url_refusal
from queenadmin.domain.roles import ROLE_GROUPS, ROLES, Role, role_of

SIGN_IN = "login.sso"
REFUSED = "login.sso_refused"
VIA = "sso"

#: What ``OIDC_SIGNING_ALGORITHM`` may be: the families mozilla-django-oidc
#: verifies (RS and ES with the provider's keys, HS with the client secret).
SIGNING_ALGORITHMS = ("RS256", "RS384", "RS512", "ES256", "ES384", "ES512", "HS256", "HS384", "HS512")
DEFAULT_ROLES = ("none", "viewers", "operators")
#: Django's user name field holds this many characters.
MAX_NAME = 150


class BadConfiguration(Exception):
    """Single sign-on settings the server refuses to start with."""


@dataclass(frozen=True)
class SsoConfig:
    """The single sign-on settings, parsed once (``sso_config``)."""

    #: "": single sign-on is off.
    issuer: str
    provider_name: str
    client_id: str
    client_secret: str
    scopes: str
    signing_algorithm: str
    allow_anyone: bool
    allowed_domains: frozenset[str]
    allowed_emails: frozenset[str]
    #: The role claim's path: ``realm_access.roles`` -> ("realm_access", "roles").
    role_claim: tuple[str, ...]
    #: Role -> the claim values that give it.
    role_values: dict[Role, frozenset[str]]
    default_role: Role | None
    local_login: bool
    logout_at_provider: bool

    @property
    def enabled(self) -> bool:
        return bool(self.issuer)


def _items(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _parse() -> SsoConfig:
    s = settings
    issuer = s.OIDC_ISSUER.strip()
    domains = {d.lower().lstrip("@") for d in _items(s.OIDC_ALLOWED_DOMAINS)}
    default_role = s.OIDC_DEFAULT_ROLE.strip().lower()
    return SsoConfig(
        issuer=issuer,
        provider_name=s.OIDC_PROVIDER_NAME.strip() or (urlsplit(issuer).hostname or "") if issuer else "",
        client_id=s.OIDC_CLIENT_ID.strip(),
        client_secret=s.OIDC_CLIENT_SECRET,
        scopes=" ".join(s.OIDC_SCOPES.split()),
        signing_algorithm=s.OIDC_SIGNING_ALGORITHM.strip(),
        allow_anyone="*" in domains,
        allowed_domains=frozenset(domains - {"*"}),
        allowed_emails=frozenset(e.lower() for e in _items(s.OIDC_ALLOWED_EMAILS)),
        role_claim=tuple(part for part in s.OIDC_ROLE_CLAIM.strip().split(".") if part),
        role_values={
            "superuser": frozenset(_items(s.OIDC_SUPERUSER_VALUES)),
            "operators": frozenset(_items(s.OIDC_OPERATOR_VALUES)),
            "viewers": frozenset(_items(s.OIDC_VIEWER_VALUES)),
        },
        default_role=default_role if default_role in ROLES else None,
        local_login=s.LOCAL_LOGIN,
        logout_at_provider=s.OIDC_LOGOUT_AT_PROVIDER,
    )


def _refusal(config: SsoConfig) -> str | None:
    s = settings
    if not config.enabled:
        if not config.local_login:
            return (
                "QUEENADMIN_LOCAL_LOGIN=0 needs single sign-on (QUEENADMIN_OIDC_ISSUER): without either, nobody"
                " could log in"
            )
        return None
    refused = url_refusal(config.issuer)
    if refused is not None:
        return f"QUEENADMIN_OIDC_ISSUER={config.issuer!r} is no issuer URL: {refused}"
    if not config.client_id or not config.client_secret:
        return "QUEENADMIN_OIDC_ISSUER needs QUEENADMIN_OIDC_CLIENT_ID and QUEENADMIN_OIDC_CLIENT_SECRET (from the provider)"
    scopes = config.scopes.split()
    if "openid" not in scopes or "email" not in scopes:
        return f"QUEENADMIN_OIDC_SCOPES={config.scopes!r} must hold openid and email (the allowlist reads the address)"
    if config.signing_algorithm not in SIGNING_ALGORITHMS:
        return f"QUEENADMIN_OIDC_SIGNING_ALGORITHM={config.signing_algorithm!r} is not one of {', '.join(SIGNING_ALGORITHMS)}"
    if not (config.allow_anyone or config.allowed_domains or config.allowed_emails):
        return (
            "single sign-on needs an allowlist: QUEENADMIN_OIDC_ALLOWED_DOMAINS (`*` for anyone the provider"
            " signs in) or QUEENADMIN_OIDC_ALLOWED_EMAILS"
        )
    for domain in config.allowed_domains:
        if "@" in domain or " " in domain or "." not in domain.strip("."):
            return f"QUEENADMIN_OIDC_ALLOWED_DOMAINS: {domain!r} is not a domain name (example.com)"
    for email in config.allowed_emails:
        if email.count("@") != 1 or " " in email or not all(email.split("@")):
            return f"QUEENADMIN_OIDC_ALLOWED_EMAILS: {email!r} is not an e-mail address"
    if not config.role_claim:
        return "QUEENADMIN_OIDC_ROLE_CLAIM is empty: name the claim with the user's groups or roles"
    default_role = s.OIDC_DEFAULT_ROLE.strip().lower()
    if default_role not in DEFAULT_ROLES:
        return f"QUEENADMIN_OIDC_DEFAULT_ROLE={s.OIDC_DEFAULT_ROLE!r} is not one of {', '.join(DEFAULT_ROLES)}"
    return None


_config: SsoConfig | None = None
_config_lock = threading.Lock()


def sso_config() -> SsoConfig:
    """The single sign-on settings, parsed at the first call after a settings
    change; raise ``BadConfiguration`` (naming the setting) for settings
    ``serve`` refuses to start with."""
    global _config
    config = _config
    if config is None:
        with _config_lock:
            config = _parse()
            refused = _refusal(config)
            if refused is not None:
                raise BadConfiguration(refused)
            _config = config
    return config


def sso_start_refusal() -> str | None:
    """Why the server must not start with these single sign-on settings, or
    None. A provider that cannot be reached yet is no refusal: its
    discovery document is read at the first sign-in."""
    try:
        sso_config()
    except BadConfiguration as exc:
        return str(exc)
    return None


def sso_offered() -> SsoConfig | None:
    """The settings when the login pages offer single sign-on, else None
    (off, or refused at start: ``serve`` would not be running)."""
    try:
        config = sso_config()
    except BadConfiguration:
        return None
    return config if config.enabled else None


def local_login_allowed() -> bool:
    """Whether accounts may log in with a password (``LOCAL_LOGIN``, unless
    it is off without single sign-on, which ``serve`` refuses)."""
    return bool(settings.LOCAL_LOGIN) or sso_offered() is None


def _forget(**kwargs: Any) -> None:
    global _config
    with _config_lock:
        _config = None


setting_changed.connect(_forget, dispatch_uid="queenadmin.domain.identity.sso.forget")


# -- the rules ------------------------------------------------------------------


def claim_values(claims: Mapping[str, Any], path: tuple[str, ...]) -> frozenset[str]:
    """The strings at ``path`` in ``claims``: one string, or an array's strings."""
    found: Any = claims
    for part in path:
        if not isinstance(found, Mapping):
            return frozenset()
        found = found.get(part)
    if isinstance(found, str):
        return frozenset({found})
    if isinstance(found, list | tuple):
        return frozenset(v for v in found if isinstance(v, str))
    return frozenset()


def sso_role(config: SsoConfig, claims: Mapping[str, Any]) -> Role | None:
    """The role the claims give: the highest whose values the role claim
    holds, else the default role (None: no role)."""
    held = claim_values(claims, config.role_claim)
    for role in reversed(ROLES):
        if held & config.role_values[role]:
            return role
    return config.default_role


def sso_allowed(config: SsoConfig, email: str) -> bool:
    """Whether the allowlist takes ``email`` (lower case)."""
    if config.allow_anyone or email in config.allowed_emails:
        return True
    return email.rpartition("@")[2] in config.allowed_domains


@dataclass(frozen=True, slots=True)
class Decision:
    """What the rules say of a set of claims: an address and a role, or why not."""

    email: str
    role: Role | None
    refusal: str


def sso_decide(config: SsoConfig, claims: Mapping[str, Any]) -> Decision:
    """The rules of the module applied to verified ``claims`` (no account read)."""
    raw = claims.get("email")
    email = raw.strip().lower() if isinstance(raw, str) else ""
    if not email or email.count("@") != 1 or not all(email.split("@")):
        return Decision("", None, f"{config.provider_name} sent no e-mail address for this account.")
    if claims.get("email_verified") is False:
        return Decision(email, None, f"{config.provider_name} has not verified the address {email}.")
    if len(email) > MAX_NAME:
        return Decision(email, None, f"The address {email} is longer than {MAX_NAME} characters.")
    if not sso_allowed(config, email):
        return Decision(email, None, f"{email} may not sign in here: the address is not on the allowlist.")
    role = sso_role(config, claims)
    if role is None:
        claim = ".".join(config.role_claim)
        return Decision(email, None, f"{email} has no role here: its {claim} claim names no group mapped to a role.")
    return Decision(email, role, "")


# -- the write ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SsoSignIn:
    """The outcome of a sign-in: the account and its role, or the refusal."""

    #: The account's name (its e-mail address); "" when the provider sent none.
    username: str
    #: None: refused.
    user_id: int | None
    role: Role | None
    #: Why it was refused, said to the user; "" when signed in.
    refusal: str


def _set_role(user: Any, role: Role | None) -> None:
    assert transaction.get_connection().in_atomic_block
    user.is_staff = role is not None
    user.is_superuser = role == "superuser"
    user.save(update_fields=["is_staff", "is_superuser"])
    keep = ROLE_GROUPS.get(role) if role is not None else None
    user.groups.remove(*Group.objects.filter(name__in=[g for g in ROLE_GROUPS.values() if g != keep]))
    if keep is not None:
        user.groups.add(Group.objects.get(name=keep))


def _shown(role: Role | None) -> str:
    return f"role: {role}" if role is not None else "no role"


@transaction.atomic(durable=True)
def sso_sign_in(*, claims: Mapping[str, Any]) -> SsoSignIn:
    """Apply the module's rules to the provider's verified ``claims``: make
    or update the account and set its role (``login.sso``), or refuse
    (``login.sso_refused``, taking away the role of an account single
    sign-on manages).

    Return the outcome; a refusal is an outcome, not an exception. The
    outermost call.
    """
    config = sso_config()
    decision = sso_decide(config, claims)
    now = clock.now()
    subject = str(claims.get("sub") or "")
    model = get_user_model()
    user = model.objects.select_for_update().filter(username=decision.email).first() if decision.email else None
    refusal = decision.refusal
    if not refusal and user is not None:
        if user.has_usable_password():
            refusal = (
                f"A local account is named {decision.email}: an administrator can hand it to single sign-on"
                " by removing its password."
            )
        elif not user.is_active:
            refusal = f"The account {decision.email} is deactivated here."
    if refusal:
        before = after = "refused"
        if user is not None and not user.has_usable_password() and user.is_active:
            held = role_of(user)
            if held is not None:
                _set_role(user, None)
                before, after = _shown(held), "refused; role taken away"
        Who(decision.email or f"sub {subject}", refusal, VIA).record_in_txn(
            now=now, action=REFUSED, target=decision.email or subject, before=before, after=after
        )
        return SsoSignIn(decision.email, None, None, refusal)
    created = user is None
    if user is None:
        try:
            with transaction.atomic():
                user = model.objects.create_user(decision.email, email=decision.email)
        except IntegrityError:
            # Made meanwhile by a sign-in in another tab.
            user = model.objects.select_for_update().get(username=decision.email)
    held = role_of(user)
    _set_role(user, decision.role)
    names = {
        "email": decision.email,
        "first_name": str(claims.get("given_name") or "")[:MAX_NAME],
        "last_name": str(claims.get("family_name") or "")[:MAX_NAME],
    }
    changed = [field for field, value in names.items() if getattr(user, field) != value]
    for field in changed:
        setattr(user, field, names[field])
    if changed:
        user.save(update_fields=changed)
    Who(decision.email, "", VIA).record_in_txn(
        now=now,
        action=SIGN_IN,
        target=decision.email,
        before="new account" if created else _shown(held) if held != decision.role else "",
        after=_shown(decision.role),
    )
    return SsoSignIn(decision.email, user.pk, decision.role, "")
